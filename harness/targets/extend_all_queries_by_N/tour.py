"""The tour of ``extend_all_queries_by_N``'s production extremes (docs/CONTRACT.md §4.2): one case of
each shape that every default run checks (a Python function: no program instances).
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    FLOAT32_EXACT,
    INT16_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    Scale,
    Shape,
)
from .layout import build


def _shape(rng: np.random.Generator, lengths: list[int], seq: list[int], N: int) -> Case:
    R = len(lengths)
    return build(
        lengths, seq, N=N, num_reqs=R, token_pad=0, query_len_pad=0, seq_len_pad=0,
        arange_extra=int(rng.integers(0, 65)), width=int(rng.integers(1, 9)), seed=int(rng.integers(0, 1 << 32)),
        causal=True, optional_fields=bool(rng.random() < 0.5), on_device=True,
    )


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1300 decode-sized requests, N = 15-32."""
    R = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 277))
    lengths = rng.integers(1, 17, size=R).tolist()
    seq = [q + int(c) for q, c in zip(lengths, rng.integers(0, 1 << 16, size=R), strict=True)]
    return _shape(rng, lengths, seq, int(rng.integers(SPEC_TOKENS, 33)))


def _huge_offsets(rng: np.random.Generator, scale: Scale) -> Case:
    """A few long prefills (offsets past 32767) with contexts past 2**24, N = 15-64."""
    R = int(rng.integers(2, 9))
    lengths = rng.integers(INT16_MAX // 2, 1 << 16, size=R).tolist()
    seq = [q + int(c) for q, c in zip(lengths, rng.integers(FLOAT32_EXACT, 1 << 26, size=R), strict=True)]
    return _shape(rng, lengths, seq, int(rng.integers(SPEC_TOKENS, 65)))


SHAPES = (
    Shape("huge_offsets", 1, _huge_offsets),
    Shape("many_requests", 1, _many_requests),
)
