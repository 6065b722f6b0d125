"""What a caller of ``copy_and_expand_eagle_inputs_kernel`` relies on (docs/CONTRACT.md §1): the properties ``eaglefuzz audit``
checks on one implementation's outputs (:mod:`...checking.audit`), and its hazard draws: a
caller's output buffer shorter than the kernel writes (``launch.caller_buffer_len``; the
kernel's stores have no bound on ``out_idx``, raised in review of PR #32887)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from hypothesis import strategies as st

from ...core.case import Case
from ...targetkit.base import ContractViolation
from ...targetkit.properties import Audit, HazardDraws, Observation, Property


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
    if "caller_buffer_len" in case.launch:
        return None  # a caller's short buffer: stores_within_caller_buffer's subject
    _, _, end = _ranges(case)
    for name in SLOTS:
        past = np.flatnonzero(o.written[name][max(end, 0):])
        if past.size:
            return f"{name}[{end + int(past[0])}] is written, past the last request's range (which ends at {end})"
    for name, stray in o.stray.items():
        if stray:
            return f"{name}: a write lands outside the buffer (a guard band)"
    return None


def ce_within_caller_buffer(case: Case, o: Observation) -> str | None:
    L = case.launch.get("caller_buffer_len")
    for name in SLOTS:
        if o.stray.get(name):
            where = f"past the caller's {L}-entry buffer" if L is not None else "outside the buffer"
            return f"{name}: a store lands {where} (no bound on out_idx)"
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
        Property("stores_within_caller_buffer", "every store index out_idx is below the caller's buffer length "
                 "(max_num_tokens)", ce_within_caller_buffer,
                 hazard_class="output_buffer_unbounded", source="review of PR #32887",
                 rests_on="docs/CONTRACT.md §1.2: the scheduler charges every request num_new_tokens + P - s slots "
                          "against max_num_batched_tokens, the buffers' length (vLLM: "
                          "vllm/v1/core/sched/scheduler.py, Scheduler.schedule)"),
    )
"""The properties, in the order the audit reports them."""


# -- hazard draws (the audit's beyond tier) ----------------------------------------------


def _needed(case: Case) -> int:
    return max(_ranges(case)[2], 0)


def output_specs(case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """The target's output buffers, the four slot buffers cut to ``launch.caller_buffer_len``
    when the case gives one (the caller's buffer, shorter than the kernel writes)."""
    from .record import TARGET

    L = case.launch.get("caller_buffer_len")
    specs = TARGET.output_specs(case.replace(launch={k: v for k, v in case.launch.items() if k != "caller_buffer_len"}))
    if L is not None:
        specs |= {n: (specs[n][0], (int(L),)) for n in SLOTS}
    return specs


def validate_hazard(case: Case) -> None:
    """A case of the production or extended tier with a caller buffer from 1 to one short of
    what its requests write (the overrun stays within the guard bands)."""
    from .record import TARGET

    L = case.launch.get("caller_buffer_len")
    if not isinstance(L, int) or isinstance(L, bool):
        raise ContractViolation("launch.caller_buffer_len", "hazard draws give the caller's buffer length")
    base = case.replace(launch={k: v for k, v in case.launch.items() if k != "caller_buffer_len"})
    TARGET.tier_of(base, "extended")
    need = _needed(base)
    if not max(1, need - 64) <= L < need:
        raise ContractViolation("launch.caller_buffer_len", f"must be from max(1, {need} - 64) to {need - 1}")


def hazards_of(case: Case) -> frozenset[str]:
    return frozenset({"output_buffer_unbounded"} if "caller_buffer_len" in case.launch else ())


def _shorten(case: Case, k: int) -> Case:
    need = _needed(case)
    if need < 2:
        return case
    return case.replace(launch={**case.launch, "caller_buffer_len": need - 1 - k % min(need - 1, 8)})


def hazard_strategy(scale: Any) -> Any:
    """Production cases whose caller buffer is 1 to 8 entries short of what they write."""
    from .record import TARGET

    return st.tuples(TARGET.strategy(scale), st.integers(0, 7)).map(lambda ck: _shorten(*ck))


def hazard_shrink_candidates(case: Case) -> Iterator[Case]:
    """The target's moves on the case without its caller buffer, the buffer cut again."""
    from .record import TARGET

    L = case.launch["caller_buffer_len"]
    base = case.replace(launch={k: v for k, v in case.launch.items() if k != "caller_buffer_len"})
    over = _needed(base) - L
    for smaller in TARGET.shrink_candidates(base):
        need = _needed(smaller)
        if need >= 2:
            yield smaller.replace(launch={**smaller.launch, "caller_buffer_len": max(1, need - over)})


AUDIT = Audit(
    PROPERTIES, output_specs=output_specs,
    hazards=HazardDraws(
        strategy=hazard_strategy,
        validate=validate_hazard,
        hazards_of=hazards_of,
        shrink_candidates=hazard_shrink_candidates,
    ),
)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
