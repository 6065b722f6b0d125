"""What a caller of ``copy_and_expand_eagle_inputs_kernel`` relies on (docs/CONTRACT.md §1): the properties ``eaglefuzz audit``
checks on one implementation's outputs (:mod:`...checking.audit`)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Observation, Property


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


PROPERTIES: tuple[Property, ...] = (
        Property("new_token_index_written", "every new-token index r*P + k (k < P) is written", ce_new_token_written),
        Property("new_token_index_in_own_range", "every new-token index points into its own request's output range",
                 ce_new_token_in_own_range),
        Property("hidden_map_injective_in_request", "in shift mode the hidden-state map is written for every input "
                 "token, injective, and stays inside the token's request", ce_hidden_map),
        Property("output_ranges_tile", "the requests' output ranges (qlen + P - s slots each) tile "
                 "[0, T + R*(P - s)) without gap or overlap, every slot written", ce_ranges_tile),
        Property("nothing_past_last_request", "nothing is written past the last request's range, nor outside "
                 "any buffer", ce_nothing_past_last),
    )
"""The properties, in the order the audit reports them."""
