"""The tour of production extremes of ``update_num_computed_tokens_for_batch_change``
(docs/CONTRACT.md §8): cheap-but-large shapes. A Python function costs its array sizes;
compiled cases keep to one graph (every size >= 2, the same storage offsets).
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    FLOAT32_EXACT,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    Scale,
    Shape,
)
from .layout import MODES, build


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """Counts of long contexts (every corrected count up to 2**30, most past 2**24), 15-31 drafts
    per request: 2-16 requests, one of them with all K drafts and K + 1 valid tokens, its
    corrected count past 2**24."""
    n = int(rng.integers(2, 17))
    K = int(rng.integers(SPEC_TOKENS, 32))
    case = build(
        n, n + int(rng.integers(0, 5)), str(rng.choice(MODES)),
        extra=int(rng.integers(0, 9)), order="shuffled", new_share=0.2, values="long",
        seed=int(rng.integers(0, 1 << 32)), K=K,
    )  # fmt: skip
    a = {k: v.copy() for k, v in case.arrays.items()}
    prev = a["prev_positions"]
    if prev[0] < 0:  # a previous row no request has (P >= n: one is free)
        prev[0] = int(np.setdiff1d(np.arange(len(a["valid_sampled_token_count"])), prev)[0])
    g = int(prev[0])
    a["num_computed_tokens"][g] = max(int(a["num_computed_tokens"][g]), FLOAT32_EXACT + 1)
    a["prev_num_draft_tokens"][g] = K
    a["valid_sampled_token_count"][g] = K + 1
    return case.replace(arrays=a)


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 requests, previous batches of about as many."""
    n = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65))
    return build(
        n, n + int(rng.integers(-16, 17)), str(rng.choice(MODES)),
        extra=int(rng.integers(0, 65)), order=str(rng.choice(["identity", "shuffled"], p=[0.4, 0.6])),
        new_share=float(rng.choice([0.0, 0.2, 0.5])), values=str(rng.choice(["small", "long"])),
        seed=int(rng.integers(0, 1 << 32)), K=int(rng.integers(1, SPEC_TOKENS + 1)),
    )  # fmt: skip


SHAPES = (
    Shape("long_context", 1, _long_context),
    Shape("many_requests", 1, _many_requests),
)
