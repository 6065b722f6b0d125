"""The tour of production extremes of ``rejection_greedy_sample_kernel`` (docs/CONTRACT.md
§10): cheap-but-large shapes, cheapest first. A case costs its programs (one per request)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import MAX_NUM_SEQS, Scale, Shape
from ...targetkit.draft_rows import MAX_VOCAB
from .layout import GREEDY_MODES, build


def _sixteen_drafts(rng: np.random.Generator, scale: Scale) -> Case:
    """num_speculative_tokens = 16 over Gemma 3's vocabulary: up to 8 requests, one with 16
    drafts, the others ragged (0 to 16), ids near the top of the vocabulary (past 32767)."""
    B = int(rng.integers(1, 9))
    counts = [int(x) for x in rng.integers(0, 17, size=B)]
    counts[int(rng.integers(0, B))] = 16
    return build(counts, 16, V=MAX_VOCAB, seed=int(rng.integers(0, 1 << 32)), greedy=str(rng.choice(GREEDY_MODES)),
                 match=float(rng.choice([0.9, 0.97, 1.0])), pad=0.1, synthetic=bool(rng.random() < 0.2),
                 ids="top")  # fmt: skip


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 requests with 0 to 4 drafts each, ids past 32767."""
    B = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65))
    L = int(rng.integers(1, 5))
    counts = [int(x) for x in rng.integers(0, L + 1, size=B)]
    counts[-1] = L
    return build(counts, L, V=MAX_VOCAB, seed=int(rng.integers(0, 1 << 32)), greedy=str(rng.choice(["none", "mixed"])),
                 match=0.9, pad=0.1, synthetic=bool(rng.random() < 0.2), ids="top")  # fmt: skip


SHAPES = (
    Shape("sixteen_drafts", 8, _sixteen_drafts),
    Shape("many_requests", MAX_NUM_SEQS + 64, _many_requests),
)
