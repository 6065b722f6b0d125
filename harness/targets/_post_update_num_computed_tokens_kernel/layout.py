"""How a case of ``_post_update_num_computed_tokens_kernel`` is built (docs/CONTRACT.md §20.1):
the batch's state rows and query lengths, and the state's computed-token counts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2 import cumulative

NAME = "_post_update_num_computed_tokens_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


def build(rows: Sequence[int], qlens: Sequence[int], counts: Sequence[int]) -> Case:
    """Batch row ``b`` of ``qlens[b]`` tokens names state row ``rows[b]``; ``counts`` is the
    state's ``num_computed_tokens`` (``max_num_reqs`` entries)."""
    return Case(
        kernel=NAME,
        arrays={
            "idx_mapping": np.asarray(rows, dtype=np.int64),
            "query_start_loc": cumulative(qlens),
            "num_computed_tokens": np.asarray(counts, dtype=np.int64).astype(np.int32),
        },
        scalars={"num_reqs": len(rows)},
        launch={},
    )
