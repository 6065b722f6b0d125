"""What a caller of ``create_vllm_config_for_draft_model`` relies on (docs/CONTRACT.md §5): the properties ``eaglefuzz audit``
checks on one implementation's outputs (:mod:`...checking.audit`)."""

from __future__ import annotations

from typing import Any

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property
from .record import TARGET, build_config


def dc_model_config_set(case: Case, o: Observation) -> str | None:
    if o.result is not None and o.result.model_config is None:
        return "the drafter's config has model_config = None: get_model() has no model to load"
    return None


PROPERTIES: tuple[Property, ...] = (
        Property("draft_model_config_set", "the drafter's config names a model (model_config is not None)",
                 dc_model_config_set),
    )
"""The properties, in the order the audit reports them."""


def run(case: Case, impl: Any, device: str) -> Any:
    """``impl`` called on ``case``'s configs: what the properties look at (``None`` without a
    speculative config, where the function must raise: nothing to check)."""
    if not case.scalars["speculative_config_present"]:
        return None
    return TARGET.call(impl, build_config(case, TARGET.types))


AUDIT = Audit(PROPERTIES, run=run)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
