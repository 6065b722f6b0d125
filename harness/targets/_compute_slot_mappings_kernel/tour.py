"""The tour of ``_compute_slot_mappings_kernel``'s production extremes (docs/CONTRACT.md §22.2):
few programs, long chunks and a wide buffer."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import Scale, Shape
from ...targetkit.runner_v2 import BLOCK, MAX_MODEL_LEN
from .layout import build, widths_for


def _long_chunk(rng: np.random.Generator, scale: Scale) -> Case:
    """A 131072-token model in blocks of 16: a prefill chunk of 1025-4096 tokens among up to 3
    decodes, with and without context parallelism, and a buffer 1025 tokens wider or more
    (``max_num_batched_tokens`` past the step's)."""
    B = int(rng.integers(1, 5))
    R = B + int(rng.integers(0, 3))
    rows = rng.permutation(R)[:B]
    CP = int(rng.choice([1, 2, 4]))
    sizes, sharded = [16, 64], [CP > 1, False]
    widths = widths_for(MAX_MODEL_LEN, sizes, sharded, CP)
    qlens = [int(rng.integers(BLOCK + 1, 4 * BLOCK))] + [1] * (B - 1)
    starts = rng.integers(0, MAX_MODEL_LEN - 4 * BLOCK, size=B)
    pos = np.concatenate([s + np.arange(q) for s, q in zip(starts, qlens, strict=True)])
    tables = [np.zeros((R, w), dtype=np.int64) for w in widths]  # block ids where the rows' positions are
    for r, s, q in zip(rows, starts, qlens, strict=True):
        for t, bs, sh in zip(tables, sizes, sharded, strict=True):
            span = bs * (CP if sh else 1)
            lo, hi = int(s) // span, (int(s) + q - 1) // span + 1
            t[r, lo:hi] = rng.integers(1, 1 << 20, size=hi - lo)
    T = sum(qlens)
    return build(rows, qlens, pos, tables, sizes, [True, True], sharded, T + int(rng.integers(BLOCK + 1, 3 * BLOCK)),
                 (CP, int(rng.integers(0, CP)), 1))


SHAPES = (Shape("long_chunk", 10, _long_chunk),)
