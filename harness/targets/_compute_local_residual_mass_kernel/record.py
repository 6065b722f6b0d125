"""``_compute_local_residual_mass_kernel``: docs/CONTRACT.md §32.

Block verification with the drafter's logits: per draft row past a request's first (whose next
draft is real) and per 8192-wide block, the partial residual mass ``sum max(p_{i-1} M_b - M_s,
0)`` the rejection kernel sums for its acceptance threshold. Launched as ``rejection_sample``
launches it (grid ``(num_logits, cdiv(V, 8192))``); the partials within their bounds.
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
    keep_requests,
    padded_blocks,
    request_count,
    step_view,
    verify_oracles,
)
from ...targetkit.scale import past_limit
from .edges import read_rows
from .layout import ARRAYS, NAME


class LocalResidualMass(VerifyTarget):
    state_index = ("idx_mapping", "expanded_idx_mapping")
    per_state = ("temperature", "seed", "draft_logits")
    name = NAME
    runner = "V2"
    module = UTILS
    function = NAME
    section = 32
    launcher = "launch_compute_local_residual_mass"
    parameters = ("local_residual_mass_ptr", "local_residual_mass_stride", "cumulative_log_p_ptr", "target_logits_ptr",
                  "target_logits_stride", "target_local_max_ptr", "target_local_max_stride", "target_local_sumexp_ptr",
                  "target_local_sumexp_stride", "draft_logits_ptr", "draft_logits_stride_0", "draft_logits_stride_1",
                  "draft_local_max_ptr", "draft_local_max_stride", "draft_local_sumexp_ptr",
                  "draft_local_sumexp_stride", "draft_sampled_ptr", "expanded_idx_mapping_ptr",
                  "expanded_local_pos_ptr", "temp_ptr", "vocab_size", "num_logits", "vocab_num_blocks", "BLOCK_SIZE",
                  "PADDED_VOCAB_NUM_BLOCKS")
    inputs = {n: (I64 if n == "expanded_idx_mapping" else I32 if n in ("draft_sampled", "expanded_local_pos") else F32)
              for n in ARRAYS}  # fmt: skip
    scalar_names = ("vocab_num_blocks", "vocab_size")
    launch_names = ("PADDED_VOCAB_NUM_BLOCKS",)
    features = {
        "residual_rows": "draft rows whose residual mass is computed",
        "first_rows_skipped": "a request's first draft row (nothing written)",
        "placeholder_next_skipped": "a row whose next draft is -1 (nothing written)",
        "greedy_skipped": "a greedy request's rows (nothing written)",
        "zero_residual": "a row whose draft is the target (a residual of 0)",
        "ratio_below_one": "a row whose previous joint ratio is below 1 (p_{i-1} < 1)",
        "several_blocks": "more than one 8192-wide block",
        "padded_blocks": "three 8192-wide blocks or more, not a power of two (the reduction over a row's blocks reads padded ones)",
        # production extremes
        "vocab_past_131072": "a 151936- or 262144-id vocabulary (19 or 32 blocks)",
        "many_rows": "more than 192 logits rows",
        # production scale
        "row_offset_past_2_31": "a row whose offset logit_idx * stride lies past 2**31 elements",
    }
    extremes = ("vocab_past_131072", "many_rows")
    scale_features = ("row_offset_past_2_31",)
    oracle_functions = verify_oracles("compute_local_residual_mass")

    def rules(self, case: Case, tier: Tier) -> None:
        """§32.2 (the extended tier §32.4): the step with the drafter's logits, ``vocab_size`` the
        narrower width, §30's statistics and §31's joint log ratios where read."""
        a = case.arrays
        extra = sorted(set(a) - set(self.inputs))
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        missing = sorted(set(self.inputs) - set(a))
        if missing:
            raise ContractViolation(f"arrays.{missing[0]}", "is required (block verification with draft logits)")
        v = step_view(case, tier)
        if case.scalars.get("vocab_size") != v.V:
            raise ContractViolation("scalars.vocab_size", f"must be the narrower table's width ({v.V})")
        clp = a["cumulative_log_p"]
        if clp.dtype != np.float32 or clp.shape != (v.n,):
            raise ContractViolation("arrays.cumulative_log_p", f"must be float32 [{v.n}]")
        rows = read_rows(v, a["draft_sampled"].astype(np.int64))
        if np.isnan(clp[rows - 1]).any() or np.any(clp[rows - 1] > 0):
            raise ContractViolation("arrays.cumulative_log_p", "must be at most 0 where read")
        if tier == "production":
            check_clp(a, v, rows - 1)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        v = step_view(case, "extended", stats=False)
        ds = a["draft_sampled"].astype(np.int64)
        rows = read_rows(v, ds)
        rd = v.random_draft_rows
        ref = self._residuals(case)
        checks = {
            "residual_rows": bool(rows.size),
            "first_rows_skipped": bool(np.any(rd & (v.elp == 0))),
            "placeholder_next_skipped": bool(np.any(rd & (v.elp > 0) & (np.append(ds[1:], 0) < 0))),
            "greedy_skipped": bool(np.any(v.draft_rows & v.greedy[v.row_req] & (v.elp > 0))),
            "zero_residual": bool(rows.size) and bool(np.any(np.all(ref[rows] == 0, axis=1))),
            "ratio_below_one": bool(np.any(a["cumulative_log_p"][rows - 1] < 0)),
            "several_blocks": v.V > STATS_BLOCK,
            "padded_blocks": padded_blocks(v.V),
            "vocab_past_131072": v.V > 1 << 17,
            "many_rows": v.n > 192,
            "row_offset_past_2_31": bool(rows.size) and past_limit(int(rows.max()) * a["target_logits"].shape[1]),
        }
        return frozenset(k for k, x in checks.items() if x)

    def _residuals(self, case: Case) -> np.ndarray:
        from ....oracles import vectorized_v2_verify as o

        n = case.arrays["target_logits"].shape[0]
        out = np.full((n, case.scalars["vocab_num_blocks"]), np.nan, np.float32)
        o.compute_local_residual_mass(local_residual_mass=out, **case.arrays, **case.scalars)
        return out

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {"local_residual_mass": (F32, (case.arrays["target_logits"].shape[0], case.scalars["vocab_num_blocks"]))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        j, b = divmod(index, case.scalars["vocab_num_blocks"])
        starts = np.flatnonzero(case.arrays["expanded_local_pos"] == 0)
        return int(np.searchsorted(starts, j, side="right") - 1), f"logits row {j}, block {b}"

    def programs(self, case: Case) -> int:
        return case.arrays["target_logits"].shape[0] * case.scalars["vocab_num_blocks"]

    def split_requests(self, case: Case) -> list[int] | None:
        return list(range(request_count(case)))

    def join_requests(self, case: Case, pieces: list[int]) -> Case:
        return keep_requests(case, list(pieces))


TARGET = LocalResidualMass()
