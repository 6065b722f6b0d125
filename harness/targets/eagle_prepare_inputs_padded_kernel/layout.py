"""How a case of ``eagle_prepare_inputs_padded_kernel`` is built from its requests (docs/CONTRACT.md
§2.1): a draft count, a valid count and the tokens past the drafts each.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    query_start_loc_from,
)

NAME = "eagle_prepare_inputs_padded_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


I32 = np.dtype(np.int32)


def build(drafts: list[int], valid: list[int], extra: list[int], grid: int | None) -> Case:
    lengths = [d + 1 + e for d, e in zip(drafts, extra, strict=True)]
    return Case(
        kernel=NAME,
        arrays={
            "cu_num_draft_tokens": np.cumsum(np.asarray(drafts, dtype=np.int64)).astype(np.int32),
            "valid_sampled_tokens_count": np.asarray(valid, dtype=np.int32),
            "query_start_loc": query_start_loc_from(lengths),
        },
        scalars={"num_reqs": len(drafts)},
        launch={"grid_size": grid},
    )
