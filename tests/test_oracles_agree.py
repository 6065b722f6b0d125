"""The two oracles agree with each other, on large random batches, without any kernel."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import seed as hseed

from eaglefuzz.harness.strategies import INTERPRETER_SCALE, Scale, derive_seed
from eaglefuzz.harness.targets import TARGETS

LARGE = Scale(max_requests=4000, request_tail=8000, max_query_len=64, max_programs=1 << 30)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_oracles_agree_on_large_random_batches(name, warm_oracles):
    target = TARGETS[name]
    rng = np.random.default_rng(derive_seed(0, "oracles-large", name))
    requests = 0
    for _ in range(10):
        case = target.random_case(rng, LARGE)
        target.validate(case)
        requests += int(case.scalars.get("num_reqs", len(case.arrays.get("query_start_loc", (0,))) - 1) or 0)
        assert target.oracle_check(case) == []
    assert requests >= 1000 or not requests, f"batches of {name} too small: {requests} requests in all"


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_oracles_agree_on_strategy_cases(name, warm_oracles, fuzz_seed):
    target = TARGETS[name]

    @settings(max_examples=60, database=None)
    @hseed(derive_seed(fuzz_seed, "oracles", name))
    @given(target.strategy(INTERPRETER_SCALE))
    def run(case):
        assert target.oracle_check(case) == []

    run()
