"""``rejection_greedy_sample_kernel``: docs/CONTRACT.md §10.

The greedy half of vLLM's rejection sampler: per greedy request, drafts are accepted while
they equal the target's argmax; the first mismatch gets the argmax, a fully accepted row the
bonus id. With ``SYNTHETIC_MODE`` a draft is accepted when ``uniform < rate``. Launched as
vLLM's dispatcher ``_rejection_greedy_sample`` launches it (grid ``(B,)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import MAX_NUM_SEQS
from ...targetkit import output_rows
from ...targetkit.base import ContractViolation, TritonTarget, numpy_and_numba
from ...targetkit.draft_rows import (
    DraftRowMoves,
    Rows,
    check_array,
    check_draft_counts,
)
from . import edges
from .layout import BOOL, F32, F64, I32, I64, NAME, PER_REQUEST, PER_TOKEN, processed

MODULE = "vllm/v1/sample/rejection_sampler.py"


def _tokens(case: Case) -> tuple[Rows, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every draft token of every request: the rows, its request, its position ``j`` in the
    request, whether §10.1 accepts it (the comparison alone, rejections before it aside), and
    its id."""
    a = case.arrays
    rows = Rows.of(a["cu_num_draft_tokens"])
    d = np.maximum(rows.d, 0)
    r = np.repeat(np.arange(rows.B, dtype=np.int64), d)
    j = np.arange(r.size, dtype=np.int64) - np.repeat(np.cumsum(d) - d, d)
    t = rows.s[r] + j
    did = a["draft_token_ids"][t].astype(np.int64)
    rates = a.get("synthetic_conditional_rates")
    if rates is not None:
        ok = (a["uniform_probs"][t].astype(np.float64) < rates[j].astype(np.float64)) & (did >= 0)
    else:
        ok = did == a["target_argmax"][t].astype(np.int64).astype(np.int32)
    return rows, r, j, ok, did


