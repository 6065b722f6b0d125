"""How a case of ``_insert_resampled_kernel`` is built (docs/CONTRACT.md §35.1): what §33 left
(``sampled``, ``num_sampled``: the accepted tokens and their count, updated in place) and §34's
block winners and values, with the rows' state rows and temperatures."""

from __future__ import annotations

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
