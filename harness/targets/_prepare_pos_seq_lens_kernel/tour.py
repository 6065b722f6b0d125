"""The tour of ``_prepare_pos_seq_lens_kernel``'s production extremes (docs/CONTRACT.md §15.2):
few programs, long rows."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import Scale, Shape
from ...targetkit.runner_v2 import BLOCK, MAX_MODEL_LEN
from .layout import build


def _long_chunk(rng: np.random.Generator, scale: Scale) -> Case:
    """A prefill chunk of 1025-4096 tokens (two blocks or more) among up to 7 decodes, in a
    131072-token context."""
    B = int(rng.integers(2, 9))
    R = B + int(rng.integers(0, 8))
    rows = rng.permutation(R)[:B]
    qlens = rng.integers(1, 5, size=B)
    qlens[int(rng.integers(0, B))] = int(rng.integers(BLOCK + 1, 4 * BLOCK))
    counts = rng.integers(0, MAX_MODEL_LEN - 4 * BLOCK, size=R)
    return build(rows, qlens, counts)


def _wide_state(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs of 2048 and more, a small batch: the padding program zeroes 1025 and more
    sequence lengths (two blocks or more)."""
    B = int(rng.integers(1, 9))
    R = B + int(rng.integers(BLOCK + 1, 3 * BLOCK))
    rows = rng.permutation(R)[:B]
    counts = rng.integers(0, 4096, size=R)
    return build(rows, rng.integers(1, 8, size=B), counts)


SHAPES = (
    Shape("long_chunk", 8, _long_chunk),
    Shape("wide_state", 8, _wide_state),
)
