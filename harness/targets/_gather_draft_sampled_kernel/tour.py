"""The tour of ``_gather_draft_sampled_kernel``'s production extremes (docs/CONTRACT.md §23.2):
more than one block of logits rows, positions of a long context."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, Scale, Shape
from ...targetkit.runner_v2 import BLOCK, MAX_MODEL_LEN
from .layout import Row, build


def _many_logits(rng: np.random.Generator, scale: Scale) -> Case:
    """65-200 rows of 16 drafts (1025 logits rows and more: two blocks or three), decoding or
    starting inside their prompts, positions past 32767 (a 131072-token context)."""
    B = int(rng.integers(BLOCK // 17 + 5, 200))
    R = B + int(rng.integers(0, 16))
    s = rng.permutation(R)[:B]
    rows, prompts = [], rng.integers(1, 4000, size=R)
    for x in s:
        nl = int(rng.integers(13, 18))
        c = int(rng.integers(INT16_MAX, MAX_MODEL_LEN - 64))
        rows.append(Row(int(x), c, nl, nl))
        prompts[x] = c + int(rng.integers(1, nl)) if rng.random() < 0.2 else int(rng.integers(1, c))
    return build(rows, rng.integers(0, 262144, size=sum(r.qlen for r in rows)), prompts)


SHAPES = (Shape("many_logits", 3, _many_logits),)
