"""``rejection_random_sample_kernel``: docs/CONTRACT.md §11.

The random half of vLLM's rejection sampler: per random request, draft ``j`` is accepted when
``draft_prob > 0`` and the float32 quotient ``target_prob / draft_prob >= uniform``; the first
rejection gets the recovered id (§13), a fully accepted row the bonus id; a ``-1`` draft is
rejected. Launched as vLLM's dispatcher ``_rejection_random_sample`` launches it (grid ``(B,)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import MAX_NUM_SEQS
from ...targetkit import output_rows
from ...targetkit.base import ContractViolation, TritonTarget, numpy_and_numba
from ...targetkit.draft_rows import (
    MAX_VOCAB,
    DraftRowMoves,
    Rows,
    check_array,
    check_draft_counts,
    check_int,
)
from ...targetkit.scale import past_limit
from . import edges
from .layout import (
    BOOL,
    F32,
    F64,
    I32,
    I64,
    NAME,
    PER_REQUEST,
    PER_TOKEN,
    WINDOW_ULPS,
    drafted,
    in_window,
    processed,
    window_bounds,
)

MODULE = "vllm/v1/sample/rejection_sampler.py"
MAX_V = 1 << 20
"""The largest vocabulary a case may have (vLLM's largest models: 262144)."""


@dataclass(frozen=True)
class Visit:
    """One draft position a program visits (§11.1): its token, draft id, ``p``, ``q``, ``u``
    (``None`` where not read) and the decision."""

    r: int
    j: int
    t: int
    did: int
    p: float | None
    q: float | None
    u: float
    accepted: bool


def visits(case: Case) -> list[Visit]:
    """Every position visited, in program order, as §11.1 decides."""
    a = case.arrays
    rows = Rows.of(a["cu_num_draft_tokens"])
    rates = a.get("synthetic_conditional_rates")
    draft = a.get("draft_probs")
    out: list[Visit] = []
    for r in range(rows.B):
        if a["is_greedy"][r]:
            continue
        for j in range(int(rows.d[r])):
            t = int(rows.s[r]) + j
            did = int(a["draft_token_ids"][t])
            u = a["uniform_probs"][t]
            p = q = None
            if did < 0:
                ok = False
            elif rates is not None:
                ok = bool(np.float64(u) < np.float64(rates[j]))
            else:
                p = a["target_probs"][t, did]
                q = np.float32(1) if draft is None else draft[t, did]
                with np.errstate(all="ignore"):
                    ok = bool(q > 0) and bool(np.float64(np.float32(p) / np.float32(q)) >= np.float64(u))
            out.append(Visit(r, j, t, did, p, q, float(u), ok))
            if not ok:
                break
    return out


class RejectionRandom(DraftRowMoves, TritonTarget):
    name = NAME
    runner = "V1"
    function = NAME
    section = 11
    module = MODULE
    parameters = (
        "output_token_ids_ptr",
        "cu_num_draft_tokens_ptr",
        "draft_token_ids_ptr",
        "draft_probs_ptr",
        "target_probs_ptr",
        "bonus_token_ids_ptr",
        "recovered_token_ids_ptr",
        "uniform_probs_ptr",
        "is_greedy_ptr",
        "max_spec_len",
        "vocab_size",
        "synthetic_conditional_rates_ptr",
        "NO_DRAFT_PROBS",
        "SYNTHETIC_MODE",
    )
    inputs = {
        "cu_num_draft_tokens": I32, "draft_token_ids": I32, "target_probs": F32, "bonus_token_ids": I32,
        "recovered_token_ids": I32, "uniform_probs": F64, "is_greedy": BOOL,
    }  # fmt: skip
    features = {
        "no_draft_probs": "draft_probs is None (NO_DRAFT_PROBS: n-gram, greedy drafting)",
        "draft_probs": "draft_probs given (the drafter's softmax rows)",
        "synthetic_mode": "SYNTHETIC_MODE: acceptance by uniform < rate",
        "mixed_batch": "greedy and random requests (greedy rows untouched)",
        "all_random": "every request random",
        "no_drafts_row": "a random request without drafts (the bonus in slot 0)",
        "all_accepted": "a random request with drafts, every one accepted (the bonus follows)",
        "rejected": "a rejected draft (the recovered id written)",
        "later_rejected": "a request rejected after one or more accepted drafts",
        "minus_one_draft": "a -1 (padding) draft visited (rejected without a read)",
        "boundary_accept": "a uniform equal to the float32 quotient p / q (accepted)",
        "boundary_reject": "a uniform one ulp above the quotient (rejected)",
        "quotient_one": "p == q > 0 at a visited draft (the quotient is exactly 1)",
        "zero_target": "p = 0 at a visited draft",
        "zero_uniform": "u = 0 at a visited draft",
        "subnormal_prob": "a subnormal p or q at a visited draft",
        "wider_rows": "max_spec_len larger than every request's draft count",
        "ragged": "requests with different draft counts",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests",
        "sixteen_drafts": "a request with 16 drafts (num_speculative_tokens = 16)",
        "vocab_262144": "a vocabulary of 262144 (Gemma 3): rows of 1 MiB",
        "ids_past_32767": "a draft id past 32767 read from the tables",
        # production scale (docs/CONTRACT.md §11.2; only where tables of 8 GiB fit: targetkit/scale.py)
        "flat_index_past_2_31": "a visited draft read at flat index t*V + id past 2**31",
    }
    extremes = ("beyond_1024_requests", "sixteen_drafts", "vocab_262144", "ids_past_32767")
    scale_features = ("flat_index_past_2_31",)

    oracle_functions = numpy_and_numba("rejection_random_sample")

    # -- contract ---------------------------------------------------------------------

    def production_rules(self, case: Case) -> None:
        a = case.arrays
        rows, L = check_draft_counts(case)
        B, N = rows.B, rows.N
        V = check_int(case.scalars, "vocab_size", 1, MAX_V)
        ids = check_array(a, "draft_token_ids", (I32,), (N,))
        check_array(a, "target_probs", (F32,), (N, V))
        check_array(a, "draft_probs", (F32,), (N, V), optional=True)
        bonus = a.get("bonus_token_ids")
        if bonus is None or bonus.dtype not in (I32, I64) or bonus.shape not in ((B, 1), (B,)):
            raise ContractViolation("arrays.bonus_token_ids", "must be int32 or int64 of shape [B, 1] or [B]")
        check_array(a, "recovered_token_ids", (I32,), (N,))
        check_array(a, "uniform_probs", (F64, F32), (N,))
        check_array(a, "is_greedy", (BOOL,), (B,))
        rates = a.get("synthetic_conditional_rates")
        if rates is not None and (rates.dtype != F32 or rates.ndim != 1 or rates.size < max(rows.longest, 1)):
            raise ContractViolation("arrays.synthetic_conditional_rates",
                                    "must be float32 [K] with K >= every request's draft count (and >= 1)")
        if np.any(ids >= V):
            raise ContractViolation("arrays.draft_token_ids", "must be below vocab_size (negative ids are rejected unread)")
        extra = sorted(set(a) - {*self.inputs, "draft_probs", "synthetic_conditional_rates"})
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        t, p, q = drafted(a, V)
        at = np.flatnonzero(in_window(a["uniform_probs"][t], p, q))
        if at.size:
            raise ContractViolation(
                "arrays.uniform_probs",
                f"must not lie within {WINDOW_ULPS} float32 steps of its draft's quotient p / q (token {int(t[at[0]])}): "
                "a compiled division may decide it either way (docs/CONTRACT.md §11.3); the extended tier draws it",
            )

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        rows = Rows.of(a["cu_num_draft_tokens"])
        vs = visits(case)
        random_rows = [r for r in range(rows.B) if not a["is_greedy"][r]]
        rejected_at = {v.r: v.j for v in vs if not v.accepted}
        read = [v for v in vs if v.p is not None]
        tiny = np.finfo(np.float32).tiny

        def boundary(v: Visit, up: bool) -> bool:
            with np.errstate(all="ignore"):
                quot = np.float64(np.float32(v.p) / np.float32(v.q))
            return bool(np.isfinite(quot) and v.q > 0 and v.u == (np.nextafter(quot, np.inf) if up else quot))

        checks = {
            "no_draft_probs": "draft_probs" not in a,
            "draft_probs": "draft_probs" in a,
            "synthetic_mode": "synthetic_conditional_rates" in a,
            "mixed_batch": bool(a["is_greedy"].any()) and not bool(a["is_greedy"].all()),
            "all_random": not bool(a["is_greedy"].any()),
            "no_drafts_row": any(rows.d[r] == 0 for r in random_rows),
            "all_accepted": any(rows.d[r] > 0 and r not in rejected_at for r in random_rows),
            "rejected": bool(rejected_at),
            "later_rejected": any(j > 0 for j in rejected_at.values()),
            "minus_one_draft": any(v.did < 0 for v in vs),
            "boundary_accept": any(boundary(v, False) for v in read),
            "boundary_reject": any(boundary(v, True) for v in read),
            "quotient_one": any(v.p == v.q and v.q > 0 and "draft_probs" in a for v in read),
            "zero_target": any(v.p == 0 for v in read),
            "zero_uniform": any(v.u == 0 for v in vs),
            "subnormal_prob": any(0 < abs(v.p) < tiny or 0 < abs(v.q) < tiny for v in read),
            "wider_rows": case.scalars["max_spec_len"] > rows.longest,
            "ragged": len(set(rows.d.tolist())) > 1,
            "several_requests": rows.B > 1,
            "many_requests": rows.B > 64,
            "beyond_1024_requests": rows.B > MAX_NUM_SEQS,
            "sixteen_drafts": rows.longest >= 16,
            "vocab_262144": case.scalars["vocab_size"] >= MAX_VOCAB,
            "ids_past_32767": any(v.did > 32767 for v in read),
            "flat_index_past_2_31": any(past_limit(v.t * case.scalars["vocab_size"] + v.did) for v in read),
        }
        return frozenset(k for k, v in checks.items() if v)

    # -- running ----------------------------------------------------------------------

    grid_field = "arrays.cu_num_draft_tokens"

    def programs(self, case: Case) -> int:
        return len(case.arrays["cu_num_draft_tokens"])

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return output_rows.output_specs(case)

    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        """As ``_rejection_random_sample`` (vLLM 0.33.0): grid ``(output_token_ids.shape[0],) = (B,)``,
        ``vocab_size = target_probs.shape[1]``, ``NO_DRAFT_PROBS = draft_probs is None``,
        ``SYNTHETIC_MODE = synthetic_conditional_rates is not None``."""
        from ....kernels.launchers import launch_rejection_random_sample

        # vLLM's grid is output_token_ids.shape[0], which is B; the extended tier's output has
        # more rows than requests (output_rows), so the launcher counts the grid in requests.
        launch_rejection_random_sample(
            kernel,
            output_token_ids=tensors["output_token_ids"],
            cu_num_draft_tokens=tensors["cu_num_draft_tokens"],
            draft_token_ids=tensors["draft_token_ids"],
            draft_probs=tensors.get("draft_probs"),
            target_probs=tensors["target_probs"],
            bonus_token_ids=tensors["bonus_token_ids"],
            recovered_token_ids=tensors["recovered_token_ids"],
            uniform_probs=tensors["uniform_probs"],
            is_greedy=tensors["is_greedy"],
            max_spec_len=case.scalars["max_spec_len"],
            vocab_size=case.scalars["vocab_size"],
            synthetic_conditional_rates=tensors.get("synthetic_conditional_rates"),
        )

    def call_oracle(self, oracle: Any, case: Case, outputs: Mapping[str, np.ndarray]) -> None:
        a = case.arrays
        oracle(
            output_token_ids=outputs["output_token_ids"],
            cu_num_draft_tokens=a["cu_num_draft_tokens"],
            draft_token_ids=a["draft_token_ids"],
            draft_probs=a.get("draft_probs"),
            target_probs=a["target_probs"],
            bonus_token_ids=a["bonus_token_ids"],
            recovered_token_ids=a["recovered_token_ids"],
            uniform_probs=a["uniform_probs"],
            is_greedy=a["is_greedy"],
            max_spec_len=case.scalars["max_spec_len"],
            vocab_size=case.scalars["vocab_size"],
            synthetic_conditional_rates=a.get("synthetic_conditional_rates"),
        )

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        return output_rows.locate(case, index, processed(case), "a greedy request's")

    per_request, per_token = PER_REQUEST, PER_TOKEN  # DraftRowMoves: split, join, max_spec_len

    def settle(self, case: Case, written: Mapping[str, np.ndarray], fills: Mapping[str, int], device: str) -> Case | None:
        """Compiled (``device`` not the CPU: docs/CONTRACT.md §11.3), a uniform in its draft's
        division window may be decided either way: the case with each such uniform moved out of
        the window to the side the run decided (read from where the request's row stops: a
        rejection at slot ``j`` writes slots ``0..j``, a request with every draft accepted
        ``0..d``). Every other decision stays as §11.1 makes it."""
        a = case.arrays
        if device == "cpu" or "draft_probs" not in a or "synthetic_conditional_rates" in a:
            return None
        rows = Rows.of(a["cu_num_draft_tokens"])
        V, L = case.scalars["vocab_size"], case.scalars["max_spec_len"]
        out = written["output_token_ids"].reshape(-1, L + 1)
        u = a["uniform_probs"].copy()
        moved = False
        for r in range(rows.B):
            if a["is_greedy"][r] or rows.d[r] <= 0 or r >= out.shape[0]:
                continue
            stop = int(np.argmax(out[r] == fills["output_token_ids"])) - 1 if np.any(out[r] == fills["output_token_ids"]) else L
            for j in range(min(int(rows.d[r]), stop + 1)):
                t = int(rows.s[r]) + j
                did = int(a["draft_token_ids"][t])
                if not 0 <= did < V:
                    continue
                p, q = a["target_probs"][t, did], a["draft_probs"][t, did]
                if not in_window(u[t : t + 1], np.array([p]), np.array([q]))[0]:
                    continue
                lo, hi, _ = window_bounds(np.array([p]), np.array([q]))
                accept = j < stop
                u[t] = max(float(lo[0]), 0.0) if accept else np.nextafter(u.dtype.type(hi[0]), u.dtype.type(np.inf))
                moved = True
        return case.replace(arrays={"uniform_probs": u}) if moved else None


    # -- extended tier (docs/CONTRACT.md §11.4): edges.py ----------------------------------

    def extended_rules(self, case: Case) -> None:
        edges.validate(case, dict(self.inputs))


TARGET = RejectionRandom()
