"""The extended tier of ``create_vllm_config_for_draft_model``: docs/CONTRACT.md §5.4.

A speculative config whose ``draft_model_config`` is ``None`` (``spec.draft_model_config_present:
false``; vLLM's ``SpeculativeConfig`` always fills it for the draft-model method): the function
still returns, with ``model_config = None``. A missing ``draft_parallel_config`` makes
``dataclasses.replace`` raise ``TypeError``: not generated (the harness compares results and the
one required exception, ``AssertionError``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.base import ContractViolation

KEY = "spec.draft_model_config_present"


FEATURES = {"draft_model_config_missing": "speculative_config.draft_model_config is None: model_config = None"}


def validate(case: Case, production_validate: Any) -> None:
    """The production rules, with :data:`KEY` (a bool) allowed when a speculative config is."""
    if KEY not in case.scalars:
        production_validate(case)
        return
    if not isinstance(case.scalars[KEY], bool):
        raise ContractViolation(f"scalars.{KEY}", "must be true or false")
    production_validate(_without(case))


def _without(case: Case) -> Case:
    return Case(case.kernel, case.arrays, {k: v for k, v in case.scalars.items() if k != KEY}, case.launch, case.note)


def features_of(case: Case) -> frozenset[str]:
    s = case.scalars
    missing = s.get(KEY) is False and s["speculative_config_present"]
    return frozenset({"draft_model_config_missing"}) if missing else frozenset()


def with_edge(case: Case, missing: bool) -> Case:
    return case.replace(scalars={KEY: not missing, "speculative_config_present": True}) if missing else case


def body(c: Chooser, scale: Scale, production: Callable[[Chooser, Scale], Case]) -> Case:
    """A production case, its speculative config without a draft model config half the time:
    edges first (Hypothesis's first draws are its simplest: a short run still meets one)."""
    case = production(c, scale)
    return with_edge(case, c.choice([True, False]))


def random_case(production: Callable[[Chooser, Scale], Case], rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale, production)


def strategy(production: Callable[[Chooser, Scale], Case], scale: Scale) -> Any:
    return as_strategy(body, scale, production)


def shrink_candidates(case: Case) -> Iterator[Case]:
    if KEY in case.scalars:
        yield _without(case)
