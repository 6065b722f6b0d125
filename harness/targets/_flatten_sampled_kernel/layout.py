"""How a case of ``_flatten_sampled_kernel`` is built (docs/CONTRACT.md §24.1): the rejection
sampler's output rows (``[B, K + 1]``), each row's sampled count and logits count."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2 import cumulative

NAME = "_flatten_sampled_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


def build(sampled: np.ndarray, num_sampled: Sequence[int], logits: Sequence[int]) -> Case:
    """Row ``b`` of ``sampled`` holds ``num_sampled[b]`` tokens, from ``logits[b]`` logits rows."""
    return Case(
        kernel=NAME,
        arrays={
            "sampled": np.ascontiguousarray(sampled, dtype=np.int64),
            "num_sampled": np.asarray(num_sampled, dtype=np.int64).astype(np.int32),
            "cu_num_logits": cumulative(logits),
        },
        scalars={"num_reqs": len(num_sampled)},
        launch={},
    )


def draw_rows(ids: np.ndarray, num_sampled: Sequence[int], K: int, tail: int = -1) -> np.ndarray:
    """``[B, K + 1]`` rows: row ``b``'s first ``num_sampled[b]`` entries from ``ids`` (in order),
    the rest ``tail`` (rejection_sample leaves ``-1`` there)."""
    out = np.full((len(num_sampled), K + 1), tail, dtype=np.int64)
    k = 0
    for b, n in enumerate(num_sampled):
        out[b, :n] = ids[k : k + n]
        k += n
    return out
