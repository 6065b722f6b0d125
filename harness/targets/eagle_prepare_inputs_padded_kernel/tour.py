"""The tour of ``eagle_prepare_inputs_padded_kernel``'s production extremes (docs/CONTRACT.md §2.2):
cheap-but-large shapes, cheapest first, that every default run checks.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    INT16_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    Scale,
    Shape,
)
from .layout import build


def _extreme_request(rng: np.random.Generator, d: int) -> tuple[int, int, int]:
    valid = int(rng.integers(0, 2)) if d == 0 else int(rng.integers(1, d + 2))
    return d, valid, 0 if rng.random() < 0.7 else int(rng.integers(0, 64))


def _huge_offsets(rng: np.random.Generator, scale: Scale) -> Case:
    """A few programs, tens of thousands of tokens: one prefill of 32k-64k tokens (its end,
    and every later start, past 32767), then requests with 15-31 drafts, one of them with all
    of its 16+ drafts rejected."""
    prefill = (0, int(rng.integers(0, 2)), int(rng.integers(INT16_MAX + 1, 2 * INT16_MAX)))
    all_rejected = (int(rng.integers(16, 32)), 1, int(rng.integers(0, 8)))
    others = [_extreme_request(rng, int(rng.integers(SPEC_TOKENS, 32))) for _ in range(int(rng.integers(1, 4)))]
    rest = [all_rejected, *others]
    reqs = [prefill] + [rest[i] for i in rng.permutation(len(rest))]
    return build(*(list(x) for x in zip(*reqs, strict=True)), None)


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1152 small requests, up to 15 drafts each."""
    R = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 129))
    reqs = [_extreme_request(rng, int(rng.integers(0, SPEC_TOKENS + 1))) for _ in range(R)]
    return build(*(list(x) for x in zip(*reqs, strict=True)), None)


SHAPES = (
    Shape("huge_offsets", 8, _huge_offsets),
    Shape("many_requests", MAX_NUM_SEQS + 128, _many_requests),
)
