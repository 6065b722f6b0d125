"""How a case of ``_compute_slot_mappings_kernel`` is built (docs/CONTRACT.md §22.1): the batch
(state rows, ``-1`` for a dummy row; query ranges; every token's position), each KV-cache group's
block table (``block_table_<g>``, ``[max_num_reqs, W_g]``), block size and flags, decode context
parallelism (size, rank, interleave) and the slot-mapping buffer's width."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2 import cumulative

NAME = "_compute_slot_mappings_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


def table(g: int) -> str:
    """Group ``g``'s block table (an input)."""
    return f"block_table_{g}"


def groups(case: Case) -> int:
    """The number of KV-cache groups of ``case``."""
    return int(case.arrays["block_sizes"].shape[0])


def build(rows: Sequence[int], qlens: Sequence[int], positions: np.ndarray, tables: Sequence[np.ndarray],
          block_sizes: Sequence[int], enabled: Sequence[bool], sharded: Sequence[bool], max_num_tokens: int,
          cp: tuple[int, int, int] = (1, 0, 1), pad_id: int | None = None) -> Case:
    """Batch row ``b`` (state row ``rows[b]``, ``-1``: a dummy row) of ``qlens[b]`` tokens at
    ``positions``; group ``g``'s table, block size and flags; ``cp`` = ``(CP_SIZE, cp_rank,
    CP_INTERLEAVE)``; ``max_num_tokens`` the slot mappings' width; ``pad_id`` (``None``: vLLM's
    ``PAD_SLOT_ID``, -1)."""
    CP, rank, IL = cp
    arrays = {
        "idx_mapping": np.asarray(rows, dtype=np.int64),
        "query_start_loc": cumulative(qlens),
        "positions": np.asarray(positions, dtype=np.int64),
    }
    arrays |= {table(g): np.ascontiguousarray(t, dtype=np.int64).astype(np.int32) for g, t in enumerate(tables)}
    arrays |= {"block_sizes": np.asarray(block_sizes, dtype=np.int64).astype(np.int32),
               "slot_mapping_enabled": np.asarray(enabled, dtype=np.bool_),
               "dcp_sharded": np.asarray(sharded, dtype=np.bool_)}
    return Case(kernel=NAME, arrays=arrays,
                scalars={"num_reqs": len(rows), "max_num_tokens": int(max_num_tokens), "cp_rank": int(rank),
                         "CP_SIZE": int(CP), "CP_INTERLEAVE": int(IL)},
                launch={"PAD_ID": pad_id, "TRITON_BLOCK_SIZE": None})


def widths_for(max_model_len: int, sizes: Sequence[int], sharded: Sequence[bool], CP: int) -> list[int]:
    """Each group's table width for a model of ``max_model_len`` tokens (a sharded group's blocks
    hold ``CP`` times as many positions)."""
    return [-(-max_model_len // (s * (CP if sh and CP > 1 else 1))) for s, sh in zip(sizes, sharded, strict=True)]
