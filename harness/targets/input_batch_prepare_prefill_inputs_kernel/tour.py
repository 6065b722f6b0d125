"""The tour of ``input_batch_prepare_prefill_inputs_kernel``'s production extremes
(docs/CONTRACT.md §14.2): few programs, long prompts."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, Scale, Shape
from ...targetkit.runner_v2 import BLOCK
from .layout import build


def _long_prompts(rng: np.random.Generator, scale: Scale) -> Case:
    """Up to 4 rows in a 40000-token context: a chunk of 1025-4096 tokens (two blocks or more)
    of a long prompt, a chunk starting past token 32767 of a prompt past it, the lookahead past
    32767 too, and a decoding row."""
    W = 40000
    B = int(rng.integers(3, 5))
    R = B + int(rng.integers(0, 3))
    rows = rng.permutation(R)[:B]
    table = np.zeros((R, W), dtype=np.int64)  # the tokens read are drawn below (a compact reproducer)
    prefill = rng.integers(1, W, size=R)
    counts = rng.integers(0, W, size=R)
    q = np.ones(B, dtype=np.int64)
    s0, s1, s2 = rows[0], rows[1], rows[2]
    q[0] = int(rng.integers(BLOCK + 1, 4 * BLOCK))
    prefill[s0], counts[s0] = int(rng.integers(q[0] + 1, W)), 0
    prefill[s1] = W - int(rng.integers(0, 64))
    counts[s1] = int(rng.integers(INT16_MAX + 1, prefill[s1] - 8))
    q[1] = int(rng.integers(1, prefill[s1] - counts[s1]))
    prefill[s2], counts[s2] = 100, int(rng.integers(100, W - 8))
    for b, s in enumerate(rows[:2]):
        lo = int(counts[s])
        hi = min(int(prefill[s]), lo + int(q[b]) + 8)
        table[s, lo:hi] = rng.integers(1, 32000, size=hi - lo)
    return build(rows, q, table, prefill, counts, int(rng.integers(1, 9)))


SHAPES = (Shape("long_prompts", 4, _long_prompts),)
