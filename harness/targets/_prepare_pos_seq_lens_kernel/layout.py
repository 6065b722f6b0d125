"""How a case of ``_prepare_pos_seq_lens_kernel`` is built (docs/CONTRACT.md §15.1): the batch's
state rows and query lengths, the state's computed-token counts (``max_num_reqs`` entries, the
size of the ``seq_lens`` buffer too)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2 import cumulative

NAME = "_prepare_pos_seq_lens_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


def build(rows: Sequence[int], qlens: Sequence[int], counts: Sequence[int], max_num_reqs: int | None = None) -> Case:
    """Row ``b`` of ``qlens[b]`` tokens names state row ``rows[b]``; ``counts`` is the state's
    ``num_computed_tokens`` (its length is the ``seq_lens`` buffer's); ``max_num_reqs`` (vLLM:
    ``seq_lens.shape[0]``, the default) is how far the last program pads."""
    counts = np.asarray(counts, dtype=np.int64).astype(np.int32)
    return Case(
        kernel=NAME,
        arrays={"idx_mapping": np.asarray(rows, dtype=np.int64), "query_start_loc": cumulative(qlens),
                "num_computed_tokens": counts},
        scalars={"num_reqs": len(rows), "max_num_reqs": len(counts) if max_num_reqs is None else int(max_num_reqs)},
        launch={"BLOCK_SIZE": None},
    )
