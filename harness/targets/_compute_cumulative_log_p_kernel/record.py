"""``_compute_cumulative_log_p_kernel``: docs/CONTRACT.md §31.

Block verification (``rejection_sample`` with ``use_block_verification``): per random request,
the running ``min(log p_i, 0)`` of its drafts' joint ratio, one value per draft row (a ``-1``
draft carries the last). Launched as ``rejection_sample`` launches it (grid ``(num_reqs,)``,
``num_warps=1``); the values within their bounds.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...core.errors import ContractViolation
from ...targetkit.base import Tier
from ...targetkit.runner_v2_verify import (
    F32,
    I32,
    I64,
    STATS_BLOCK,
    UTILS,
    VerifyTarget,
    draft_log_probs,
    keep_requests,
    padded_blocks,
    request_of_row,
    step_view,
    verify_oracles,
)
from ...targetkit.scale import past_limit
from .layout import ARRAYS, NAME


class CumulativeLogP(VerifyTarget):
    state_index = ("idx_mapping", "expanded_idx_mapping")
    per_state = ("temperature", "seed", "draft_logits")
    name = NAME
    runner = "V2"
    module = UTILS
    function = NAME
    section = 31
    launcher = "launch_compute_cumulative_log_p"
    parameters = ("cumulative_log_p_ptr", "target_logits_ptr", "target_logits_stride", "target_local_max_ptr",
                  "target_local_max_stride", "target_local_sumexp_ptr", "target_local_sumexp_stride",
                  "draft_sampled_ptr", "draft_logits_ptr", "draft_logits_stride_0", "draft_logits_stride_1",
                  "draft_local_max_ptr", "draft_local_max_stride", "draft_local_sumexp_ptr",
                  "draft_local_sumexp_stride", "cu_num_logits_ptr", "idx_mapping_ptr", "temp_ptr", "vocab_num_blocks",
                  "PADDED_VOCAB_NUM_BLOCKS", "HAS_DRAFT_LOGITS")
    inputs = {n: (I64 if n == "idx_mapping" else I32 if n in ("draft_sampled", "cu_num_logits") else F32) for n in ARRAYS}
    optional = ("draft_logits",)
    scalar_names = ("vocab_num_blocks",)
    launch_names = ("PADDED_VOCAB_NUM_BLOCKS",)
    features = {
        "random_request": "a random request's drafts (its running joint ratio)",
        "greedy_request": "a greedy request (nothing written)",
        "draft_logits": "the drafter's logits (log q of the draft)",
        "one_hot_drafts": "one-hot drafts (log q = 0)",
        "minus_one_draft": "a -1 draft (the last value carried)",
        "ratio_above_one": "a draft more likely under the target than the draft (the running value held at 0)",
        "masked_draft": "a draft the target masked (-inf: the ratio falls to 0)",
        "no_drafts": "a request without drafts (nothing written)",
        "several_blocks": "more than one 8192-wide block",
        "padded_blocks": "three 8192-wide blocks or more, not a power of two (the reduction over a row's blocks reads padded ones)",
        # production extremes
        "vocab_past_131072": "a 151936- or 262144-id vocabulary (log-sum-exps over 19 or 32 blocks)",
        "many_requests": "more than 64 requests",
        # production scale
        "row_offset_past_2_31": "a draft row whose offset logit_idx * stride lies past 2**31 elements",
    }
    extremes = ("vocab_past_131072", "many_requests")
    scale_features = ("row_offset_past_2_31",)
    oracle_functions = verify_oracles("compute_cumulative_log_p")

    def rules(self, case: Case, tier: Tier) -> None:
        """§31.2 (the extended tier §31.4): the step (``step_view``), §30's statistics."""
        extra = sorted(set(case.arrays) - set(self.inputs))
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        step_view(case, tier)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        v = step_view(case, "extended", stats=False)
        rd = np.flatnonzero(v.random_draft_rows)
        ds = a["draft_sampled"].astype(np.int64)
        tok = ds[rd + 1]
        ok = tok >= 0
        lt, ld = draft_log_probs(a, rd[ok], v.elp[rd[ok]], v.eidx[rd[ok]], tok[ok])
        checks = {
            "random_request": bool(rd.size),
            "greedy_request": bool(np.any(v.greedy & (v.d > 0))),
            "draft_logits": "draft_logits" in a and bool(rd.size),
            "one_hot_drafts": "draft_logits" not in a,
            "minus_one_draft": bool(np.any(~ok)),
            "ratio_above_one": bool(np.any(lt - ld > 0)),
            "masked_draft": bool(np.any(np.isneginf(lt))),
            "no_drafts": bool(np.any(v.d == 0)),
            "several_blocks": v.V > STATS_BLOCK,
            "padded_blocks": padded_blocks(v.V),
            "vocab_past_131072": v.V > 1 << 17,
            "many_requests": len(v.idx) > 64,
            "row_offset_past_2_31": bool(rd.size) and past_limit(int(rd.max()) * a["target_logits"].shape[1]),
        }
        return frozenset(k for k, v_ in checks.items() if v_)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {"cumulative_log_p": (F32, (case.arrays["target_logits"].shape[0],))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        return request_of_row(case.arrays["cu_num_logits"], index), f"logits row {index}"

    def programs(self, case: Case) -> int:
        return len(case.arrays["idx_mapping"])

    def split_requests(self, case: Case) -> list[int] | None:
        return list(range(len(case.arrays["idx_mapping"])))

    def join_requests(self, case: Case, pieces: list[int]) -> Case:
        return keep_requests(case, list(pieces))


TARGET = CumulativeLogP()
