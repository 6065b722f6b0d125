"""How a case of ``_gather_block_tables_kernel`` is built (docs/CONTRACT.md §21.1): the batch's
state rows, each KV-cache group's block table (``src_block_table_<g>``, ``[max_num_reqs, W_g]``),
block counts, block size and sliding-window reach, and the state's computed-token counts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case

NAME = "_gather_block_tables_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


def src(g: int) -> str:
    """Group ``g``'s source table (an input)."""
    return f"src_block_table_{g}"


def dst(g: int) -> str:
    """Group ``g``'s gathered table (an output, of the source's shape)."""
    return f"dst_block_table_{g}"


def groups(case: Case) -> int:
    """The number of KV-cache groups of ``case``."""
    return int(case.arrays["num_blocks"].shape[0])


def build(rows: Sequence[int], tables: Sequence[np.ndarray], num_blocks: np.ndarray, counts: Sequence[int],
          reach: Sequence[int], block_sizes: Sequence[int], num_rows: int, mask: bool) -> Case:
    """Batch row ``b`` names state row ``rows[b]``; group ``g`` has ``tables[g]`` (``[R, W_g]``),
    ``num_blocks[g]`` (``[R]``), a block size and a reach; ``num_rows`` grid rows (the ones past
    the batch are zeroed); ``mask``: ``MASK_SLIDING_WINDOW``."""
    arrays = {"idx_mapping": np.asarray(rows, dtype=np.int64)}
    arrays |= {src(g): np.ascontiguousarray(t, dtype=np.int64).astype(np.int32) for g, t in enumerate(tables)}
    arrays |= {
        "num_blocks": np.ascontiguousarray(num_blocks, dtype=np.int64).astype(np.int32),
        "num_computed_tokens": np.asarray(counts, dtype=np.int64).astype(np.int32),
        "sliding_window_reach": np.asarray(reach, dtype=np.int64).astype(np.int32),
        "block_sizes": np.asarray(block_sizes, dtype=np.int64).astype(np.int32),
    }
    return Case(kernel=NAME, arrays=arrays,
                scalars={"num_reqs": len(rows), "num_rows": int(num_rows), "MASK_SLIDING_WINDOW": bool(mask)},
                launch={"BLOCK_SIZE": None})
