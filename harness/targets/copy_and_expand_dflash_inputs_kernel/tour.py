"""The tour of ``copy_and_expand_dflash_inputs_kernel``'s production extremes (docs/CONTRACT.md §9.2):
cheap-but-large shapes, cheapest first, that every default run checks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    FLOAT32_EXACT,
    INT16_MAX,
    INT32_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    Scale,
    Shape,
    cdiv,
)
from .layout import MAX_SPEC_TOKENS, VOCAB, block_row, build


def _shape_case(rng: np.random.Generator, reqs: list[dict[str, Any]], K: int, bs: int) -> Case:
    """``reqs`` (positions and rows) with random rejected counts and 256k-vocabulary ids,
    launched as vLLM launches it."""
    for q in reqs:
        q.update(rejected=int(rng.integers(0, len(q["positions"]))), next=int(rng.integers(0, VOCAB)))
    return build(reqs, has_num_rejected=bool(rng.integers(0, 2)), K=K, block_size=bs,
                 mask_id=int(rng.integers(INT16_MAX * 2 + 2, VOCAB)), launch={})  # fmt: skip


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """max_model_len in the millions (past 2**24), W = cdiv(M, bs) as vLLM's table, K = 15-32:
    one or two requests whose queries end near M - 1 (the drafter gate), their last blocks'
    ids within 2**16 slots of the int32 limit (the null block 0 elsewhere)."""
    bs = int(rng.choice([1056, 2112]))  # hybrid models' block sizes keep W near 16k
    M = FLOAT32_EXACT + int(rng.integers(4096, 1 << 16))
    W = cdiv(M, bs)
    top = (INT32_MAX - bs + 1) // bs
    K = int(rng.integers(SPEC_TOKENS, MAX_SPEC_TOKENS + 1))
    reqs = []
    for _ in range(int(rng.integers(1, 3))):
        n = int(rng.integers(1, 65))
        row = np.zeros(W, dtype=np.int64)
        first = (M - 256) // bs
        row[first:] = rng.integers(top - 7, top, size=W - first, endpoint=True)
        p0 = M - n - (K + 1) - int(rng.integers(0, 64))
        reqs.append({"positions": p0 + np.arange(n, dtype=np.int64), "row": row.astype(np.int32)})
    return _shape_case(rng, reqs, K, bs)


def _huge_offsets(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_batched_tokens of 32k and more: a prefill of 32768-33280 tokens and a short
    request (2 x 131 programs at most)."""
    M = int(rng.integers(1 << 16, 1 << 17))
    bs = int(rng.choice([64, 128, 256]))
    W = cdiv(M, bs)
    lengths = [int(rng.integers(INT16_MAX + 1, INT16_MAX + 514)), int(rng.integers(1, 17))]
    K = int(rng.integers(1, 16))
    reqs = [{"positions": int(rng.integers(0, M - n - K)) + np.arange(n, dtype=np.int64),
             "row": block_row(int(rng.integers(0, 1 << 16)), 1, W)} for n in rng.permutation(lengths)]  # fmt: skip
    return _shape_case(rng, reqs, K, bs)


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 requests of 1-3 tokens with K = 31-32 (R * Q past 32767)."""
    W = int(rng.integers(3, 7))
    M = W * 16
    K = int(rng.integers(31, MAX_SPEC_TOKENS + 1))
    reqs = []
    for n in rng.integers(1, 4, size=int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65))).tolist():
        p0 = int(rng.integers(0, M - n - K))
        reqs.append({"positions": p0 + np.arange(n, dtype=np.int64), "row": block_row(int(rng.integers(0, 1 << 20)), 1, W)})
    return _shape_case(rng, reqs, K, 16)


SHAPES = (
    Shape("long_context", 2, _long_context),
    Shape("huge_offsets", 262, _huge_offsets),
    Shape("many_requests", MAX_NUM_SEQS + 64, _many_requests),
)
