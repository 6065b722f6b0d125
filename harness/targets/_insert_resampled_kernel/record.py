"""``_insert_resampled_kernel``: docs/CONTRACT.md §35.

Per request of ``rejection_sample``, last in its chain: the count of sampled tokens goes up by
one, and unless the request is greedy and was rejected before its bonus, the winner of the
block of greatest value among §34's (the first of equals, NaN as ``-inf``) is written after
the accepted tokens. Launched as ``rejection_sample`` launches it (grid ``(num_reqs,)``,
``PADDED_RESAMPLE_NUM_BLOCKS = next_power_of_2(RNB)``); everything exact (a maximum of stored
values), ``sampled`` and ``num_sampled`` updated in place.
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
    check_temperature,
    keep_requests,
    need,
    verify_oracles,
)
from .layout import ARRAYS, NAME, requests

INTS = {"sampled": I64, "num_sampled": I32, "resampled_local_argmax": I64, "cu_num_logits": I32,
        "expanded_idx_mapping": I64}


class InsertResampled(VerifyTarget):
    state_index = ("expanded_idx_mapping",)
    per_state = ("temperature",)
    name = NAME
    runner = "V2"
    module = UTILS
    function = NAME
    section = 35
    launcher = "launch_insert_resampled"
    parameters = ("sampled_ptr", "sampled_stride", "num_sampled_ptr", "resampled_local_argmax_ptr",
                  "resampled_local_argmax_stride", "resampled_local_max_ptr", "resampled_local_max_stride",
                  "resample_num_blocks", "cu_num_logits_ptr", "expanded_idx_mapping_ptr", "temp_ptr",
                  "PADDED_RESAMPLE_NUM_BLOCKS")
    inputs = {n: INTS.get(n, F32) for n in ARRAYS}
    inout = frozenset({"sampled", "num_sampled"})
    scalar_names = ("resample_num_blocks",)
    launch_names = ("PADDED_RESAMPLE_NUM_BLOCKS",)
    features = {
        "random_draw": "a random request's drawn token inserted (a rejection's residual or its bonus)",
        "greedy_bonus": "a greedy request at its bonus (its argmax inserted)",
        "greedy_skipped": "a greedy request rejected before its bonus (its count alone goes up)",
        "no_drafts": "a request without drafts (its count 0 -> 1, the bonus at slot 0)",
        "later_block_wins": "a winner from a block past the first",
        "masked_block": "a block of value -inf (every lane masked or cut) beside a finite one",
        "fp64_values": "float64 block values (the float64 noise path)",
        "several_blocks": "more than one 1024-wide block",
        # production extremes
        "vocab_past_131072": "a 151936- or 262144-id vocabulary (149 or 256 blocks: a padded count of 256)",
        "many_requests": "more than 64 requests",
    }
    extremes = ("vocab_past_131072", "many_requests")
    oracle_functions = verify_oracles("insert_resampled")

    def windows_of(self, case: Case) -> list:
        return []  # §35 is exact: a maximum of stored values

    def rules(self, case: Case, tier: Tier) -> None:
        """§35.2 (the extended tier §35.4): requests of ``1 .. K + 1`` rows with their state rows,
        §33's counts (``0 .. d_r``) and ``sampled`` rows of ``K + 1``, §34's block winners (each a
        token of its block where read; production: no NaN value where read), ``resample_num_blocks``
        the blocks, ``PADDED_RESAMPLE_NUM_BLOCKS`` vLLM's."""
        a = case.arrays
        extra = sorted(set(a) - set(self.inputs))
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        t = check_temperature(a, tier)
        sampled = need(a, "sampled", I64, 2)
        B, K1 = sampled.shape
        cu = need(a, "cu_num_logits", I32, 1, (B + 1,)).astype(np.int64)
        nl = np.diff(cu)
        if cu[0] != 0 or np.any(nl < 1) or np.any(nl > K1):
            raise ContractViolation("arrays.cu_num_logits", f"must start at 0, each request 1 to K + 1 = {K1} rows")
        eidx = need(a, "expanded_idx_mapping", I64, 1, (int(cu[-1]),))
        idx = eidx[cu[:-1]]
        if np.any(np.repeat(idx, nl) != eidx) or np.any(idx < 0) or np.any(idx >= len(t)) or len(np.unique(idx)) != B:
            raise ContractViolation("arrays.expanded_idx_mapping", "must repeat each request's own state row over its rows")
        k = need(a, "num_sampled", I32, 1, (B,)).astype(np.int64)
        if np.any(k < 0) or np.any(k > nl - 1):
            raise ContractViolation("arrays.num_sampled", "must be §33's count: 0 .. each request's drafts")
        nb = case.scalars.get("resample_num_blocks")
        if not isinstance(nb, int) or isinstance(nb, bool) or nb < 1:
            raise ContractViolation("scalars.resample_num_blocks", "must be an int >= 1 (cdiv(V, 1024))")
        la = need(a, "resampled_local_argmax", I64, 2, (B, None))
        lm = a.get("resampled_local_max")
        if lm is None or lm.dtype not in (F32, F64) or lm.shape != la.shape:
            raise ContractViolation("arrays.resampled_local_max", "must be float32 or float64 of the winners' shape")
        if la.shape[1] < nb:
            raise ContractViolation("arrays.resampled_local_argmax", f"must have resample_num_blocks = {nb} columns")
        pad = case.launch.get("PADDED_RESAMPLE_NUM_BLOCKS")
        if pad is not None and (tier == "production" or not isinstance(pad, int) or pad < 1 or pad & (pad - 1)):
            raise ContractViolation("launch.PADDED_RESAMPLE_NUM_BLOCKS", "is vLLM's (null)" + (
                "" if tier == "production" else ", or a power of two"))
        _, _, _, drawn = requests(case)
        r = np.flatnonzero(drawn)
        b = np.arange(nb)
        w, m = la[r, :nb], lm[r, :nb]
        if tier == "production":
            if np.isnan(m).any() or np.isposinf(m).any():
                raise ContractViolation("arrays.resampled_local_max", "must be §34's block values (no NaN, no +inf) "
                                        "where read")
        if np.any((w < b * SAMPLE_BLOCK) | (w >= (b + 1) * SAMPLE_BLOCK)):
            raise ContractViolation("arrays.resampled_local_argmax", "each block's winner must be a token of its "
                                    "block where read")

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        first, d, k, drawn = requests(case)
        nb = case.scalars["resample_num_blocks"]
        m = a["resampled_local_max"][:, :nb].astype(np.float64)
        m = np.where(np.isnan(m), -np.inf, m)
        win = np.argmax(m, axis=1) if nb else np.zeros(len(k), np.int64)
        greedy = ~drawn | (a["temperature"][a["expanded_idx_mapping"][first + np.clip(k, 0, None)]] == 0)
        rnd = drawn & ~greedy
        checks = {
            "random_draw": bool(rnd.any()),
            "greedy_bonus": bool(np.any(drawn & greedy)),
            "greedy_skipped": bool(np.any(~drawn)),
            "no_drafts": bool(np.any(d == 0)),
            "later_block_wins": bool(np.any(drawn & (win > 0))),
            "masked_block": bool(np.any(drawn[:, None] & np.isneginf(m)) and np.isfinite(m[drawn]).any()),
            "fp64_values": a["resampled_local_max"].dtype == F64 and bool(rnd.any()),
            "several_blocks": nb > 1,
            "vocab_past_131072": nb > 128,
            "many_requests": len(k) > 64,
        }
        return frozenset(n for n, x in checks.items() if x)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        if array == "sampled":
            r, s = divmod(index, case.arrays["sampled"].shape[1])
            return r, f"request {r}, slot {s}"
        return index, f"request {index}'s count"

    def programs(self, case: Case) -> int:
        return len(case.arrays["num_sampled"])

    def split_requests(self, case: Case) -> list[int] | None:
        return list(range(len(case.arrays["num_sampled"])))

    def join_requests(self, case: Case, pieces: list[int]) -> Case:
        return keep_requests(case, list(pieces))


TARGET = InsertResampled()
