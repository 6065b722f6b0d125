"""How a case of ``_expand_idx_mapping_kernel`` is built (docs/CONTRACT.md §17.1): per batch row
its state row and its logits count; ``max_expand_len`` (vLLM's ``decode_query_len``, ``K + 1``)
sets the block."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2 import cumulative

NAME = "_expand_idx_mapping_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


def build(rows: Sequence[int], logits: Sequence[int], max_expand_len: int, block: int | None = None) -> Case:
    """Row ``b`` (state row ``rows[b]``) has ``logits[b]`` logits rows; ``block`` (``None``:
    vLLM's ``next_power_of_2(max_expand_len)``) is the launch's ``BLOCK_SIZE``."""
    return Case(
        kernel=NAME,
        arrays={"idx_mapping": np.asarray(rows, dtype=np.int64), "cu_num_logits": cumulative(logits)},
        scalars={"num_reqs": len(rows), "max_expand_len": int(max_expand_len)},
        launch={"BLOCK_SIZE": block},
    )
