"""The tour of production extremes of ``rejection_random_sample_kernel`` (docs/CONTRACT.md
§11): cheap-but-large shapes, cheapest first. A case costs its programs (one per request) and
its tables (``N * V`` float32, copied into guarded buffers)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.probabilities import KINDS
from ...generation.strategies import MAX_NUM_SEQS, Scale, Shape
from ...targetkit.draft_rows import MAX_VOCAB
from .layout import build


def _big_vocab(rng: np.random.Generator, scale: Scale) -> Case:
    """Gemma 3's vocabulary: one or two requests of 1 to 3 drafts drawn from sparse rows over
    262144 ids (most past 32767; zeros elsewhere keep the case's file small), the target's rows
    equal to the draft's: every quotient is 1, so every draft is accepted, its id written
    (no uniform lies in the division window: §11.2)."""
    B = int(rng.integers(1, 3))
    counts = [int(rng.integers(1, 4)) for _ in range(B)]
    return build(counts, max(counts), V=MAX_VOCAB, seed=int(rng.integers(0, 1 << 32)),
                 target_kind="sparse", draft_kind="sparse", relation="equal")  # fmt: skip


def _sixteen_drafts(rng: np.random.Generator, scale: Scale) -> Case:
    """num_speculative_tokens = 16: up to 4 requests, one of 16 drafts, the others ragged;
    tables close to each other (acceptance runs long); without draft probabilities now and
    then, the uniforms then at the boundary ``u = p``."""
    B = int(rng.integers(1, 5))
    counts = [int(x) for x in rng.integers(0, 17, size=B)]
    counts[int(rng.integers(0, B))] = 16
    return build(counts, 16, V=int(rng.choice([100, 1000])), seed=int(rng.integers(0, 1 << 32)),
                 target_kind=str(rng.choice(["peaked", "random"])), draft_kind=[None, "peaked", "random"][int(rng.integers(0, 3))],
                 relation=str(rng.choice(["equal", "close"])), boundary=0.5, pad=0.1)  # fmt: skip


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 requests with 0 to 3 drafts, a small vocabulary."""
    B = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65))
    L = int(rng.integers(1, 4))
    counts = [int(x) for x in rng.integers(0, L + 1, size=B)]
    counts[-1] = L
    return build(counts, L, V=int(rng.choice([16, 64])), seed=int(rng.integers(0, 1 << 32)),
                 target_kind=str(rng.choice(KINDS)), draft_kind=str(rng.choice(KINDS)),
                 greedy=str(rng.choice(["all_random", "mixed"])), boundary=0.3, pad=0.1)  # fmt: skip


SHAPES = (
    Shape("big_vocab", 2, _big_vocab),
    Shape("sixteen_drafts", 4, _sixteen_drafts),
    Shape("many_requests", MAX_NUM_SEQS + 64, _many_requests),
)
