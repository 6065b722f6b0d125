"""The extended tier of ``create_vllm_config_for_draft_model``: docs/CONTRACT.md §5.4.

What vLLM's only caller, ``DraftModelProposer``, never hands the function: no speculative
config (the function must raise ``AssertionError``), a speculative method other than
``draft_model``, a drafter of another tensor-parallel size than the target's (the function
copies it like any other field), and a speculative config whose ``draft_model_config`` is
``None`` (``spec.draft_model_config_present: false``; vLLM's ``SpeculativeConfig`` always fills it
for the draft-model method): the function still returns, with ``model_config = None``. A
missing ``draft_parallel_config`` makes ``dataclasses.replace`` raise ``TypeError``: not
generated (the harness compares results and the one required exception, ``AssertionError``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.base import ContractViolation, draw_production
from . import cases
from .layout import PRODUCTION_METHOD, SAME_AS_TARGET, SPEC_METHODS
from .tour import SHAPES

KEY = "spec.draft_model_config_present"


FEATURES = {
    "draft_model_config_missing": "speculative_config.draft_model_config is None: model_config = None",
    "no_speculative_config": "speculative_config is None: the function must assert",
    "spec_method_not_draft_model": "a speculative method other than draft_model",
    "draft_tp_differs": "the drafter's tensor_parallel_size differs from the target's",
}


def validate(case: Case, production_validate: Any) -> None:
    """``production_validate`` (the fields' encodings, without vLLM's rules), with :data:`KEY`
    (a bool) allowed."""
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
    if not s["speculative_config_present"]:
        return frozenset({"no_speculative_config"})
    checks = {
        "draft_model_config_missing": s.get(KEY) is False,
        "spec_method_not_draft_model": SPEC_METHODS[s["spec.method"]] != PRODUCTION_METHOD,
        "draft_tp_differs": any(s[f"draft_parallel.{f}"] != s[f"target_parallel.{f}"] for f in SAME_AS_TARGET),
    }
    return frozenset(k for k, hit in checks.items() if hit)


def with_edge(case: Case, missing: bool) -> Case:
    return case.replace(scalars={KEY: not missing, "speculative_config_present": True}) if missing else case


def production(c: Chooser, scale: Scale) -> Case:
    """A production case, as the record draws it: now and then a shape of the tour, else
    ``cases.body``."""
    return draw_production(c, scale, SHAPES, cases.body)


def body(c: Chooser, scale: Scale) -> Case:
    """A production case, its speculative config without a draft model config half the time,
    of another method or another tensor-parallel size now and then, or none at all: edges
    first (Hypothesis's first draws are its simplest: a short run still meets one)."""
    case = with_edge(production(c, scale), c.choice([True, False]))
    changes: dict[str, Any] = {}
    if c.choice([True, False]):
        changes["spec.method"] = c.choice([i for i, m in enumerate(SPEC_METHODS) if m != PRODUCTION_METHOD])
    if c.choice([True, False]):
        tp = case.scalars["target_parallel.tensor_parallel_size"]
        changes["draft_parallel.tensor_parallel_size"] = c.choice([t for t in (1, 2, 4, 8, tp + 1) if t != tp])
    if c.chance(0.2):
        changes["speculative_config_present"] = False
    return case.replace(scalars=changes) if changes else case


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    if KEY in case.scalars:
        yield _without(case)
