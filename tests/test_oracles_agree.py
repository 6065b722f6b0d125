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




def test_the_vectorized_scatter_lets_the_last_write_win():
    """The NumPy oracles' scatter: distinct indices written as given (the fast path); a repeated
    index holds its last value; an index out of range or negative takes the sorted path."""
    from eaglefuzz.oracles import vectorized

    buf = np.zeros(6, dtype=np.int32)
    vectorized._scatter(buf, np.array([4, 0, 2]), np.array([7, 8, 9]))
    assert buf.tolist() == [8, 0, 9, 0, 7, 0]
    vectorized._scatter(buf, np.array([1, 3, 1, 5, 3]), np.array([1, 2, 3, 4, 5]))
    assert buf.tolist() == [8, 3, 9, 5, 7, 4]
    vectorized._scatter(buf, np.array([-1, 5]), np.array([6, 1]))
    assert buf.tolist() == [8, 3, 9, 5, 7, 1]
    assert not vectorized._distinct(np.array([0, 6]), 6) and vectorized._distinct(np.array([5, 0]), 6)
