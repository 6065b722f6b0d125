"""How a case of ``_temperature_kernel`` is built (docs/CONTRACT.md §28.1): the float32 logits a
sampler processes (updated in place), each row's state row and the requests' temperatures."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case

NAME = "_temperature_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


def build(logits: np.ndarray, rows: Sequence[int], temperature: Sequence[float], vocab_size: int | None = None,
          block: int | None = None) -> Case:  # fmt: skip
    """``logits`` (``[num_tokens, W]``) of tokens whose state rows are ``rows``; ``vocab_size``
    (``None``: the row's width, as ``apply_temperature`` passes it) and ``BLOCK_SIZE``
    (``None``: vLLM's 8192) are the extended tier's."""
    scalars = {} if vocab_size is None else {"vocab_size": int(vocab_size)}
    return Case(NAME, {"logits": np.ascontiguousarray(logits, dtype=np.float32),
                       "expanded_idx_mapping": np.asarray(rows, dtype=np.int64),
                       "temperature": np.asarray(temperature, dtype=np.float32)},
                scalars, {} if block is None else {"BLOCK_SIZE": int(block)})  # fmt: skip


def random_logits(rng: np.random.Generator, T: int, V: int) -> np.ndarray:  # noqa: N803
    """``T`` rows of ``V`` model logits (a spread of 4)."""
    return (rng.standard_normal((T, V)) * 4).astype(np.float32)
