"""``_rejection_kernel``: docs/CONTRACT.md §33.

Per request of ``rejection_sample``, its drafts verified in order: a greedy request against the
target's argmax, a random one by the probability-ratio test (standard), synthetic acceptance
rates, block verification or FLy's deferred rejections; the accepted count, the tokens, and the
log-sum-exps the resampling reads. Launched as ``rejection_sample`` launches it (grid
``(num_reqs,)``, ``num_warps=1``); the counts and tokens exact, the log-sum-exps within their
bounds, an acceptance test within its bound (a window) the extended tier's and the run's.
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
    check_clp,
    check_stats,
    keep_requests,
    need,
    padded_blocks,
    step_view,
    verify_oracles,
)
from ...targetkit.scale import past_limit
from .layout import ARRAYS, NAME, method_of, run_oracle, windows

INTS = {"draft_sampled": I32, "cu_num_logits": I32, "idx_mapping": I64, "seed": I64, "pos": I64, "target_local_argmax": I64}


class Rejection(VerifyTarget):
    state_index = ("idx_mapping", "expanded_idx_mapping")
    per_state = ("temperature", "seed", "draft_logits")
    name = NAME
    runner = "V2"
    module = UTILS
    function = NAME
    section = 33
    launcher = "launch_rejection"
    parameters = ("sampled_ptr", "sampled_stride", "rejected_steps_ptr", "target_rejected_logsumexp_ptr",
                  "draft_rejected_logsumexp_ptr", "target_logits_ptr", "target_logits_stride", "target_local_argmax_ptr",
                  "target_local_argmax_stride", "target_local_max_ptr", "target_local_max_stride",
                  "target_local_sumexp_ptr", "target_local_sumexp_stride", "draft_sampled_ptr", "draft_logits_ptr",
                  "draft_logits_stride_0", "draft_logits_stride_1", "draft_local_max_ptr", "draft_local_max_stride",
                  "draft_local_sumexp_ptr", "draft_local_sumexp_stride", "cu_num_logits_ptr", "idx_mapping_ptr",
                  "temp_ptr", "seed_ptr", "pos_ptr", "synthetic_conditional_rates_ptr", "cumulative_log_p_ptr",
                  "local_residual_mass_ptr", "local_residual_mass_stride", "fly_entropy_ptr", "fly_entropy_threshold",
                  "vocab_num_blocks", "PADDED_VOCAB_NUM_BLOCKS", "HAS_DRAFT_LOGITS", "SYNTHETIC_MODE",
                  "USE_BLOCK_VERIFICATION", "FLY_WINDOW_SIZE")
    inputs = {n: INTS.get(n, F32) for n in ARRAYS}
    optional = ("draft_logits", "synthetic_conditional_rates", "cumulative_log_p", "local_residual_mass", "fly_entropy")
    scalar_names = ("vocab_num_blocks", "num_speculative_steps", "use_block_verification", "fly_window_size",
                    "fly_entropy_threshold")
    launch_names = ("PADDED_VOCAB_NUM_BLOCKS",)
    features = {
        "greedy_request": "a greedy request (its drafts against the target's argmax)",
        "random_request": "a random request",
        "standard": "the probability-ratio test (rejection_sample_method standard)",
        "synthetic": "synthetic acceptance rates",
        "block_verification": "block verification (the joint ratio's threshold)",
        "fly": "FLy's deferred rejections",
        "draft_logits": "the drafter's logits (probabilistic drafts)",
        "one_hot_drafts": "one-hot drafts (q = 1)",
        "all_accepted": "a random request with every draft accepted",
        "first_rejected": "a request whose first draft is rejected",
        "later_rejected": "a request rejected past its first draft",
        "greedy_corrected": "a greedy rejection (the target's argmax written)",
        "minus_one_draft": "a -1 draft",
        "fly_deferral_confirmed": "FLy: a rejection deferred and confirmed (more accepted than the ratio test alone)",
        "rates_zero_or_one": "a synthetic rate of 0 or 1",
        "no_drafts": "a request without drafts (its count 0, nothing written)",
        "several_blocks": "more than one 8192-wide block",
        "padded_blocks": "three 8192-wide blocks or more, not a power of two (the reduction over a row's blocks reads padded ones)",
        # production extremes
        "vocab_past_131072": "a 151936- or 262144-id vocabulary (log-sum-exps and argmaxes over 19 or 32 blocks)",
        "many_requests": "more than 64 requests",
        "positions_past_65535": "a position past 65535 (the acceptance uniforms' counter)",
        # production scale
        "row_offset_past_2_31": "a draft row whose offset logit_idx * stride lies past 2**31 elements",
    }
    extremes = ("vocab_past_131072", "many_requests", "positions_past_65535")
    scale_features = ("row_offset_past_2_31",)
    oracle_functions = verify_oracles("rejection")

    def windows_of(self, case: Case) -> list:
        return windows(case)

    def rules(self, case: Case, tier: Tier) -> None:
        """§33.2 (the extended tier §33.4): the step (§30's statistics, the greedy rows' argmaxes
        exactly), the method's inputs (rates in ``[0, 1]``; block verification's §31 ratios and
        §32 partials; FLy's window, entropies and threshold; FLy excludes rates and blocks),
        ``K`` at least every request's drafts, positions of a context."""
        a = case.arrays
        s = case.scalars
        extra = sorted(set(a) - set(self.inputs))
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        v = step_view(case, tier)
        K = s.get("num_speculative_steps")
        if not isinstance(K, int) or K < max(1, int(v.d.max(initial=0))):
            raise ContractViolation("scalars.num_speculative_steps", "must be an int, at least every request's drafts")
        need(a, "seed", I64, 1, (len(v.temperature),))
        pos = need(a, "pos", I64, 1, (v.n,))
        if np.any(pos < 0) or (tier == "production" and np.any(pos >= 1 << 20)):
            raise ContractViolation("arrays.pos", "must be positions of a context (>= 0, below max_model_len)")
        if tier == "production":
            g = np.flatnonzero(v.draft_rows & v.greedy[v.row_req])
            check_stats(a, v.eidx, v.elp, np.zeros(0, np.int64), v.V, greedy_rows=g)
        method = method_of(case)
        block, fly = bool(s.get("use_block_verification")), s.get("fly_window_size", 0)
        if not isinstance(fly, int) or fly < 0 or not isinstance(s.get("fly_entropy_threshold"), float | int):
            raise ContractViolation("scalars.fly_window_size", "must be an int >= 0, with a float threshold")
        if fly and (block or "synthetic_conditional_rates" in a):
            raise ContractViolation("scalars.fly_window_size", "FLy excludes synthetic rates and block verification")
        if block and "synthetic_conditional_rates" in a:
            raise ContractViolation("scalars.use_block_verification", "block verification excludes synthetic rates")
        if method == "synthetic":
            r = need(a, "synthetic_conditional_rates", F32, 1, (K,))
            if not np.all((r >= 0) & (r <= 1)):
                raise ContractViolation("arrays.synthetic_conditional_rates", "must be rates in [0, 1]")
        if method == "fly":
            e = need(a, "fly_entropy", F32, 1, (v.n,))
            if not np.all(np.isfinite(e)) or np.any(e < 0):
                raise ContractViolation("arrays.fly_entropy", "must be entropies (finite, >= 0)")
        elif "fly_entropy" in a:
            raise ContractViolation("arrays.fly_entropy", "is FLy's alone")
        if block != ("cumulative_log_p" in a) or ("local_residual_mass" in a) != (block and "draft_logits" in a):
            raise ContractViolation("arrays.cumulative_log_p", "block verification passes the joint ratios, and the "
                                    "residual partials with draft logits; the other methods neither")
        if block:
            clp = need(a, "cumulative_log_p", F32, 1, (v.n,))
            rd = np.flatnonzero(v.random_draft_rows)
            if np.isnan(clp[rd]).any() or np.any(clp[rd] > 0):
                raise ContractViolation("arrays.cumulative_log_p", "must be at most 0 where read")
            if tier == "production":
                check_clp(a, v, rd)
                if "local_residual_mass" in a:
                    self._check_residuals(case, v)

    def _check_residuals(self, case: Case, v: object) -> None:
        from ....oracles import vectorized_v2_verify as o

        a = case.arrays
        want = np.full_like(a["local_residual_mass"], np.nan)
        st = o.compute_local_residual_mass(
            local_residual_mass=want, cumulative_log_p=a["cumulative_log_p"], target_logits=a["target_logits"],
            target_local_max=a["target_local_max"], target_local_sumexp=a["target_local_sumexp"],
            draft_logits=a["draft_logits"], draft_local_max=a["draft_local_max"],
            draft_local_sumexp=a["draft_local_sumexp"], draft_sampled=a["draft_sampled"],
            expanded_idx_mapping=v.eidx, expanded_local_pos=v.elp.astype(np.int32), temperature=a["temperature"],
            vocab_num_blocks=v.nb, vocab_size=v.V)  # fmt: skip
        got = a["local_residual_mass"][:, : v.nb]
        read = ~np.isnan(want)
        with np.errstate(invalid="ignore"):
            ok = ~read | (got == want) | (np.abs(got.astype(np.float64) - want) <= st.bounds["local_residual_mass"])
        if not ok.all():
            j = int(np.nonzero(~ok)[0][0])
            raise ContractViolation("arrays.local_residual_mass", f"must be §32's residual partials (row {j})")

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        v = step_view(case, "extended", stats=False)
        method = method_of(case)
        outs, _ = run_oracle(case)
        acc = outs["num_sampled"].astype(np.int64)
        rnd = ~v.greedy
        ds = a["draft_sampled"].astype(np.int64)
        fly_more = False
        if method == "fly":
            plain, _ = run_oracle(case, fly_window_size=0)
            fly_more = bool(np.any(acc > plain["num_sampled"]))
        rates = a.get("synthetic_conditional_rates")
        rows = np.flatnonzero(v.draft_rows)
        checks = {
            "greedy_request": bool(np.any(v.greedy & (v.d > 0))),
            "random_request": bool(np.any(rnd & (v.d > 0))),
            "standard": method == "standard",
            "synthetic": method == "synthetic",
            "block_verification": method == "block",
            "fly": method == "fly",
            "draft_logits": "draft_logits" in a,
            "one_hot_drafts": "draft_logits" not in a,
            "all_accepted": bool(np.any(rnd & (v.d > 0) & (acc == v.d))),
            "first_rejected": bool(np.any((v.d > 0) & (acc == 0))),
            "later_rejected": bool(np.any((acc > 0) & (acc < v.d))),
            "greedy_corrected": bool(np.any(v.greedy & (acc < v.d))),
            "minus_one_draft": bool(np.any(ds[rows + 1] < 0)),
            "fly_deferral_confirmed": fly_more,
            "rates_zero_or_one": rates is not None and bool(np.any((rates == 0) | (rates == 1))),
            "no_drafts": bool(np.any(v.d == 0)),
            "several_blocks": v.V > STATS_BLOCK,
            "padded_blocks": padded_blocks(v.V),
            "vocab_past_131072": v.V > 1 << 17,
            "many_requests": len(v.idx) > 64,
            "positions_past_65535": bool(np.any(a["pos"][rows] > 0xFFFF)),
            "row_offset_past_2_31": bool(rows.size) and past_limit(int(rows.max()) * a["target_logits"].shape[1]),
        }
        return frozenset(k for k, x in checks.items() if x)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        B = len(case.arrays["idx_mapping"])
        return {"sampled": (I64, (B, case.scalars["num_speculative_steps"] + 1)), "num_sampled": (I32, (B,)),
                "target_rejected_logsumexp": (F32, (B,)), "draft_rejected_logsumexp": (F32, (B,))}

    def decided(self, case: Case, windows: list, written: dict) -> dict:
        """An acceptance at step ``i`` of request ``r`` (but under FLy, whose count may move
        past a rejection): accepted iff the run's count passes ``i``."""
        if method_of(case) == "fly":
            return {}
        ns = written["num_sampled"]
        return {w.key: bool(int(ns[w.key[1]]) > w.key[3]) for w in windows if w.key[0] == "req"}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        if array == "sampled":
            r, k = divmod(index, case.scalars["num_speculative_steps"] + 1)
            return r, f"request {r}, slot {k}"
        return index, f"request {index}"

    def programs(self, case: Case) -> int:
        return len(case.arrays["idx_mapping"])

    def split_requests(self, case: Case) -> list[int] | None:
        return list(range(len(case.arrays["idx_mapping"])))

    def join_requests(self, case: Case, pieces: list[int]) -> Case:
        return keep_requests(case, list(pieces))


TARGET = Rejection()
