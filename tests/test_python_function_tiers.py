"""The production tiers of the two Python functions are vLLM's (docs/CONTRACT.md §4.2, §5.2): each
draw that vLLM's call site cannot produce is the extended tier's (§4.4, §5.4), in every mode.

For each moved draw: the production tier (the bulk generator, the Hypothesis strategy and the
tour of production extremes) never draws it, ``validate`` refuses it there, and the extended
tier's generators draw it. No implementation runs: drawing the cases is the whole cost (about
two seconds per target, once: the draws are cached for the module).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import seed as hseed

from eaglefuzz.harness.checking import fuzz
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE, derive_seed
from eaglefuzz.harness.targets import TARGETS, ContractViolation

EXTEND = "extend_all_queries_by_N"
DRAFT = "create_vllm_config_for_draft_model"

MOVED = {
    EXTEND: ("empty_batch", "empty_query", "n_zero", "padded_batch", "padded_token_count", "query_len_above_max",
             "non_causal", "device_copies_on_cpu", "ids_outside_vllm", "near_int32_limit", "at_int32_limit"),
    DRAFT: ("no_speculative_config", "spec_method_not_draft_model", "draft_tp_differs"),
}
"""Target -> the extended tier's features that the production tier drew before it was
calibrated on vLLM (each one an input vLLM's caller does not produce)."""

BULK, DRAWN = 300, 100


@functools.cache
def production_draws(name: str) -> tuple[Case, ...]:
    """Every production-tier case a default run could start from: bulk, strategy and tour."""
    target = TARGETS[name]
    rng = np.random.default_rng(derive_seed(0, "calibrated-tier", name))
    cases = [target.random_case(rng, INTERPRETER_SCALE) for _ in range(BULK)]

    @settings(max_examples=DRAWN, phases=[Phase.generate], database=None, deadline=None)
    @hseed(derive_seed(0, "calibrated-tier-strategy", name))
    @given(target.strategy(INTERPRETER_SCALE))
    def collect(case: Case) -> None:
        cases.append(case)

    collect()
    for s in range(4):
        cases += fuzz.tour(name, INTERPRETER_SCALE, s)
    return tuple(cases)


@functools.cache
def extended_draws(name: str) -> tuple[Case, ...]:
    target = TARGETS[name]
    rng = np.random.default_rng(derive_seed(0, "calibrated-tier-edges", name))
    return tuple(target.extended_case(rng, INTERPRETER_SCALE) for _ in range(BULK))


@pytest.mark.parametrize(("name", "edge"), [(n, e) for n, edges in MOVED.items() for e in edges])
def test_a_draw_vllm_cannot_produce_is_the_extended_tiers(name, edge):
    target = TARGETS[name]
    assert edge in target.extended_features
    drawn = [c for c in production_draws(name) if edge in target.extended_features_of(c)]
    assert not drawn, f"the production tier of {name} draws {edge} ({target.extended_features[edge]}): {drawn[0]}"
    edged = [c for c in extended_draws(name) if edge in target.extended_features_of(c)]
    assert edged, f"the extended tier of {name} never draws {edge}"
    with pytest.raises(ContractViolation):
        target.validate(edged[0])
    target.validate(edged[0], "extended")


def test_every_production_draw_lies_in_the_production_tier():
    for name in MOVED:
        for case in production_draws(name):
            TARGETS[name].validate(case)
