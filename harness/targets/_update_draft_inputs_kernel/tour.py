"""The tour of ``_update_draft_inputs_kernel``'s production extremes (docs/CONTRACT.md §27.2)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import MAX_NUM_SEQS, Scale, Shape
from ...targetkit.runner_v2 import MAX_MODEL_LEN
from .layout import build, state


def _large_model(rng: np.random.Generator, scale: Scale) -> Case:
    """Up to 8 rows of an 8192-wide hidden state (Llama 3 70B's: eight blocks; a few values per
    row, its last column among them), one at the model's length."""
    B, K = int(rng.integers(1, 9)), int(rng.integers(2, 17))
    seq = rng.integers(1, MAX_MODEL_LEN, size=B)
    seq[int(rng.integers(0, B))] = MAX_MODEL_LEN
    hidden = np.zeros((B, 8192), dtype=np.float32)  # a few values per row, past the first block too
    cols = rng.integers(0, 8192, size=(B, 16))
    cols[:, 0] = 8191
    hidden[np.arange(B)[:, None], cols] = rng.standard_normal((B, 16)).astype(np.float32)
    pos, seqs, src = state(seq, int(rng.integers(0, 8)))
    return build(int(rng.integers(1, K)), K, rng.integers(0, 128256, size=B), hidden, pos, seqs, src, MAX_MODEL_LEN,
                 bool(rng.random() < 0.8))


def _many_rows(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 rows of a 64-wide hidden state (one value per row, its own)."""
    B, K = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65)), int(rng.integers(2, 5))
    seq = rng.integers(1, 4096, size=B)
    pos, seqs, src = state(seq, 4)
    hidden = np.zeros((B, 64), dtype=np.float32)
    hidden[:, int(rng.integers(0, 64))] = np.arange(1, B + 1)  # one value per row, its own
    return build(int(rng.integers(1, K)), K, rng.integers(0, 32000, size=B), hidden, pos, seqs, src, 4096, True)


SHAPES = (
    Shape("large_model", 8, _large_model),
    Shape("many_rows", MAX_NUM_SEQS + 64, _many_rows),
)
