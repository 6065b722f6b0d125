"""The tour of ``_post_update_kernel``'s production extremes (docs/CONTRACT.md §19.2): a long
context's history and a large vocabulary's penalties counts, with few rows."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, Scale, Shape
from .layout import State, build


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """Up to 4 state rows of a 40000-token history and Qwen's 151936-id vocabulary: histories
    past 32767 tokens, sampled ids past 32767 counted (the penalties' rows), up to 16 drafts."""
    R = int(rng.integers(2, 5))
    B = int(rng.integers(1, R + 1))
    rows = rng.permutation(R)[:B]
    K, W, V = int(rng.integers(1, 17)), 40000, 151936
    nl = rng.integers(1, K + 2, size=B)
    ns = np.array([int(rng.integers(1, n + 1)) for n in nl])
    sampled = rng.integers(INT16_MAX + 1, V, size=(B, K + 1))
    t = rng.integers(0, 1000, size=R)
    t[rows] = rng.integers(INT16_MAX - 8, W - K - 1, size=B)
    history = np.zeros((R, W), dtype=np.int64)  # the history's tokens are never read
    bins = np.zeros((R, V), dtype=np.int64)
    bins[rows[:, None], sampled[:, :1]] = 1  # a token sampled before
    return build(rows, nl, sampled, ns, nl - ns, State(rng.integers(0, 100000, size=R), t, history, bins))


SHAPES = (Shape("long_context", 4, _long_context),)
