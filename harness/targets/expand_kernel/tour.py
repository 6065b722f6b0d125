"""The tour of production extremes of ``expand_kernel`` (docs/CONTRACT.md §12): cheap-but-large
shapes, cheapest first. A case costs its programs (one per request)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import MAX_NUM_SEQS, Scale, Shape
from ...targetkit.draft_rows import MAX_SPEC_LEN, MAX_VOCAB
from .layout import USES, build


def _full_rows(rng: np.random.Generator, scale: Scale) -> Case:
    """Rows of vLLM's largest draft count (128 = MAX_SPEC_LEN = MAX_NUM_TOKENS): up to 8
    requests, one of exactly 128 tokens; top-k of Gemma 3's vocabulary (no top-k: 262144)."""
    B = int(rng.integers(1, 9))
    counts = [int(x) for x in rng.integers(0, MAX_SPEC_LEN + 1, size=B)]
    counts[int(rng.integers(0, B))] = MAX_SPEC_LEN
    return build(counts, use="top_k", seed=int(rng.integers(0, 1 << 32)), V=MAX_VOCAB)


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 requests with 0 to 4 tokens each, vLLM's data."""
    B = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65))
    counts = [int(x) for x in rng.integers(0, 5, size=B)]
    return build(counts, use=str(rng.choice(USES)), seed=int(rng.integers(0, 1 << 32)), V=MAX_VOCAB)


SHAPES = (
    Shape("full_rows", 8, _full_rows),
    Shape("many_requests", MAX_NUM_SEQS + 64, _many_requests),
)
