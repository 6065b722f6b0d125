"""How a case of ``_compute_local_residual_mass_kernel`` is built (docs/CONTRACT.md §32.1): a block
verification step with the drafter's logits, §30's statistics and §31's joint log ratios, each
row's state row and step (§17's expansion)."""

from __future__ import annotations

from ...core.case import Case
from ...targetkit.runner_v2_verify import Chain, Step, chain_arrays

NAME = "_compute_local_residual_mass_kernel"
"""The target's name (its registry key, folder and vLLM name)."""

ARRAYS = ("cumulative_log_p", "target_logits", "target_local_max", "target_local_sumexp", "draft_logits",
          "draft_local_max", "draft_local_sumexp", "draft_sampled", "expanded_idx_mapping", "expanded_local_pos",
          "temperature")
"""The kernel's arrays, in its signature's order."""


def build(step: Step, ch: Chain, padded: int | None = None) -> Case:
    """The residual-mass stage of ``step`` (which has draft logits and block verification;
    ``padded``: a ``PADDED_VOCAB_NUM_BLOCKS`` below the blocks, the extended tier's)."""
    return Case(NAME, chain_arrays(step, ch, ARRAYS), {"vocab_num_blocks": step.nb, "vocab_size": step.V},
                {} if padded is None else {"PADDED_VOCAB_NUM_BLOCKS": padded})
