"""``_compute_local_logits_stats_kernel``: docs/CONTRACT.md §30.

The first stage of ``rejection_sample`` (``vllm/v1/worker/gpu/spec_decode/
rejection_sampler_utils.py``): per non-bonus logits row and 8192-wide block, a greedy row's
argmax and maximum, a random row's maximum and summed exponentials, and the drafter's (its
cached logits divided by the temperature). Launched as ``rejection_sample`` launches it (grid
``(num_logits, cdiv(V, 8192))``); the argmaxes and the maxima are exact, the sums within their
bounds.
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
    STATS,
    STATS_BLOCK,
    UTILS,
    VerifyTarget,
    cdiv,
    check_logits,
    check_temperature,
    need,
    verify_oracles,
)
from ...targetkit.scale import past_limit
from .layout import NAME, keep_requests, requests


class LocalLogitsStats(VerifyTarget):
    state_index = ("expanded_idx_mapping",)
    per_state = ("temperature", "draft_logits")
    name = NAME
    runner = "V2"
    module = UTILS
    function = NAME
    section = 30
    launcher = "launch_compute_local_logits_stats"
    parameters = ("target_local_argmax_ptr", "target_local_argmax_stride", "target_local_max_ptr",
                  "target_local_max_stride", "target_local_sumexp_ptr", "target_local_sumexp_stride",
                  "draft_local_max_ptr", "draft_local_max_stride", "draft_local_sumexp_ptr", "draft_local_sumexp_stride",
                  "target_logits_ptr", "target_logits_stride", "draft_logits_ptr", "draft_logits_stride_0",
                  "draft_logits_stride_1", "expanded_idx_mapping_ptr", "expanded_local_pos_ptr", "temp_ptr", "vocab_size",
                  "num_logits", "BLOCK_SIZE", "HAS_DRAFT_LOGITS")
    inputs = {"target_logits": F32, "draft_logits": F32, "expanded_idx_mapping": I64, "expanded_local_pos": I32,
              "temperature": F32}
    optional = ("draft_logits",)
    scalar_names = ("vocab_size",)
    features = {
        "greedy_row": "a greedy request's row (argmax and maximum)",
        "random_row": "a random request's row (maximum and summed exponentials)",
        "draft_logits": "the drafter's logits (probabilistic drafts: their maxima and sums too)",
        "one_hot_drafts": "no draft logits (the draft's statistics untouched)",
        "bonus_rows_skipped": "bonus rows (nothing written)",
        "masked_logits": "-inf logits in a random row",
        "narrower_draft_vocab": "a draft vocabulary narrower than the target's (V = the draft's)",
        "wider_draft_vocab": "a draft vocabulary wider than the target's",
        "tied_maximum": "a greedy row whose block maximum is tied (the first wins)",
        "negative_partial_block": "a greedy row whose last block, past the vocabulary's end, holds only negative logits "
                                  "(a padded lane must not win)",
        "low_temperature": "a random request below temperature 0.5 (draft quotients twice the logits and more)",
        "several_blocks": "more than one 8192-wide block",
        "untouched_state_rows": "draft rows of state rows no request names",
        # production extremes
        "vocab_past_131072": "a 151936- or 262144-id vocabulary (19 or 32 blocks)",
        "many_rows": "more than 192 logits rows",
        # production scale
        "row_offset_past_2_31": "a row whose offset logit_idx * stride lies past 2**31 elements",
    }
    extremes = ("vocab_past_131072", "many_rows")
    scale_features = ("row_offset_past_2_31",)
    oracle_functions = verify_oracles("compute_local_logits_stats")

    def rules(self, case: Case, tier: Tier) -> None:
        """§30.2 (the extended tier, §30.4): the step's rows as §17 expands them, the state rows'
        temperatures, ``vocab_size`` the narrower table's width (extended: up to it), finite
        logits (``-inf`` where a random row is masked, a finite one kept), the drafter's finite
        where read."""
        a = case.arrays
        extra = sorted(set(a) - set(self.inputs))
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        tl_ = need(a, "target_logits", F32, 2)
        n, Vt = tl_.shape
        elp = need(a, "expanded_local_pos", I32, 1, (n,))
        eidx = need(a, "expanded_idx_mapping", I64, 1, (n,))
        t = check_temperature(a, tier)
        if n < 1 or elp[0] != 0 or np.any((np.diff(elp.astype(np.int64)) != 1) & (elp[1:] != 0)):
            raise ContractViolation("arrays.expanded_local_pos", "must count 0 .. d_r over each request's rows (§17)")
        starts, counts = requests(elp)
        s = eidx[starts]
        if np.any(np.repeat(s, counts) != eidx) or np.any(s < 0) or np.any(s >= len(t)) or len(np.unique(s)) != len(s):
            raise ContractViolation("arrays.expanded_idx_mapping", "must repeat each request's own state row over its rows")
        dl = a.get("draft_logits")
        widths = [Vt]
        if dl is not None:
            need(a, "draft_logits", F32, 3)
            widths.append(dl.shape[2])
            if dl.shape[0] != len(t) or np.any(counts - 1 > dl.shape[1]):
                raise ContractViolation("arrays.draft_logits", "must be [max_num_reqs, K, V_d], K at least every request's drafts")
        V = case.scalars.get("vocab_size")
        if not isinstance(V, int) or not 1 <= V <= min(widths) or (tier == "production" and V != min(widths)):
            raise ContractViolation("scalars.vocab_size", "must be the narrower table's width" +
                                    (" or less" if tier == "extended" else ""))
        bonus = np.zeros(n, bool)
        bonus[starts + counts - 1] = True
        greedy = t[eidx] == 0
        check_logits(tl_, "target_logits", np.flatnonzero(greedy), V, tier, masked=False)
        check_logits(tl_, "target_logits", np.flatnonzero(~greedy), V, tier, masked=True)
        if dl is not None:
            read = ~greedy & ~bonus
            check_logits(dl[eidx[read], elp[read]], "draft_logits", np.arange(int(read.sum())), V, tier, masked=False)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        tl_, eidx, elp, t = a["target_logits"], a["expanded_idx_mapping"], a["expanded_local_pos"], a["temperature"]
        n, Vt = tl_.shape
        V = case.scalars["vocab_size"]
        starts, counts = requests(elp)
        bonus = np.zeros(n, bool)
        bonus[starts + counts - 1] = True
        greedy = (t[eidx] == 0) & ~bonus
        rnd = (t[eidx] != 0) & ~bonus
        dl = a.get("draft_logits")
        tied = negative = False
        for j in np.flatnonzero(greedy)[:64]:
            for b in range(cdiv(V, STATS_BLOCK)):
                blk = tl_[j, b * STATS_BLOCK : min(V, (b + 1) * STATS_BLOCK)]
                tied |= bool(np.sum(blk == blk.max()) > 1)
            negative |= bool(V % STATS_BLOCK and V and tl_[j, (V - 1) // STATS_BLOCK * STATS_BLOCK : V].max() < 0)
        checks = {
            "greedy_row": bool(greedy.any()),
            "random_row": bool(rnd.any()),
            "draft_logits": dl is not None and bool(rnd.any()),
            "one_hot_drafts": dl is None,
            "bonus_rows_skipped": True,
            "masked_logits": bool(np.isneginf(tl_[rnd, :V]).any()),
            "narrower_draft_vocab": dl is not None and dl.shape[2] < Vt,
            "wider_draft_vocab": dl is not None and dl.shape[2] > Vt,
            "tied_maximum": tied,
            "negative_partial_block": negative,
            "low_temperature": bool(np.any((t[eidx[rnd]] > 0) & (t[eidx[rnd]] < 0.5))),
            "several_blocks": V > STATS_BLOCK,
            "untouched_state_rows": dl is not None and dl.shape[0] > len(starts),
            "vocab_past_131072": V > 1 << 17,
            "many_rows": n > 192,
            "row_offset_past_2_31": past_limit((n - 1) * Vt),
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        n = case.arrays["target_logits"].shape[0]
        nb = cdiv(case.scalars["vocab_size"], STATS_BLOCK)
        return {k: (I64 if k == "target_local_argmax" else F32, (n, nb)) for k in STATS}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        nb = cdiv(case.scalars["vocab_size"], STATS_BLOCK)
        j, b = divmod(index, nb)
        starts, _ = requests(case.arrays["expanded_local_pos"])
        r = int(np.searchsorted(starts, j, side="right") - 1)
        return r, f"logits row {j}, block {b}"

    def programs(self, case: Case) -> int:
        return case.arrays["target_logits"].shape[0] * cdiv(case.scalars["vocab_size"], STATS_BLOCK)

    def split_requests(self, case: Case) -> list[int] | None:
        return list(range(len(requests(case.arrays["expanded_local_pos"])[0])))

    def join_requests(self, case: Case, pieces: list[int]) -> Case:
        return keep_requests(case, list(pieces))


TARGET = LocalLogitsStats()
