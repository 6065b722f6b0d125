"""The tour of ``_flatten_sampled_kernel``'s production extremes (docs/CONTRACT.md §24.2),
cheapest first."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, MAX_NUM_SEQS, Scale, Shape
from .layout import build, draw_rows


def _top_ids(rng: np.random.Generator, scale: Scale) -> Case:
    """Gemma 3's vocabulary: up to 8 rows of up to 16 drafts, ids past 32767."""
    B, K = int(rng.integers(1, 9)), int(rng.integers(1, 17))
    logits = rng.integers(1, K + 2, size=B)
    kept = [int(rng.integers(1, n + 1)) for n in logits]
    ids = rng.integers(INT16_MAX + 1, 262144, size=sum(kept))
    return build(draw_rows(ids, kept, K), kept, logits)


def _many_rows(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 rows of up to 4 logits."""
    B, K = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65)), int(rng.integers(1, 4))
    logits = rng.integers(1, K + 2, size=B)
    kept = [int(rng.integers(1, n + 1)) for n in logits]
    return build(draw_rows(rng.integers(0, 32000, size=sum(kept)), kept, K), kept, logits)


SHAPES = (
    Shape("top_ids", 8, _top_ids),
    Shape("many_rows", MAX_NUM_SEQS + 64, _many_rows),
)
