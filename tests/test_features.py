"""The default runs reach every semantic feature of every target (no kernel runs here).

Production extremes (a target's ``extremes``: more than 1024 requests, offsets past 32767,
prefills of thousands of tokens, 16+ columns or rejected slots, ids past 65535, positions past
2**24, r * P past 32767, the int32 limits) are reached by the tour of every default run,
whatever the seed; a default run (the CLI's chunks and seeds, its tour included) reaches every
feature but the scale features (``Target.scale_features``: production scale, device mode only),
each ordinary one from its generator body's cases, so its table notes none as missed on clean
code (each body's share per feature: tests/test_generator_coverage.py).
"""

from __future__ import annotations

import inspect

import pytest

from eaglefuzz.harness.checking import fuzz
from eaglefuzz.harness.checking.corpus import case_hash
from eaglefuzz.harness.generation.strategies import (
    CUDA_SCALE,
    INTERPRETER_SCALE,
    affordable,
)
from eaglefuzz.harness.sources import Implementations
from eaglefuzz.harness.targets import TARGETS

DEFAULT_EXAMPLES = 100
"""What ``eaglefuzz fuzz`` runs by default."""


class _AllReached(BaseException):
    """Every feature is reached: a BaseException, so that Hypothesis stops at once rather than
    take it for a failure."""
TOURED = sorted(n for n, t in TARGETS.items() if t.shapes)
"""Targets with a tour of production extremes (``shapes``)."""


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_default_run_reaches_every_feature(name, fuzz_seed, monkeypatch, warm_oracles):
    """A default run (``eaglefuzz fuzz``: :func:`~.fuzz.fuzz_target`, 100 examples, the tour
    and four chunks of the run's seed) reaches every feature, so its table never notes one as
    missed on clean code; the two oracles agree on every one of those examples (the strategy
    half of tests/test_oracles_agree.py: drawing the cases is the cost, so they are drawn once
    for both). The check is replaced by the oracles' (no kernel runs); the run stops once every
    feature is reached."""
    target = TARGETS[name]
    stats = fuzz.Stats()

    def oracles_only(case, *args, **kwargs):  # noqa: ANN001, ANN202
        target.validate(case)  # generated in-contract, by construction
        assert target.oracle_check(case) == [], case
        if stats.features >= set(target.features) - set(target.scale_features):
            raise _AllReached

    monkeypatch.setattr(fuzz, "check_case", oracles_only)
    try:
        fuzz.fuzz_target(name, Implementations({}, {}), "cpu", INTERPRETER_SCALE, seed=fuzz_seed,
                         examples=DEFAULT_EXAMPLES, stats=stats)
    except _AllReached:
        pass
    missed = sorted(set(target.features) - set(target.scale_features) - stats.features)
    assert not missed, f"{name}: a default run ({stats.examples} examples, seed {fuzz_seed}) never reaches {missed}"
    assert stats.features <= set(target.features), (
        f"features_of returns undeclared names: {sorted(stats.features - set(target.features))}")


@pytest.mark.parametrize("name", TOURED)
def test_tour_reaches_every_extreme(name):
    """Every seed's tour reaches each production extreme, cheapest shape first."""
    target = TARGETS[name]
    assert target.extremes, f"{name} has a tour but declares no production extremes"
    assert set(target.extremes) <= set(target.features)
    costs = [s.programs for s in target.shapes]
    assert costs == sorted(costs), f"{name}: shapes must come cheapest first"
    for seed in range(8):
        reached: set[str] = set()
        for case in fuzz.tour(name, INTERPRETER_SCALE, seed):
            target.validate(case)
            reached |= target.features_of(case)
        missed = sorted(set(target.extremes) - reached)
        assert not missed, f"{name}: the tour of seed {seed} misses {missed}"


def test_the_five_original_targets_have_a_tour():
    assert {"copy_and_expand_eagle_inputs_kernel", "eagle_prepare_inputs_padded_kernel",
            "eagle_prepare_next_token_padded_kernel", "extend_all_queries_by_N",
            "create_vllm_config_for_draft_model"} <= set(TOURED)


@pytest.mark.parametrize("scale", [INTERPRETER_SCALE, CUDA_SCALE], ids=["interpreter", "cuda"])
@pytest.mark.parametrize("mode", ["hypothesis", "bulk"])
@pytest.mark.parametrize("name", TOURED)
def test_default_run_checks_the_tour_at_its_slots(name, mode, scale, monkeypatch):
    """A default run (either mode) checks the tour's cases at their slots: the shapes the scale
    affords open the run, the costlier ones open chunk 1; so 100 examples reach every extreme,
    and under the interpreter a thousand-program launch waits until an ordinary case has had its
    chance."""
    target = TARGETS[name]
    seen: list = []
    default_run = inspect.signature(fuzz.fuzz_target).parameters["examples"].default
    assert fuzz.tour_slots(name, scale)[-1] < default_run  # a default run reaches them all
    monkeypatch.setattr(fuzz, "check_case", lambda case, *a, **k: seen.append(case))
    monkeypatch.setattr(fuzz, "CHUNK", 5)  # fewer ordinary draws between the slots, same rule
    run = fuzz.fuzz_target if mode == "hypothesis" else fuzz.bulk_fuzz_target
    slots = fuzz.tour_slots(name, scale)
    fits = affordable(target.shapes, scale)
    assert slots == sorted(set(slots)), "one example per shape, cheapest first"
    for shape, slot in zip(target.shapes, slots, strict=True):  # affordable: chunk 0; costly: chunk 1
        assert slot // fuzz.CHUNK == (0 if shape in fits else 1), (shape.name, slot)
    assert slots[0] == 0 and all(b == a + 1 for a, b in zip(slots, slots[1:], strict=False) if b < fuzz.CHUNK)
    if scale is CUDA_SCALE:
        assert slots == list(range(len(target.shapes)))  # a GPU affords every shape: all open the run
    run(name, Implementations({}, {}), "cpu", scale, seed=3, examples=slots[-1] + 1)
    assert len(seen) == slots[-1] + 1
    toured = [seen[i] for i in slots]
    reached = set().union(*(target.features_of(c) for c in toured))
    assert set(target.extremes) <= reached, sorted(set(target.extremes) - reached)
    # the tour is the same cases wherever they run (Hypothesis mode: from the run's seed)
    if mode == "hypothesis":
        assert [case_hash(c) for c in toured] == [case_hash(c) for c in fuzz.tour(name, scale, 3)]


@pytest.mark.parametrize("name", TOURED)
def test_strategies_draw_extreme_shapes_that_fit_the_scale(name):
    """The interpreter's strategy leaves out shapes of more programs than the scale allows;
    a GPU's draws them all."""
    shapes = TARGETS[name].shapes
    assert all(s.programs <= INTERPRETER_SCALE.max_programs for s in affordable(shapes, INTERPRETER_SCALE))
    assert affordable(shapes, CUDA_SCALE) == list(shapes)
