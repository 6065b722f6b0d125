"""The default strategies reach every semantic feature of every target (no kernel runs here)."""

from __future__ import annotations

import pytest
from hypothesis import Phase, given, settings
from hypothesis import seed as hseed

from eaglefuzz.harness.strategies import INTERPRETER_SCALE, derive_seed
from eaglefuzz.harness.targets import TARGETS

EXAMPLES = 400


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_default_strategy_reaches_every_feature(name, fuzz_seed):
    target = TARGETS[name]
    reached: set[str] = set()

    @settings(max_examples=EXAMPLES, phases=[Phase.generate], database=None)
    @hseed(derive_seed(fuzz_seed, "features", name))
    @given(target.strategy(INTERPRETER_SCALE))
    def collect(case):
        target.validate(case)  # generated in-contract, by construction
        reached.update(target.features_of(case))

    collect()
    missed = sorted(set(target.features) - reached)
    assert not missed, f"{name}: {EXAMPLES} default examples never reach {missed}"
    assert reached <= set(target.features), f"features_of returns undeclared names: {sorted(reached - set(target.features))}"


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_bulk_generator_reaches_every_feature(name):
    import numpy as np

    target = TARGETS[name]
    rng = np.random.default_rng(derive_seed(0, "bulk-features", name))
    reached: set[str] = set()
    for _ in range(400):
        case = target.random_case(rng, INTERPRETER_SCALE)
        target.validate(case)
        reached |= target.features_of(case)
    missed = sorted(set(target.features) - reached)
    assert not missed, f"400 bulk cases of {name} never reach {missed}"
