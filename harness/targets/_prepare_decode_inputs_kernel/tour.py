"""The tour of ``_prepare_decode_inputs_kernel``'s production extremes (docs/CONTRACT.md §26.2)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, MAX_NUM_SEQS, Scale, Shape
from ...targetkit.runner_v2 import MAX_MODEL_LEN
from .layout import build


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """Up to 8 rows of a 131072-token context, their sequences past 32767 (one at the model's
    length: both clamps engage)."""
    B = int(rng.integers(1, 9))
    R = B + int(rng.integers(0, 8))
    K = int(rng.integers(2, 17))
    seq = rng.integers(INT16_MAX + 1, MAX_MODEL_LEN, size=B)
    seq[int(rng.integers(0, B))] = MAX_MODEL_LEN
    return build(seq, rng.integers(0, K + 1, size=B), rng.integers(0, 262144, size=(R, K)), MAX_MODEL_LEN, R,
                 bool(rng.random() < 0.8))


def _max_num_seqs(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs of 1024 and more with a small batch: the padding program writes 1025 query
    starts and more (two blocks)."""
    B = int(rng.integers(1, 9))
    R = int(rng.integers(MAX_NUM_SEQS, 2 * MAX_NUM_SEQS))
    K = int(rng.integers(2, 5))
    return build(rng.integers(1, 4096, size=B), rng.integers(0, K + 1, size=B), rng.integers(0, 32000, size=(R, K)),
                 4096, R, bool(rng.random() < 0.8))


SHAPES = (
    Shape("long_context", 9, _long_context),
    Shape("max_num_seqs", 9, _max_num_seqs),
)