def _firsts(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """Per request, whether §10.1 processes it, and the position of its first rejected draft
    (``-1``: none rejected)."""
    rows, r, j, ok, _ = _tokens(case)
    greedy = case.arrays.get("is_greedy")
    processed = np.ones(rows.B, dtype=bool) if greedy is None else np.asarray(greedy, dtype=bool)
    k = np.full(rows.B, -1, dtype=np.int64)
    rejected_r, first = np.unique(r[~ok], return_index=True)  # r ascending, j ascending within it
    k[rejected_r] = j[~ok][first]
    return processed, k


def first_rejections(case: Case) -> dict[int, int | None]:
    """Per processed request, the position of its first rejected draft (``None``: all
    accepted), as §10.1 decides."""
    processed, k = _firsts(case)
    return {q: (None if k[q] < 0 else int(k[q])) for q in np.flatnonzero(processed).tolist()}


class RejectionGreedy(DraftRowMoves, TritonTarget):
    name = NAME
    runner = "V1"
    function = NAME
    section = 10
    module = MODULE
    parameters = (
        "output_token_ids_ptr",
        "cu_num_draft_tokens_ptr",
        "draft_token_ids_ptr",
        "target_argmax_ptr",
        "bonus_token_ids_ptr",
        "is_greedy_ptr",
        "max_spec_len",
        "uniform_probs_ptr",
        "synthetic_conditional_rates_ptr",
        "SYNTHETIC_MODE",
    )
    inputs = {"cu_num_draft_tokens": I32, "draft_token_ids": I32, "target_argmax": I64, "bonus_token_ids": I32}
    features = {
        "all_greedy": "is_greedy is None (vLLM's all-greedy batch)",
        "mixed_batch": "is_greedy is a tensor with greedy and random requests (random rows untouched)",
        "greedy_tensor_all_true": "is_greedy is a tensor, every request greedy",
        "synthetic_mode": "SYNTHETIC_MODE: acceptance by uniform < rate",
        "no_drafts_row": "a processed request without drafts (the bonus in slot 0)",
        "all_accepted": "a processed request with drafts, every one accepted (the bonus follows)",
        "first_rejected": "a processed request whose first draft is rejected",
        "later_rejected": "a processed request rejected after one or more accepted drafts",
        "minus_one_draft": "a -1 (padding) draft visited",
        "wider_rows": "max_spec_len larger than every request's draft count",
        "ragged": "requests with different draft counts",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        "uniform_at_rate": "synthetic mode: a uniform exactly equal to its rate (u < c rejects)",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests",
        "sixteen_drafts": "a request with 16 drafts (num_speculative_tokens = 16)",
        "ids_past_32767": "an argmax or bonus id past 32767 written (vocabularies of 262144)",
    }
    extremes = ("beyond_1024_requests", "sixteen_drafts", "ids_past_32767")

    oracle_functions = numpy_and_numba("rejection_greedy_sample")

    # -- contract ---------------------------------------------------------------------

    def production_rules(self, case: Case) -> None:
        a = case.arrays
        rows, L = check_draft_counts(case)
        B, N = rows.B, rows.N
        check_array(a, "draft_token_ids", (I32,), (N,))
        check_array(a, "target_argmax", (I64, I32), (N,))
        bonus = a.get("bonus_token_ids")
        if bonus is None or bonus.dtype not in (I32, I64) or bonus.shape not in ((B, 1), (B,)):
            raise ContractViolation("arrays.bonus_token_ids", "must be int32 or int64 of shape [B, 1] or [B]")
        check_array(a, "is_greedy", (BOOL,), (B,), optional=True)
        check_array(a, "uniform_probs", (F64, F32), (N,), optional=True)
        rates = a.get("synthetic_conditional_rates")
        if rates is not None:
            if rates.dtype != F32 or rates.ndim != 1 or rates.size < max(rows.longest, 1):
                raise ContractViolation("arrays.synthetic_conditional_rates",
                                        "must be float32 [K] with K >= every request's draft count (and >= 1)")
            if "uniform_probs" not in a:
                raise ContractViolation("arrays.uniform_probs", "is required in synthetic mode")
        extra = sorted(set(a) - {*self.inputs, "is_greedy", "uniform_probs", "synthetic_conditional_rates"})
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        rows = Rows.of(a["cu_num_draft_tokens"])
        processed, first = _firsts(case)
        L = case.scalars["max_spec_len"]
        greedy = a.get("is_greedy")
        _, r_of, j_of, _, did = _tokens(case)
        last = np.where(processed, np.where(first < 0, rows.d - 1, first), -1)  # per request, the last position visited
        visited_minus = bool(np.any((did == -1) & (j_of <= last[r_of])))
        out = np.full(self.output_specs(case)["output_token_ids"][1], -1, dtype=np.int32)
        self.call_oracle(self.oracles["numpy"], case, {"output_token_ids": out})
        rates = a.get("synthetic_conditional_rates")
        at_rate = False
        if rates is not None:
            pos = np.concatenate([np.arange(max(int(n), 0)) for n in rows.d]) if rows.N else np.zeros(0, np.int64)
            at_rate = bool(np.any(a["uniform_probs"].astype(np.float64) == rates[pos].astype(np.float64)))
        checks = {
            "all_greedy": greedy is None,
            "mixed_batch": greedy is not None and bool(greedy.any()) and not bool(greedy.all()),
            "greedy_tensor_all_true": greedy is not None and bool(greedy.all()),
            "synthetic_mode": rates is not None,
            "no_drafts_row": bool(np.any(processed & (rows.d == 0))),
            "all_accepted": bool(np.any(processed & (first < 0) & (rows.d > 0))),
            "first_rejected": bool(np.any(processed & (first == 0))),
            "later_rejected": bool(np.any(processed & (first > 0))),
            "minus_one_draft": visited_minus,
            "wider_rows": L > rows.longest,
            "ragged": len(set(rows.d.tolist())) > 1,
            "several_requests": rows.B > 1,
            "many_requests": rows.B > 64,
            "uniform_at_rate": at_rate,
            "beyond_1024_requests": rows.B > MAX_NUM_SEQS,
            "sixteen_drafts": rows.longest >= 16,
            "ids_past_32767": bool(np.any(out > 32767)),
        }
        return frozenset(k for k, v in checks.items() if v)

    # -- running ----------------------------------------------------------------------

    grid_field = "arrays.cu_num_draft_tokens"

    def programs(self, case: Case) -> int:
        return len(case.arrays["cu_num_draft_tokens"])

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return output_rows.output_specs(case)

    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        """As ``_rejection_greedy_sample`` (vLLM 0.33.0): grid ``(output_token_ids.shape[0],) = (B,)``,
        ``SYNTHETIC_MODE = synthetic_conditional_rates is not None``."""
        from ....kernels.launchers import launch_rejection_greedy_sample

        # vLLM's grid is output_token_ids.shape[0], which is B; the extended tier's output has
        # more rows than requests (output_rows), so the launcher counts the grid in requests.
        launch_rejection_greedy_sample(
            kernel,
            output_token_ids=tensors["output_token_ids"],
            cu_num_draft_tokens=tensors["cu_num_draft_tokens"],
            draft_token_ids=tensors["draft_token_ids"],
            target_argmax=tensors["target_argmax"],
            bonus_token_ids=tensors["bonus_token_ids"],
            is_greedy=tensors.get("is_greedy"),
            max_spec_len=case.scalars["max_spec_len"],
            uniform_probs=tensors.get("uniform_probs"),
            synthetic_conditional_rates=tensors.get("synthetic_conditional_rates"),
        )

    def call_oracle(self, oracle: Any, case: Case, outputs: Mapping[str, np.ndarray]) -> None:
        a = case.arrays
        oracle(
            output_token_ids=outputs["output_token_ids"],
            cu_num_draft_tokens=a["cu_num_draft_tokens"],
            draft_token_ids=a["draft_token_ids"],
            target_argmax=a["target_argmax"],
            bonus_token_ids=a["bonus_token_ids"],
            is_greedy=a.get("is_greedy"),
            max_spec_len=case.scalars["max_spec_len"],
            uniform_probs=a.get("uniform_probs"),
            synthetic_conditional_rates=a.get("synthetic_conditional_rates"),
        )

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        return output_rows.locate(case, index, processed(case), "a random request's")

    per_request, per_token = PER_REQUEST, PER_TOKEN  # DraftRowMoves: split, join, max_spec_len


    # -- extended tier (docs/CONTRACT.md §10.4): edges.py ----------------------------------

    def extended_rules(self, case: Case) -> None:
        edges.validate(case, dict(self.inputs))


TARGET = RejectionGreedy()
