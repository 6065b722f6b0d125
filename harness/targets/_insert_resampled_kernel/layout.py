"""How a case of ``_insert_resampled_kernel`` is built (docs/CONTRACT.md §35.1): what §33 left
(``sampled``, ``num_sampled``: the accepted tokens and their count, updated in place) and §34's
block winners and values, with the rows' state rows and temperatures."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2_verify import Chain, Step, chain_arrays

NAME = "_insert_resampled_kernel"
"""The target's name (its registry key, folder and vLLM name)."""

ARRAYS = ("sampled", "num_sampled", "resampled_local_argmax", "resampled_local_max", "cu_num_logits",
          "expanded_idx_mapping", "temperature")
"""The kernel's arrays, in its signature's order."""


def build(step: Step, ch: Chain, padded: int | None = None) -> Case:
    """The insert stage of ``step`` (``padded``: a ``PADDED_RESAMPLE_NUM_BLOCKS`` below the
    blocks, the extended tier's)."""
    return Case(NAME, chain_arrays(step, ch, ARRAYS), {"resample_num_blocks": step.rnb},
                {} if padded is None else {"PADDED_RESAMPLE_NUM_BLOCKS": padded})


def requests(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(first row, d_r, k, drawn)`` per request: ``drawn`` whether its token is inserted (a
    random request, or a greedy one at its bonus)."""
    a = case.arrays
    cu = a["cu_num_logits"].astype(np.int64)
    d = np.diff(cu) - 1
    k = a["num_sampled"].astype(np.int64)
    j = cu[:-1] + np.clip(k, 0, np.maximum(d, 0))
    greedy = a["temperature"][a["expanded_idx_mapping"][j]] == 0
    return cu[:-1], d, k, ~greedy | (k == d)
