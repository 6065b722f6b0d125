"""What a caller relies on, per target: properties checked on one implementation's outputs.

Each property is a small function of the case and what the implementation did
(:class:`Observation`) that returns ``None`` when the property holds, or one line saying where
it fails. None of them needs a second implementation: they are the guarantees vLLM's code
around each call takes for granted (an index it will gather with, a range it will slice). The
search that looks for inputs breaking them, over both domain tiers, is :mod:`.audit`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.case import Case


@dataclass
class Observation:
    """One run of an implementation on a case.

    Kernels: ``out`` holds each output buffer as the kernel left it, ``written`` which of its
    elements the kernel wrote (told apart by two runs over different fills), ``stray`` whether
    it wrote into a guard band around the buffer. Functions: ``result`` is what it returned.
    ``error``: the run raised (the properties are then not checked).
    """

    out: dict[str, np.ndarray] = field(default_factory=dict)
    written: dict[str, np.ndarray] = field(default_factory=dict)
    stray: dict[str, bool] = field(default_factory=dict)
    result: Any = None
    error: str | None = None


Check = Callable[[Case, Observation], "str | None"]


@dataclass(frozen=True)
class Property:
    """A guarantee a caller relies on: ``name``, what it ``says``, and its ``check``."""

    name: str
    says: str
    check: Check


def _ranges(case: Case) -> tuple[np.ndarray, np.ndarray, int]:
    """§1: request r's output range ``[lo_r, hi_r)`` as vLLM's caller computes it (each
    request gets ``qlen + P - s`` slots, in order), and its end ``T + R*(P - s)``."""
    qsl = case.arrays["query_start_loc"].astype(np.int64)
    P, s = int(case.scalars["num_padding_slots_per_request"]), int(bool(case.scalars["shift_input_ids"]))
    r = np.arange(len(qsl) - 1, dtype=np.int64)
    lo = qsl[:-1] + r * (P - s)
    hi = qsl[1:] + (r + 1) * (P - s)
    return lo, hi, int(qsl[-1] + (len(qsl) - 1) * (P - s))


def _owner(lo: np.ndarray, hi: np.ndarray, v: int) -> int | None:
    hit = np.flatnonzero((lo <= v) & (v < hi))
    return int(hit[0]) if hit.size else None


# -- §1 copy_and_expand_eagle_inputs_kernel ---------------------------------------------


def ce_new_token_written(case: Case, o: Observation) -> str | None:
    P = int(case.scalars["num_padding_slots_per_request"])
    w = o.written["out_new_token_indices"]
    for k in np.flatnonzero(~w).tolist():
        return f"out_new_token_indices[{k}] (request {k // P}, k = {k % P}) is never written"
    return None


def ce_new_token_in_own_range(case: Case, o: Observation) -> str | None:
    P = int(case.scalars["num_padding_slots_per_request"])
    lo, hi, _ = _ranges(case)
    idx, w = o.out["out_new_token_indices"], o.written["out_new_token_indices"]
    for k in np.flatnonzero(w).tolist():
        r, v = k // P, int(idx[k])
        if not lo[r] <= v < hi[r]:
            return (f"out_new_token_indices[{k}] (request {r}) = {v}, outside its output range "
                    f"[{lo[r]}, {hi[r]})" + (f": request {_owner(lo, hi, v)}'s" if _owner(lo, hi, v) is not None else ""))
    return None


def ce_hidden_map(case: Case, o: Observation) -> str | None:
    if not case.scalars["shift_input_ids"]:
        return None
    qsl = case.arrays["query_start_loc"].astype(np.int64)
    lo, hi, _ = _ranges(case)
    m, w = o.out["out_hidden_state_mapping"], o.written["out_hidden_state_mapping"]
    seen: dict[int, int] = {}
    for r in range(len(qsl) - 1):
        for i in range(int(qsl[r]), int(qsl[r + 1])):
            if not w[i]:
                return f"out_hidden_state_mapping[{i}] (request {r}) is never written"
            v = int(m[i])
            if not lo[r] <= v < hi[r]:
                return f"out_hidden_state_mapping[{i}] (request {r}) = {v}, outside its output range [{lo[r]}, {hi[r]})"
            if v in seen:
                return f"out_hidden_state_mapping[{seen[v]}] and [{i}] both map to slot {v}: not injective"
            seen[v] = i
    return None


SLOTS = ("out_input_ids", "out_positions", "out_is_rejected_token_mask", "out_is_masked_token_mask")


def ce_ranges_tile(case: Case, o: Observation) -> str | None:
    lo, hi, end = _ranges(case)
    for r in np.flatnonzero(hi < lo).tolist():
        return (f"request {r} gets {int(hi[r] - lo[r])} slots (qlen + P - s < 0): its range and the next "
                f"request's overlap")
    for name in SLOTS:
        gap = np.flatnonzero(~o.written[name][: max(end, 0)])
        if gap.size:
            i = int(gap[0])
            return f"{name}[{i}] (request {_owner(lo, hi, i)}) is never written: a gap in the output"
    return None


def ce_nothing_past_last(case: Case, o: Observation) -> str | None:
    _, _, end = _ranges(case)
    for name in SLOTS:
        past = np.flatnonzero(o.written[name][max(end, 0):])
        if past.size:
            return f"{name}[{end + int(past[0])}] is written, past the last request's range (which ends at {end})"
    for name, stray in o.stray.items():
        if stray:
            return f"{name}: a write lands outside the buffer (a guard band)"
    return None


# -- §2 eagle_prepare_inputs_padded_kernel -----------------------------------------------


def _pi(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    R = int(case.scalars["num_reqs"])
    qsl = case.arrays["query_start_loc"].astype(np.int64)
    cu = case.arrays["cu_num_draft_tokens"].astype(np.int64)
    d = np.diff(np.concatenate([[0], cu]))
    return qsl[:R], qsl[1 : R + 1], d, R


def pi_index_in_request(case: Case, o: Observation) -> str | None:
    qs, nqs, _, R = _pi(case)
    idx, w = o.out["token_indices_to_sample"], o.written["token_indices_to_sample"]
    for r in range(R):
        if not w[r]:
            return f"token_indices_to_sample[{r}] is never written"
        if not qs[r] <= idx[r] <= nqs[r] - 1:
            return f"token_indices_to_sample[{r}] = {int(idx[r])}, outside request {r}'s tokens [{qs[r]}, {nqs[r]})"
    return None


def pi_rejected_within_drafts(case: Case, o: Observation) -> str | None:
    _, _, d, R = _pi(case)
    rej = o.out["num_rejected_tokens"]
    for r in range(R):
        if not 0 <= rej[r] <= max(d[r], 0):
            return f"num_rejected_tokens[{r}] = {int(rej[r])}, outside [0, d = {max(int(d[r]), 0)}]"
    return None


def pi_index_matches_rejected(case: Case, o: Observation) -> str | None:
    _, nqs, _, R = _pi(case)
    idx, rej = o.out["token_indices_to_sample"].astype(np.int64), o.out["num_rejected_tokens"].astype(np.int64)
    for r in range(R):
        if idx[r] != nqs[r] - 1 - rej[r]:
            return f"request {r}: token_indices_to_sample = {idx[r]} but the last token minus the rejected = {nqs[r] - 1 - rej[r]}"
    return None


def nothing_past_num_reqs(case: Case, o: Observation) -> str | None:
    for name, stray in o.stray.items():
        if stray:
            return f"{name}: a write lands outside the buffer (past num_reqs or before it)"
    return None


# -- §3 eagle_prepare_next_token_padded_kernel ------------------------------------------


def _nt(case: Case) -> tuple[int, int, int, np.ndarray]:
    s = case.scalars
    R = int(s["num_reqs"])
    return R, int(s["num_sampled_tokens_per_req"]), int(s["vocab_size"]), case.arrays["discard_request_mask"][:R]


def nt_count_within_columns(case: Case, o: Observation) -> str | None:
    R, S, _, _ = _nt(case)
    c = o.out["valid_sampled_tokens_count"]
    for r in range(R):
        if not 0 <= c[r] <= S:
            return f"valid_sampled_tokens_count[{r}] = {int(c[r])}, outside [0, S = {S}]"
    return None


def nt_kept_has_valid(case: Case, o: Observation) -> str | None:
    R, _, _, disc = _nt(case)
    c = o.out["valid_sampled_tokens_count"]
    for r in range(R):
        if not disc[r] and c[r] < 1:
            return (f"request {r} is kept but valid_sampled_tokens_count = {int(c[r])}: with drafts, "
                    "prepare_inputs_padded then treats it as discarded (rejected = d + 1)")
    return None


def nt_next_in_vocab(case: Case, o: Observation) -> str | None:
    R, _, vocab, disc = _nt(case)
    nxt, c = o.out["next_token_ids"], o.out["valid_sampled_tokens_count"]
    for r in range(R):
        if not disc[r] and c[r] >= 1 and not 0 <= nxt[r] < vocab:
            return f"next_token_ids[{r}] = {int(nxt[r])}, a sampled id outside [0, vocab_size = {vocab})"
    return None


def nt_discarded_uses_backup(case: Case, o: Observation) -> str | None:
    R, _, _, disc = _nt(case)
    nxt, c = o.out["next_token_ids"], o.out["valid_sampled_tokens_count"]
    backup = case.arrays["backup_next_token_ids"]
    for r in range(R):
        if disc[r] and (c[r] != 0 or nxt[r] != backup[r]):
            return f"request {r} is discarded but gets count {int(c[r])} and next {int(nxt[r])} (backup {int(backup[r])})"
    return None


# -- §4 extend_all_queries_by_N -----------------------------------------------------------


def _np(t: Any) -> np.ndarray:
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


def eq_copies_agree(case: Case, o: Observation) -> str | None:
    dev, cpu = _np(o.result.query_start_loc), _np(o.result.query_start_loc_cpu)
    if dev.dtype != cpu.dtype:
        return f"query_start_loc is {dev.dtype} on the device but {cpu.dtype} on the CPU"
    diff = np.flatnonzero(dev != cpu) if dev.shape == cpu.shape else np.array([0])
    if diff.size:
        i = int(diff[0])
        return f"query_start_loc[{i}] = {dev[i]} on the device, {cpu[i]} on the CPU"
    return None


def eq_non_decreasing(case: Case, o: Observation) -> str | None:
    for name in ("query_start_loc", "query_start_loc_cpu"):
        q = _np(getattr(o.result, name)).astype(np.int64)
        drop = np.flatnonzero(np.diff(q) < 0)
        if drop.size:
            i = int(drop[0])
            return f"{name} decreases after extension: [{i}] = {q[i]}, [{i + 1}] = {q[i + 1]}"
    return None


def eq_tokens_match(case: Case, o: Observation) -> str | None:
    before = int(case.scalars["num_actual_tokens"]) - int(case.arrays["query_start_loc"][-1])
    after = int(o.result.num_actual_tokens) - int(_np(o.result.query_start_loc)[-1])
    if before != after:
        return (f"num_actual_tokens - query_start_loc[-1] was {before}, is {after}: the token count no "
                "longer matches the query starts")
    return None


def eq_computed_tokens_unchanged(case: Case, o: Observation) -> str | None:
    q0 = np.diff(case.arrays["query_start_loc"].astype(np.int64))
    s0 = case.arrays["seq_lens"].astype(np.int64)
    q1 = np.diff(_np(o.result.query_start_loc).astype(np.int64))
    s1 = _np(o.result.seq_lens).astype(np.int64)
    moved = np.flatnonzero((s1 - q1) != (s0 - q0))
    if moved.size:
        r = int(moved[0])
        return (f"request {r}: seq_lens - query length was {s0[r] - q0[r]} (the tokens already computed), "
                f"is {s1[r] - q1[r]} after extension")
    return None


# -- §5 create_vllm_config_for_draft_model ----------------------------------------------


def dc_model_config_set(case: Case, o: Observation) -> str | None:
    if o.result is not None and o.result.model_config is None:
        return "the drafter's config has model_config = None: get_model() has no model to load"
    return None


PROPERTIES: Mapping[str, tuple[Property, ...]] = {
    "copy_and_expand_eagle_inputs_kernel": (
        Property("new_token_index_written", "every new-token index r*P + k (k < P) is written", ce_new_token_written),
        Property("new_token_index_in_own_range", "every new-token index points into its own request's output range",
                 ce_new_token_in_own_range),
        Property("hidden_map_injective_in_request", "in shift mode the hidden-state map is written for every input "
                 "token, injective, and stays inside the token's request", ce_hidden_map),
        Property("output_ranges_tile", "the requests' output ranges (qlen + P - s slots each) tile "
                 "[0, T + R*(P - s)) without gap or overlap, every slot written", ce_ranges_tile),
        Property("nothing_past_last_request", "nothing is written past the last request's range, nor outside "
                 "any buffer", ce_nothing_past_last),
    ),
    "eagle_prepare_inputs_padded_kernel": (
        Property("index_to_sample_in_request", "the index to sample lies inside its request's tokens", pi_index_in_request),
        Property("rejected_within_drafts", "0 <= num_rejected_tokens <= the request's drafts", pi_rejected_within_drafts),
        Property("index_matches_rejected", "index to sample = the request's last token - num_rejected_tokens",
                 pi_index_matches_rejected),
        Property("nothing_past_num_reqs", "nothing is written outside the num_reqs entries", nothing_past_num_reqs),
    ),
    "eagle_prepare_next_token_padded_kernel": (
        Property("count_within_columns", "0 <= valid_sampled_tokens_count <= S", nt_count_within_columns),
        Property("kept_request_has_valid_token", "a kept request gets valid_sampled_tokens_count >= 1 "
                 "(prepare_inputs_padded relies on it for a request with drafts)", nt_kept_has_valid),
        Property("next_token_in_vocab", "a kept request's sampled next token is a vocabulary id in [0, vocab_size)",
                 nt_next_in_vocab),
        Property("discarded_uses_backup", "a discarded request gets count 0 and its backup token",
                 nt_discarded_uses_backup),
        Property("nothing_past_num_reqs", "nothing is written outside the num_reqs entries", nothing_past_num_reqs),
    ),
    "extend_all_queries_by_N": (
        Property("query_start_loc_copies_agree", "the device and CPU copies of query_start_loc hold the same "
                 "numbers in the same dtype", eq_copies_agree),
        Property("query_start_loc_non_decreasing", "both copies of query_start_loc still never decrease",
                 eq_non_decreasing),
        Property("tokens_match_query_start_loc", "num_actual_tokens moves with query_start_loc[-1]", eq_tokens_match),
        Property("computed_tokens_unchanged", "seq_lens - query length (the tokens already computed) is the "
                 "same before and after", eq_computed_tokens_unchanged),
    ),
    "create_vllm_config_for_draft_model": (
        Property("draft_model_config_set", "the drafter's config names a model (model_config is not None)",
                 dc_model_config_set),
    ),
}
"""Target -> the properties the audit checks."""
