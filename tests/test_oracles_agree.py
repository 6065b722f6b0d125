"""The two oracles agree with each other, on large random batches, without any kernel.

On the strategies' cases they are compared in tests/test_features.py
(``test_default_strategy_reaches_every_feature``: 200 examples per target and the tour), where
those cases are drawn anyway.
"""

from __future__ import annotations

import numpy as np
import pytest

from eaglefuzz.harness.generation.strategies import Scale, derive_seed
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


