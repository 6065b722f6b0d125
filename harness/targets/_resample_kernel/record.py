"""``_resample_kernel``: docs/CONTRACT.md §34.

Per request of ``rejection_sample`` whose next token is drawn (a random request's rejected
draft, or any request's bonus), the Gumbel-max draw over the residual distribution ``max(p -
q, 0)`` in log space (the target's for a bonus or a placeholder; less the draft for one-hot
drafts) per 1024-wide block, with the target's noise of the row's key. Launched as
``rejection_sample`` launches it, unwatermarked (grid ``(num_reqs, cdiv(V, 1024))``); the
winners exact, the values within their bounds, a block within its window the extended tier's
and the run's.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...core.errors import ContractViolation
from ...targetkit.base import Tier
from ...targetkit.runner_v2_verify import (
    F32,
    F64,
    I32,
    I64,
    SAMPLE_BLOCK,
    UTILS,
    VerifyTarget,
    cdiv,
    check_clp,
    keep_requests,
    need,
    step_view,
    verify_oracles,
)
from ...targetkit.scale import past_limit
from .edges import lse_rule
from .layout import ARRAYS, NAME, windows

INTS = {"rejected_step": I32, "cu_num_logits": I32, "expanded_idx_mapping": I64, "draft_sampled": I32, "seed": I64,
        "pos": I64}


class Resample(VerifyTarget):
    state_index = ("idx_mapping", "expanded_idx_mapping")
    per_state = ("temperature", "seed", "draft_logits")
    name = NAME
    runner = "V2"
    module = UTILS
    function = NAME
    section = 34
    launcher = "launch_resample"
    parameters = ("resampled_local_argmax_ptr", "resampled_local_argmax_stride", "resampled_local_max_ptr",
                  "resampled_local_max_stride", "target_logits_ptr", "target_logits_stride",
                  "target_rejected_logsumexp_ptr", "draft_logits_ptr", "draft_logits_stride_0", "draft_logits_stride_1",
                  "draft_rejected_logsumexp_ptr", "rejected_step_ptr", "cu_num_logits_ptr", "expanded_idx_mapping_ptr",
                  "draft_sampled_ptr", "temp_ptr", "seed_ptr", "pos_ptr", "cumulative_log_p_ptr", "contexts_ptr",
                  "contexts_stride", "watermarking_ptr", "watermarking_skip_mask_ptr", "watermark_key_0",
                  "watermark_key_1", "vocab_size", "BLOCK_SIZE", "HAS_DRAFT_LOGITS", "USE_FP64",
                  "USE_BLOCK_VERIFICATION", "CONTEXT_WIDTH", "WATERMARK", "DEDUPLICATE_CONTEXTS")
    inputs = {n: INTS.get(n, F32) for n in ARRAYS}
    optional = ("draft_logits", "cumulative_log_p")
    scalar_names = ("use_fp64", "use_block_verification", "vocab_size")
    features = {
        "bonus_draw": "a random request's bonus drawn (every draft accepted)",
        "residual_draw": "a rejected draft's residual max(p - q, 0) drawn (draft logits)",
        "one_hot_residual": "a rejected one-hot draft: the target less its token",
        "placeholder_rejected": "a rejected -1 draft (the target's own distribution)",
        "greedy_bonus": "a greedy request's bonus (a plain argmax: exact)",
        "greedy_skipped": "a greedy request rejected before its bonus (nothing drawn)",
        "block_shift": "block verification: a residual shifted by the accepted prefix's ratio",
        "fp64_noise": "the float64 noise path",
        "residual_lanes_cut": "residual lanes where q >= p (-inf)",
        "several_blocks": "more than one 1024-wide block",
        # production extremes
        "vocab_past_131072": "a 151936- or 262144-id vocabulary (ids past 131072)",
        "positions_past_65535": "a drawn row past position 65535 (the noise's counter)",
        "many_requests": "more than 64 requests",
        # production scale
        "row_offset_past_2_31": "a drawn row whose offset resample_token_idx * stride lies past 2**31 elements",
    }
    extremes = ("vocab_past_131072", "positions_past_65535", "many_requests")
    scale_features = ("row_offset_past_2_31",)
    oracle_functions = verify_oracles("resample")

    def windows_of(self, case: Case) -> list:
        return windows(case)

    def rules(self, case: Case, tier: Tier) -> None:
        """§34.2 (the extended tier §34.4): the step, ``vocab_size`` the narrower width,
        ``rejected_step`` §33's count (``0 .. d_r``), the rejected rows' log-sum-exps (their
        rows', where read), block verification's §31 ratios, positions of a context."""
        a = case.arrays
        extra = sorted(set(a) - set(self.inputs))
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        v = step_view(case, tier, stats=False)
        B = len(v.idx)
        if case.scalars.get("vocab_size") != v.V:
            raise ContractViolation("scalars.vocab_size", f"must be the narrower table's width ({v.V})")
        if not all(isinstance(case.scalars.get(k), bool) for k in ("use_fp64", "use_block_verification")):
            raise ContractViolation("scalars.use_fp64", "use_fp64 and use_block_verification must be true/false")
        k = need(a, "rejected_step", I32, 1, (B,)).astype(np.int64)
        if np.any(k < 0) or np.any(k > v.d):
            raise ContractViolation("arrays.rejected_step", "must be §33's count: 0 .. each request's drafts")
        for n in ("target_rejected_logsumexp", "draft_rejected_logsumexp"):
            x = need(a, n, F32, 1, (B,))
            if not np.all(np.isfinite(x)):
                raise ContractViolation(f"arrays.{n}", "must be finite")
        need(a, "seed", I64, 1, (len(v.temperature),))
        pos = need(a, "pos", I64, 1, (v.n,))
        if np.any(pos < 0) or (tier == "production" and np.any(pos >= 1 << 20)):
            raise ContractViolation("arrays.pos", "must be positions of a context (>= 0, below max_model_len)")
        if case.scalars["use_block_verification"] != ("cumulative_log_p" in a):
            raise ContractViolation("arrays.cumulative_log_p", "block verification passes its ratios, no other method")
        if "cumulative_log_p" in a:
            clp = need(a, "cumulative_log_p", F32, 1, (v.n,))
            j = v.first + k
            read = (k > 0) & ~v.greedy
            if np.isnan(clp[j[read] - 1]).any() or np.any(clp[j[read] - 1] > 0):
                raise ContractViolation("arrays.cumulative_log_p", "must be at most 0 where read")
            if tier == "production":
                check_clp(a, v, j[read] - 1)
        if tier == "production":
            lse_rule(case, v)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        v = step_view(case, "extended", stats=False)
        k = a["rejected_step"].astype(np.int64)
        j = v.first + k
        bonus = k == v.d
        ds = a["draft_sampled"].astype(np.int64)
        y = np.where(bonus, 0, ds[np.minimum(j + 1, v.n - 1)])
        rnd = ~v.greedy
        rejected = rnd & ~bonus
        draft = "draft_logits" in a
        cut = False
        if draft and rejected.any():
            for r in np.flatnonzero(rejected & (y >= 0))[:16]:
                s = v.idx[r]
                q = a["draft_logits"][s, k[r], : v.V] / a["temperature"][s]
                lq = q - a["draft_rejected_logsumexp"][r]
                lp = a["target_logits"][j[r], : v.V] - a["target_rejected_logsumexp"][r]
                cut |= bool(np.any(lq >= lp))
        checks = {
            "bonus_draw": bool(np.any(rnd & bonus)),
            "residual_draw": draft and bool(np.any(rejected & (y >= 0))),
            "one_hot_residual": not draft and bool(np.any(rejected & (y >= 0))),
            "placeholder_rejected": bool(np.any(rejected & (y < 0))),
            "greedy_bonus": bool(np.any(v.greedy & bonus)),
            "greedy_skipped": bool(np.any(v.greedy & ~bonus)),
            "block_shift": bool(case.scalars["use_block_verification"]) and draft and bool(np.any(rejected & (k > 0) & (y >= 0))),
            "fp64_noise": bool(case.scalars["use_fp64"]) and bool(rnd.any()),
            "residual_lanes_cut": cut,
            "several_blocks": v.V > SAMPLE_BLOCK,
            "vocab_past_131072": v.V > 1 << 17,
            "positions_past_65535": bool(np.any(a["pos"][j[rnd | bonus]] > 0xFFFF)),
            "many_requests": len(v.idx) > 64,
            "row_offset_past_2_31": past_limit(int(j.max(initial=0)) * a["target_logits"].shape[1]),
        }
        return frozenset(n for n, x in checks.items() if x)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        B = len(case.arrays["cu_num_logits"]) - 1
        nb = cdiv(case.scalars["vocab_size"], SAMPLE_BLOCK)
        return {"resampled_local_argmax": (I64, (B, nb)), "resampled_local_max": (F64 if case.scalars["use_fp64"] else F32, (B, nb))}

    def decided(self, case: Case, windows: list, written: dict) -> dict:
        """A window's winner is the run's ``resampled_local_argmax`` of its request and block."""
        nb = cdiv(case.scalars["vocab_size"], SAMPLE_BLOCK)
        la = written["resampled_local_argmax"].reshape(-1, nb)
        return {w.key: int(la[w.key[1], w.key[3]]) for w in windows if w.key[0] == "req"}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        r, b = divmod(index, cdiv(case.scalars["vocab_size"], SAMPLE_BLOCK))
        return r, f"request {r}, block {b}"

    def programs(self, case: Case) -> int:
        return (len(case.arrays["cu_num_logits"]) - 1) * cdiv(case.scalars["vocab_size"], SAMPLE_BLOCK)

    def split_requests(self, case: Case) -> list[int] | None:
        return list(range(len(case.arrays["cu_num_logits"]) - 1))

    def join_requests(self, case: Case, pieces: list[int]) -> Case:
        return keep_requests(case, list(pieces))


TARGET = Resample()
