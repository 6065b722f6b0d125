"""The tour of ``_post_update_num_computed_tokens_kernel``'s production extremes (docs/CONTRACT.md
§20.2): cheap shapes (one program per row) that every default run checks."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, Scale, Shape
from ...targetkit.runner_v2 import MAX_MODEL_LEN
from .layout import build


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """Up to 8 rows of a 131072-token context, their counts past 32767 (long prompts, long
    generations), one a chunk that carries its count across 32767, and a long prefill chunk
    whose end, and the later rows' starts, lie past token 32767 (``max_num_batched_tokens`` of
    32k and more)."""
    B = int(rng.integers(3, 9))
    R = B + int(rng.integers(0, 8))
    rows = rng.permutation(R)[:B]
    qlens = [int(x) for x in rng.integers(1, 5, size=B)]
    qlens[0] = int(rng.integers(INT16_MAX + 1, INT16_MAX + 4096))
    counts = rng.integers(0, 1024, size=R)
    counts[rows[1:]] = rng.integers(INT16_MAX + 1, MAX_MODEL_LEN - 8, size=B - 1)
    counts[rows[1]] = INT16_MAX - int(rng.integers(0, qlens[1]))  # crosses 32767 with its chunk
    return build(rows, qlens, counts)


SHAPES = (Shape("long_context", 8, _long_context),)
