"""The extended tier of ``_post_update_kernel``: docs/CONTRACT.md §19.4.

A rejected count past the query (a negative delta), a zero delta with sampled tokens, and
sampled counts of 0 or less (nothing sampled, the delta still applied), with any counts (the
sums wrap in int32). The oracles compute §19.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, INT32_MIN, Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I32, I64, check_batch, need, row_subsets, state_rows
from .layout import State, build

FEATURES = {
    "negative_delta": "a row that rejected more tokens than its query (its count moves back)",
    "zero_delta_sampled": "a row that sampled tokens with a zero delta (its count unchanged)",
    "negative_sampled": "a row with num_sampled < 0 (nothing sampled, its delta applied)",
}


def shapes(case: Case) -> tuple[int, int, int]:
    """``(R, W, K + 1)`` after checking the arrays' shapes and the batch (state rows distinct,
    ``-1`` allowed)."""
    a = case.arrays
    counts = need(a, "num_computed_tokens", I32, ndim=1)
    R = counts.shape[0]
    batch = check_batch(case, R, masked=True, qsl="query_start_loc" in a, min_qlen=0)
    need(a, "total_len", I32, (R,))
    W = need(a, "all_token_ids", I32, ndim=2).shape[1]
    if a["all_token_ids"].shape[0] != R:
        raise ContractViolation("arrays.all_token_ids", "must have max_num_reqs rows")
    S = need(a, "sampled_tokens", I64, ndim=2)
    if S.shape[0] != batch.B:
        raise ContractViolation("arrays.sampled_tokens", "must have a row per batch row")
    need(a, "num_sampled", I32, (batch.B,))
    need(a, "num_rejected", I32, (batch.B,))
    D = case.scalars.get("num_draft_tokens")
    if "draft_tokens" in a:
        dt = need(a, "draft_tokens", I64, ndim=2)
        if dt.shape[0] != batch.B or D != dt.shape[1] or not 1 <= D <= 32:
            raise ContractViolation("arrays.draft_tokens", "must be [B, num_draft_tokens], 1 <= num_draft_tokens <= 32")
    elif D != 0:
        raise ContractViolation("scalars.num_draft_tokens", "must be 0 without draft_tokens")
    if "output_bin_counts" in a:
        if need(a, "output_bin_counts", I32, ndim=2).shape[0] != R:
            raise ContractViolation("arrays.output_bin_counts", "must have max_num_reqs rows")
    return R, W, S.shape[1]


def sampled_ids(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """The real rows' state rows and their sampled ids, one per sampled token."""
    a = case.arrays
    s = a["idx_mapping"]
    ns = np.maximum(a["num_sampled"].astype(np.int64), 0)
    real = np.flatnonzero(s >= 0)
    owner = np.repeat(real, ns[real])
    col = np.concatenate([np.arange(ns[b]) for b in real]) if len(real) else np.zeros(0, np.int64)
    return s[owner], a["sampled_tokens"][owner, col.astype(np.int64)]


def validate(case: Case) -> None:
    """Every access inside its buffer: sampled counts within the rows of ``sampled_tokens``,
    histories with room for them, ids inside the penalties' rows; any int32 counts."""
    a = case.arrays
    R, W, S = shapes(case)
    s = a["idx_mapping"]
    real = s >= 0
    ns = a["num_sampled"].astype(np.int64)[real]
    t = a["total_len"].astype(np.int64)[s[real]]
    if np.any(ns > S) or np.any(t < 0) or np.any(t + np.maximum(ns, 0) > W):
        raise ContractViolation("arrays.num_sampled", "a row's sampled tokens must fit its sampled row and its history")
    _, ids = sampled_ids(case)
    V = a["output_bin_counts"].shape[1] if "output_bin_counts" in a else 1 << 62
    if np.any((ids < 0) | (ids >= V)):
        raise ContractViolation("arrays.sampled_tokens", "a sampled id must index the penalties' row")


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    real = a["idx_mapping"] >= 0
    ns = a["num_sampled"].astype(np.int64)[real]
    nr = a["num_rejected"].astype(np.int64)[real]
    qlen = np.diff(a["query_start_loc"].astype(np.int64))[real] if "query_start_loc" in a else np.zeros_like(ns)
    checks = {"negative_delta": bool(np.any(qlen - nr < 0)) and "query_start_loc" in a,
              "zero_delta_sampled": bool(np.any((qlen == nr) & (ns > 0))),
              "negative_sampled": bool(np.any(ns < 0))}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 8 rows, any sampled and rejected counts that fit, any counts, a small vocabulary."""
    B = c.integer(1, 8)
    R = B + c.integer(0, 3)
    rows = state_rows(c, B, R)
    K, W, V = c.integer(1, 4), 16, 8
    ns = c.array(np.int64, B, -2, K + 1)
    qlens = c.array(np.int64, B, 0, 6)
    nr = c.array_of(np.int64, B, [(0, 8), (INT32_MIN, INT32_MAX)])
    t = np.asarray(c.array(np.int64, R, 0, W - K - 1))
    sampled = c.array(np.int64, B * (K + 1), 0, V - 1).reshape(B, K + 1)
    history = c.array(np.int64, R * W, 0, V - 1).reshape(R, W)
    bins = c.array(np.int64, R * V, 0, 3).reshape(R, V)
    counts = c.array_of(np.int64, R, [(0, 100), (INT32_MIN, INT32_MAX)])
    return build(rows, qlens, sampled, ns, nr, State(counts, t, history, bins))


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Fewer rows (each alone, each half, each left out)."""
    from ...targetkit.runner_v2 import drop_rows

    per_row = {"idx_mapping": 0, "sampled_tokens": 0, "num_sampled": 0, "num_rejected": 0}
    for keep in row_subsets(int(case.scalars["num_reqs"])):
        yield drop_rows(case, keep, per_row)
