"""How a case of ``_compute_cumulative_log_p_kernel`` is built (docs/CONTRACT.md §31.1): a block
verification step's logits, drafts and requests, with the statistics §30 left."""

from __future__ import annotations

from ...core.case import Case
from ...targetkit.runner_v2_verify import Chain, Step, chain_arrays

NAME = "_compute_cumulative_log_p_kernel"
"""The target's name (its registry key, folder and vLLM name)."""

ARRAYS = ("target_logits", "target_local_max", "target_local_sumexp", "draft_sampled", "draft_logits", "draft_local_max",
          "draft_local_sumexp", "cu_num_logits", "idx_mapping", "temperature")
"""The kernel's arrays, in its signature's order."""


def build(step: Step, ch: Chain, padded: int | None = None) -> Case:
    """The joint-ratio stage of ``step`` (``padded``: a ``PADDED_VOCAB_NUM_BLOCKS`` below the
    blocks, the extended tier's)."""
    return Case(NAME, chain_arrays(step, ch, ARRAYS), {"vocab_num_blocks": step.nb},
                {} if padded is None else {"PADDED_VOCAB_NUM_BLOCKS": padded})
