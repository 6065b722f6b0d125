"""The tour of ``_combine_sampled_and_draft_tokens_kernel``'s production extremes
(docs/CONTRACT.md §16.2): few programs, a long batch, a large vocabulary."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, Scale, Shape
from .layout import Row, build


def _long_batch(rng: np.random.Generator, scale: Scale) -> Case:
    """A prefill chunk of 32k-36k tokens first (the later rows' logits past token 32767), then
    up to 7 decoding rows with up to 16 drafts over Gemma 3's vocabulary (ids past 32767)."""
    B = int(rng.integers(2, 9))
    R = B + int(rng.integers(0, 8))
    s = rng.permutation(R)[:B]
    K = int(rng.integers(1, 17))
    rows = [Row(int(s[0]), int(rng.integers(INT16_MAX + 1, INT16_MAX + 4096)), 0, 0)]
    prompts = rng.integers(1, 4000, size=R)
    prompts[s[0]] = rows[0].qlen + int(rng.integers(1, 4000))
    for x in s[1:]:
        d = int(rng.integers(0, K + 1))
        rows.append(Row(int(x), d + 1, int(rng.integers(100, 4000)), d))
        prompts[x] = int(rng.integers(1, 100))
    V = 262144
    return build(rows, prompts, rng.integers(INT16_MAX + 1, V, size=R), rng.integers(INT16_MAX + 1, V, size=(R, K)))


SHAPES = (Shape("long_batch", 8, _long_batch),)
