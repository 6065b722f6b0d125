"""The extended tier of ``update_num_computed_tokens_for_batch_change``: docs/CONTRACT.md §8.4,
and the hazard draws past it.

Extended tier: inputs vLLM's runner does not make where every row read is inside its buffer
(§8.1 defines them): two requests sharing a previous row, negative ``prev_positions`` other
than ``-1``, valid counts unrelated to the drafts (0 for a request with drafts, more than
``d + 1``), token counts up to the int32 limit and negative CPU counts.

Hazard draws (``eaglefuzz audit`` only; the oracles do not model them): a previous row at or
past ``len(valid_sampled_token_count)`` (a stale async row, PR #47199), and an empty
``valid_sampled_token_count``. vLLM 0.33.0 clamps the row only at 0 and gathers it: an
out-of-range read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, Scale
from ...targetkit.base import ContractViolation, require_arrays
from .layout import ARRAYS, MAX_COUNT, MAX_DRAFTS, MODES, NEAR_LIMIT, Rows, build

FEATURES = {
    "none_valid": "a request with drafts and valid count 0",
    "valid_past_drafts": "a previous row with d drafts and more than d + 1 valid tokens",
    "other_negative_prev": "a new request marked by a negative prev_position other than -1",
    "shared_previous_row": "two requests with the same previous row",
    "near_int32_limit": "a corrected count within 2**16 of the int32 limit",
    "negative_cpu_count": "a CPU count below 0 (taken as it is)",
    "count_past_2_30": "a token count past 2**30",
}

HAZARDS = {
    "stale_previous_rows": "a previous row at or past len(valid_sampled_token_count) (a stale async row, "
                           "PR #47199): the gather of valid_sampled_token_count reads out of range",
    "empty_previous_batch": "valid_sampled_token_count is empty: even row 0 (read for new requests) is out of range",
}
"""Hazard draws past the extended tier, by class (the audit's ``beyond`` tier)."""


def features_of(case: Case) -> frozenset[str]:
    t = Rows(case)
    a = case.arrays
    part = t.participating
    nonneg = t.prev[t.prev >= 0]
    P = t.P
    d = a["prev_num_draft_tokens"].astype(np.int64)[:P]
    v = a["valid_sampled_token_count"].astype(np.int64)
    counts = np.concatenate([a["num_computed_tokens"].astype(np.int64), a["cpu_num_computed_tokens"].astype(np.int64)])
    checks = {
        "none_valid": np.any(part & (t.valid == 0)),
        "valid_past_drafts": np.any((d > 0) & (v > d + 1)),
        "other_negative_prev": np.any(t.prev < -1),
        "shared_previous_row": len(np.unique(nonneg)) < len(nonneg),
        "near_int32_limit": np.any(part & (t.corrected > INT32_MAX - NEAR_LIMIT)),
        "negative_cpu_count": np.any(a["cpu_num_computed_tokens"] < 0),
        "count_past_2_30": np.any(counts > MAX_COUNT) or np.any(part & (t.corrected > MAX_COUNT)),
    }
    return frozenset(k for k, ok in checks.items() if ok)


def _body(c: Chooser, scale: Scale) -> Case:
    mode = c.choice(MODES)
    low = 2 if mode == "compiled" else 1
    n = c.integer(low, max(low, min(12, scale.max_requests)))
    how = c.choice(["same", "smaller", "larger"])
    P = n if how == "same" else c.integer(low, max(low, n)) if how == "smaller" else n + c.integer(1, 8)
    case = build(
        n, P, mode,
        extra=c.integer_of([(0, 0), (1, 16)]),
        order=c.choice(["identity", "shuffled", "shared"]),
        new_share=c.choice([0.0, 0.2, 0.5]),
        values=c.choice(["small", "large", "near_limit"]),
        seed=c.integer(0, (1 << 32) - 1),
        K=c.integer(1, 8),
        valid_mode="any",
    )  # fmt: skip
    if c.chance(0.3):  # more valid tokens than drafts + 1
        a = case.arrays["valid_sampled_token_count"].copy()
        a[c.integer(0, len(a) - 1)] = c.integer(2, 40)
        case = case.replace(arrays={"valid_sampled_token_count": a})
    return case


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return _body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(_body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Counts made small (the rows kept)."""
    a = case.arrays
    for name in ("num_computed_tokens", "cpu_num_computed_tokens"):
        small = np.clip(a[name], 0, 100).astype(np.int32)
        if not np.array_equal(small, a[name]):
            yield case.replace(arrays={name: small})


# -- hazard draws (the audit's beyond tier) -----------------------------------------------


def validate_hazard(case: Case) -> None:
    """The hazard draws' rules: the arrays and lengths of §8 with ``P >= 0`` previous rows;
    every previous row is below the length of ``num_computed_tokens`` and
    ``prev_num_draft_tokens`` (vLLM's persistent ``max_num_reqs`` buffers) but may be at or
    past ``P``; eager runs only (the hazard is the gather, not the compile)."""
    a = case.arrays
    require_arrays(a, ARRAYS)
    if case.launch.get("mode") != "eager":
        raise ContractViolation("launch.mode", "hazard draws run eagerly")
    n, Mx = len(a["prev_positions"]), len(a["num_computed_tokens"])
    if n < 1:
        raise ContractViolation("arrays.prev_positions", "needs a request")
    for name in ("num_accepted_tokens", "cpu_num_computed_tokens"):
        if len(a[name]) != n:
            raise ContractViolation(f"arrays.{name}", "needs one entry per request")
    if Mx < n or len(a["prev_num_draft_tokens"]) != Mx:
        raise ContractViolation("arrays.num_computed_tokens", "num_computed_tokens and prev_num_draft_tokens need the same length, >= n")
    prev = a["prev_positions"]
    if np.any(prev < -1) or np.any(prev >= Mx):
        raise ContractViolation("arrays.prev_positions", "must be -1 or a row of num_computed_tokens")
    for name in ("num_computed_tokens", "cpu_num_computed_tokens", "valid_sampled_token_count"):
        if np.any(a[name] < 0) or np.any(a[name] > MAX_COUNT):
            raise ContractViolation(f"arrays.{name}", f"counts must be from 0 to {MAX_COUNT}")
    d = a["prev_num_draft_tokens"]
    if np.any(d < 0) or np.any(d > MAX_DRAFTS):
        raise ContractViolation("arrays.prev_num_draft_tokens", f"must be from 0 to {MAX_DRAFTS}")


def hazards_of(case: Case) -> frozenset[str]:
    a = case.arrays
    P, prev = len(a["valid_sampled_token_count"]), a["prev_positions"]
    checks = {"stale_previous_rows": P > 0 and bool(np.any(prev >= P)), "empty_previous_batch": P == 0}
    return frozenset(k for k, ok in checks.items() if ok)


def _hazard_body(c: Chooser, scale: Scale) -> Case:
    n = c.integer(1, max(1, min(8, scale.max_requests)))
    P = 0 if c.chance(0.2) else c.integer(1, n)
    case = build(n, max(P, 1), "eager", extra=c.integer(1, 8), order=c.choice(["identity", "shuffled"]),
                 new_share=c.choice([0.0, 0.2]), values="small", seed=c.integer(0, (1 << 32) - 1), K=c.integer(1, 4))
    a = {k: v.copy() for k, v in case.arrays.items()}
    Mx = len(a["num_computed_tokens"])
    a["valid_sampled_token_count"] = a["valid_sampled_token_count"][:P]
    stale = c.integer(0, n - 1)  # the stale row: the request keeps a row of a larger batch
    a["prev_positions"][stale] = c.integer(P, Mx - 1) if Mx > P else Mx - 1
    return case.replace(arrays=a)


def hazard_case(rng: np.random.Generator, scale: Scale) -> Case:
    return _hazard_body(RngChooser(rng), scale)


def hazard_strategy(scale: Scale) -> Any:
    return as_strategy(_hazard_body, scale)


def hazard_shrink_candidates(case: Case) -> Iterator[Case]:
    """Drop requests (keeping the stale ones), shorten the buffers to the rows read, make the
    previous batch and the counts small."""
    a = case.arrays
    n, P = len(a["prev_positions"]), len(a["valid_sampled_token_count"])
    per_request = ("num_accepted_tokens", "prev_positions", "cpu_num_computed_tokens")
    for r in range(n):
        if n > 1:
            rows = [i for i in range(n) if i != r]
            yield case.replace(arrays={k: a[k][rows] for k in per_request})
    if P > 1:
        yield case.replace(arrays={"valid_sampled_token_count": a["valid_sampled_token_count"][: P - 1]})
    need = max(n, int(a["prev_positions"].max(initial=0)) + 1)
    if len(a["num_computed_tokens"]) > need:
        yield case.replace(arrays={"num_computed_tokens": a["num_computed_tokens"][:need],
                                   "prev_num_draft_tokens": a["prev_num_draft_tokens"][:need]})
    prev = a["prev_positions"]
    if np.any(prev >= P):
        lower = prev.copy()
        lower[prev >= P] = np.maximum(P, 0)
        if not np.array_equal(lower, prev):
            yield case.replace(arrays={"prev_positions": lower})
    for name in ("num_computed_tokens", "cpu_num_computed_tokens", "valid_sampled_token_count", "num_accepted_tokens"):
        zero = np.minimum(a[name], 1 if name in ("num_accepted_tokens", "valid_sampled_token_count") else 0).astype(np.int32)
        if not np.array_equal(zero, a[name]):
            yield case.replace(arrays={name: zero})
