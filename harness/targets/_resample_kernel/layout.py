"""How a case of ``_resample_kernel`` is built (docs/CONTRACT.md §34.1): a verification step's
logits, drafts, requests, seeds and positions, and what §33 left for the draw (each request's
accepted count, its rejected row's log-sum-exps; block verification's joint ratios)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2_verify import SAMPLE_BLOCK, Chain, Step, cdiv, chain_arrays

NAME = "_resample_kernel"
"""The target's name (its registry key, folder and vLLM name)."""

ARRAYS = ("target_logits", "target_rejected_logsumexp", "draft_logits", "draft_rejected_logsumexp", "rejected_step",
          "cu_num_logits", "expanded_idx_mapping", "draft_sampled", "temperature", "seed", "pos", "cumulative_log_p")
"""The kernel's arrays, in its signature's order (block verification's ratios where it has them)."""


def build(step: Step, ch: Chain) -> Case:
    """The resampling stage of ``step``."""
    return Case(NAME, chain_arrays(step, ch, ARRAYS),
                {"use_fp64": step.use_fp64, "use_block_verification": step.block, "vocab_size": step.V}, {})


def outputs(case: Case) -> dict:
    B = len(case.arrays["cu_num_logits"]) - 1
    nb = cdiv(case.scalars["vocab_size"], SAMPLE_BLOCK)
    return {"resampled_local_argmax": np.full((B, nb), -1, np.int64),
            "resampled_local_max": np.full((B, nb), np.nan, np.float64 if case.scalars["use_fp64"] else np.float32)}


def run_oracle(case: Case) -> tuple[dict, object]:
    """The NumPy oracle on ``case``: its outputs and account."""
    from ....oracles import vectorized_v2_verify as o

    outs = outputs(case)
    st = o.resample(**outs, **{"draft_logits": None, **case.arrays}, **case.scalars)
    return outs, st


def windows(case: Case) -> list:
    return list(run_oracle(case)[1].windows)
