"""The tour of ``_expand_idx_mapping_kernel``'s production extremes (docs/CONTRACT.md §17.2),
cheapest first."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import MAX_NUM_SEQS, Scale, Shape
from .layout import build


def _sixteen_drafts(rng: np.random.Generator, scale: Scale) -> Case:
    """num_speculative_tokens of 15 or 16: up to 8 rows, one with all 16-17 logits."""
    B = int(rng.integers(1, 9))
    K = int(rng.integers(15, 17))
    logits = rng.integers(1, K + 2, size=B)
    logits[int(rng.integers(0, B))] = K + 1
    return build(rng.permutation(B + int(rng.integers(0, 8)))[:B], logits, K + 1)


def _many_rows(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 rows of 1 to 4 logits."""
    B = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65))
    K = int(rng.integers(1, 4))
    return build(rng.permutation(B + int(rng.integers(0, 64)))[:B], rng.integers(1, K + 2, size=B), K + 1)


SHAPES = (
    Shape("sixteen_drafts", 8, _sixteen_drafts),
    Shape("many_rows", MAX_NUM_SEQS + 64, _many_rows),
)
