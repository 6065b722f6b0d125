"""The tour of ``eagle_prepare_next_token_padded_kernel``'s production extremes (docs/CONTRACT.md
§3.2): cheap-but-large shapes, cheapest first, that every default run checks.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    ID16_MAX,
    INT32_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    Scale,
    Shape,
)
from .layout import build


def _rows(rng: np.random.Generator, R: int, S: int, vocab: int, low: int = 0) -> np.ndarray:
    """``R`` sampler rows: ``k >= 1`` ids from ``[low, vocab)``, then -1 (docs/CONTRACT.md §3.2)."""
    rows = np.full((R, S), -1, dtype=np.int64)
    for r in range(R):
        k = int(rng.integers(1, S + 1))
        rows[r, :k] = rng.integers(low, vocab, size=k)
    return rows


def _kept_inputs(rng: np.random.Generator, R: int, kept: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """discard mask (the first ``kept`` requests kept, the others now and then discarded, the
    buffer sometimes longer than R) and backup ids of a ``vocab``-id vocabulary."""
    n = R + (0 if rng.random() < 0.5 else int(rng.integers(1, 9)))
    discard = rng.random(n) < 0.3
    discard[:kept] = False
    backup = rng.integers(0, vocab, size=n, dtype=np.int32)
    return discard, backup


def _wide_rows(rng: np.random.Generator, scale: Scale) -> Case:
    """num_speculative_tokens of 16-32 on a 256k vocabulary: rows of 17-33 columns, one full
    row whose next token (past 65535) sits in column 16 or later, one with 16+ rejected columns."""
    R, S = int(rng.integers(3, 9)), int(rng.integers(SPEC_TOKENS + 2, 34))
    vocab = int(rng.choice([256000, 262144, 256008, 1 << 20]))
    rows = _rows(rng, R, S, vocab)
    rows[0, :S] = rng.integers(ID16_MAX + 1, vocab, size=S)
    rows[1, :S] = -1
    rows[1, : int(rng.integers(1, S - 15))] = rng.integers(0, vocab)
    order = rng.permutation(R)
    discard, backup = _kept_inputs(rng, R, 0, vocab)
    discard[[int(np.flatnonzero(order == 0)[0]), int(np.flatnonzero(order == 1)[0])]] = False
    return build(rows[order].astype(np.int32), discard, backup, vocab, S, None, None)


def _int32_limits(rng: np.random.Generator, scale: Scale) -> Case:
    """The int32 limit: vocab_size 2**31-1 and ids up to its largest, 2**31-2 (request 0 keeps
    one and ends its valid prefix with it)."""
    R, S = int(rng.integers(2, 6)), int(rng.integers(2, 9))
    vocab = INT32_MAX
    rows = _rows(rng, R, S, vocab, low=INT32_MAX - 64)
    k = int(rng.integers(1, S + 1))
    rows[0, :] = -1
    rows[0, :k] = rng.choice([INT32_MAX - 1, INT32_MAX - 2, 0], size=k)
    rows[0, k - 1] = INT32_MAX - 1
    discard, backup = _kept_inputs(rng, R, 1, vocab)
    backup[0] = INT32_MAX - 1
    return build(rows.astype(np.int32), discard, backup, vocab, S, None, None)


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1152 requests of 1-4 columns."""
    R, S = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 129)), int(rng.integers(1, 5))
    vocab = int(rng.choice([32000, 128256, 151936]))
    discard, backup = _kept_inputs(rng, R, 0, vocab)
    return build(_rows(rng, R, S, vocab).astype(np.int32), discard, backup, vocab, S, None, None)


SHAPES = (
    Shape("int32_limits", 5, _int32_limits),
    Shape("wide_rows", 12, _wide_rows),
    Shape("many_requests", MAX_NUM_SEQS + 128, _many_requests),
)
