"""``_post_update_kernel``: docs/CONTRACT.md §19.

After sampling, Model Runner V2 moves each request's state on: its computed-token count (by the
tokens the step actually computed), its last sampled token, its token history and length, its
penalties' output-token counts (the last pipeline rank), and on a non-last pipeline rank the
drafts it received. Launched as vLLM's ``post_update`` launches it (grid ``(B,)``,
``num_warps = 1``).
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, INT32_MAX
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I32, I64, INPUT_BATCH, V2Target, only, state_row, v2_oracles
from . import edges
from .edges import sampled_ids, shapes
from .layout import NAME

OPTIONAL = ("query_start_loc", "output_bin_counts", "draft_tokens")


class PostUpdate(V2Target):
    name = NAME
    runner = "V2"
    module = INPUT_BATCH
    function = NAME
    section = 19
    launcher = "launch_post_update"
    parameters = ("idx_mapping_ptr", "num_computed_tokens_ptr", "last_sampled_tokens_ptr", "output_bin_counts_ptr",
                  "output_bin_counts_stride", "sampled_tokens_ptr", "sampled_tokens_stride", "num_sampled_ptr",
                  "num_rejected_ptr", "query_start_loc_ptr", "all_token_ids_ptr", "all_token_ids_stride",
                  "total_len_ptr", "draft_tokens_ptr", "draft_tokens_out_ptr", "num_draft_tokens")
    inputs = {"idx_mapping": I64, "num_computed_tokens": I32, "output_bin_counts": I32, "sampled_tokens": I64,
              "num_sampled": I32, "num_rejected": I32, "query_start_loc": I32, "all_token_ids": I32, "total_len": I32,
              "draft_tokens": I64}
    optional = OPTIONAL + ("draft_tokens_out",)
    inout = frozenset({"num_computed_tokens", "all_token_ids", "total_len", "output_bin_counts"})
    scalar_names = ("num_reqs", "num_draft_tokens")
    per_row = {"idx_mapping": 0, "sampled_tokens": 0, "num_sampled": 0, "num_rejected": 0}
    features = {
        "last_rank": "the last pipeline rank's call: query_start_loc and the penalties' counts",
        "pipeline_rank": "a non-last pipeline rank's call: no query_start_loc (the rejected come off the count)",
        "pipeline_drafts": "a non-last rank's received drafts copied to the state",
        "masked_row": "a row a pipeline rank masks out (-1: nothing written)",
        "chunked_row": "a row that sampled nothing (still prefilling): history unchanged, its count moves on",
        "rejected": "a row that rejected tokens (its count moves on by the tokens it kept)",
        "token_counted_twice": "a row that sampled one id twice (its penalties count grows by 2)",
        "untouched_state_rows": "state rows no batch row names (they keep their state)",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "history_past_32767": "a history growing past 32767 tokens (max_model_len of 32k and more)",
        "ids_past_32767": "a counted id past 32767 (the penalties' rows of a 151936-id vocabulary)",
    }
    extremes = ("history_past_32767", "ids_past_32767")
    oracle_functions = v2_oracles("post_update")

    def arguments(self, arrays, case):  # noqa: ANN001, ANN201 - V2Target's
        return {n: None for n in self.optional} | dict(arrays)

    def production_rules(self, case: Case) -> None:
        """§19.2: state rows distinct or ``-1`` (a masked row's counts are not read); the last
        rank's call (``query_start_loc`` and the penalties' counts, the query holding its logits)
        or a non-last rank's (neither; counts with room for the rejected; its drafts);
        ``0 <= num_sampled <= K + 1``, a row that sampled nothing rejected nothing; histories with
        room; ids of the vocabulary; counts in int32."""
        a = case.arrays
        only(a, set(self.inputs))
        R, W, S = shapes(case)
        if not 2 <= S <= 33:
            raise ContractViolation("arrays.sampled_tokens", "must be [B, K + 1] with 1 <= K <= 32")
        last = "query_start_loc" in a
        if last != ("output_bin_counts" in a) or (last and "draft_tokens" in a):
            raise ContractViolation("arrays.query_start_loc", "the last rank passes query_start_loc and the penalties' "
                                    "counts (no drafts); a non-last rank passes neither")
        s = a["idx_mapping"]
        real = s >= 0
        ns = a["num_sampled"].astype(np.int64)
        nr = a["num_rejected"].astype(np.int64)
        if np.any(ns < 0) or np.any(ns > S) or np.any(nr < 0) or np.any(real & (ns == 0) & (nr != 0)):
            raise ContractViolation("arrays.num_sampled", "must be in [0, K + 1], with rejected >= 0, 0 when nothing sampled")
        c = a["num_computed_tokens"].astype(np.int64)
        t = a["total_len"].astype(np.int64)
        if np.any(c < 0) or np.any(t < 0) or np.any(t[s[real]] + ns[real] > W):
            raise ContractViolation("arrays.total_len", "counts and lengths must be >= 0, a history with room for the "
                                    "sampled tokens")
        if last:
            qlen = np.diff(a["query_start_loc"].astype(np.int64))
            if np.any(qlen[real] < ns[real] + nr[real]) or np.any(c[s[real]] + qlen[real] > INT32_MAX):
                raise ContractViolation("arrays.query_start_loc", "a row's query must hold its logits (sampled + "
                                        "rejected), its count plus it within int32")
            if np.any(a["output_bin_counts"] < 0) or np.any(a["output_bin_counts"] > INT32_MAX - S):
                raise ContractViolation("arrays.output_bin_counts", "must be counts >= 0 that cannot overflow")
        elif np.any(c[s[real]] < nr[real]):
            raise ContractViolation("arrays.num_computed_tokens", "a non-last rank's count holds the query: at least "
                                    "the rejected")
        _, ids = sampled_ids(case)
        V = a["output_bin_counts"].shape[1] if last else 262144
        if np.any((ids < 0) | (ids >= V)):
            raise ContractViolation("arrays.sampled_tokens", f"a sampled id must be a token id in [0, {V})")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        s = a["idx_mapping"]
        real = s >= 0
        ns = a["num_sampled"].astype(np.int64)
        nr = a["num_rejected"].astype(np.int64)
        t = a["total_len"].astype(np.int64)
        last = "query_start_loc" in a
        owners, ids = sampled_ids(case)
        twice = len(set(zip(owners.tolist(), ids.tolist(), strict=True))) < len(ids)
        B, R = len(s), a["total_len"].shape[0]
        checks = {
            "last_rank": last,
            "pipeline_rank": not last,
            "pipeline_drafts": "draft_tokens" in a,
            "masked_row": bool(np.any(~real)),
            "chunked_row": bool(np.any(real & (ns <= 0))),
            "rejected": bool(np.any(real & (nr > 0))),
            "token_counted_twice": twice and "output_bin_counts" in a,
            "untouched_state_rows": R > int(real.sum()),
            "several_rows": B > 1,
            "many_requests": B > 64,
            "history_past_32767": bool(np.any(t[s[real]] + np.maximum(ns[real], 0) > INT16_MAX)),
            "ids_past_32767": "output_bin_counts" in a and bool(np.any(ids > INT16_MAX)),
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        R = case.arrays["total_len"].shape[0]
        out = {"last_sampled_tokens": (I64, (R, 1))}
        if "draft_tokens" in case.arrays:
            out["draft_tokens_out"] = (I64, (R, case.scalars["num_draft_tokens"]))
        return out

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        width = {"all_token_ids": case.arrays["all_token_ids"].shape[1],
                 "output_bin_counts": case.arrays.get("output_bin_counts", np.zeros((1, 1))).shape[1],
                 "draft_tokens_out": max(case.scalars["num_draft_tokens"], 1)}.get(array, 1)
        r = index // width
        b = state_row(case.arrays["idx_mapping"], r)
        return b, f"state row {r}" + ("" if b is not None else " (no batch row names it)")


TARGET = PostUpdate()
