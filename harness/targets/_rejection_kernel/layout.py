"""How a case of ``_rejection_kernel`` is built (docs/CONTRACT.md §33.1): a verification step's
logits, drafts, requests, seeds and positions, §30's statistics, the method's inputs (synthetic
rates; block verification's joint ratios and residual partials; FLy's entropies, window and
threshold) and the step count that shapes ``sampled``."""

from __future__ import annotations

from ...core.case import Case
from ...targetkit.runner_v2_verify import Chain, Step, chain_arrays

NAME = "_rejection_kernel"
"""The target's name (its registry key, folder and vLLM name)."""

ARRAYS = ("target_logits", "target_local_argmax", "target_local_max", "target_local_sumexp", "draft_sampled",
          "draft_logits", "draft_local_max", "draft_local_sumexp", "cu_num_logits", "idx_mapping", "temperature", "seed",
          "pos", "synthetic_conditional_rates", "cumulative_log_p", "local_residual_mass", "fly_entropy")
"""The kernel's arrays, in its signature's order (optional ones as the method has them)."""


def build(step: Step, ch: Chain, padded: int | None = None) -> Case:
    """The verification stage of ``step`` (``padded``: a ``PADDED_VOCAB_NUM_BLOCKS`` below the
    blocks, the extended tier's)."""
    scalars = {"vocab_num_blocks": step.nb, "num_speculative_steps": step.K, "use_block_verification": step.block,
               "fly_window_size": step.fly_window, "fly_entropy_threshold": float(step.fly_threshold)}
    return Case(NAME, chain_arrays(step, ch, ARRAYS), scalars, {} if padded is None else {"PADDED_VOCAB_NUM_BLOCKS": padded})


def method_of(case: Case) -> str:
    """``standard``, ``synthetic``, ``block`` or ``fly``."""
    s = case.scalars
    if s.get("use_block_verification"):
        return "block"
    if s.get("fly_window_size", 0) > 0:
        return "fly"
    return "synthetic" if "synthetic_conditional_rates" in case.arrays else "standard"


def outputs(case: Case) -> dict:
    """Fresh output buffers of ``case`` (what ``rejection_sample`` allocates)."""
    import numpy as np

    B = len(case.arrays["idx_mapping"])
    return {"sampled": np.full((B, case.scalars["num_speculative_steps"] + 1), -1, np.int64),
            "num_sampled": np.full(B, -1, np.int32), "target_rejected_logsumexp": np.zeros(B, np.float32),
            "draft_rejected_logsumexp": np.zeros(B, np.float32)}


def run_oracle(case: Case, **over: object) -> tuple[dict, object]:
    """The NumPy oracle on ``case`` (``over``: scalars replaced): its outputs and account."""
    from ....oracles import vectorized_v2_verify as o

    outs = outputs(case)
    s = {k: v for k, v in {**case.scalars, **over}.items() if k != "num_speculative_steps"}
    st = o.rejection(**outs, **{"draft_logits": None, **case.arrays}, **s)
    return outs, st


def windows(case: Case) -> list:
    """The windows the NumPy oracle meets on ``case``."""
    return list(run_oracle(case)[1].windows)
