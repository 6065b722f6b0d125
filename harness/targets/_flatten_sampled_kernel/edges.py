"""The extended tier of ``_flatten_sampled_kernel``: docs/CONTRACT.md §24.4.

Sampled counts of 0 or less (nothing written), more than the row's logits (as long as the rows
do not overlap and stay inside the output and their row of ``sampled``), and any int64 data.
The oracles compute §24.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I32, I64, need, need_int, row_subsets
from .layout import build

FEATURES = {
    "nothing_sampled": "a row with num_sampled <= 0 (nothing written for it)",
    "sampled_past_logits": "a row with more sampled tokens than logits (its writes run into the room after it)",
    "any_ids": "ids outside any vocabulary (negative, past 2**31): copied as they are",
}


def validate(case: Case) -> None:
    """Rows whose writes stay inside the output and their row of ``sampled``, one program per
    element."""
    a = case.arrays
    B = need_int(case.scalars, "num_reqs", 1)
    sampled = need(a, "sampled", I64, ndim=2)
    if sampled.shape[0] != B:
        raise ContractViolation("arrays.sampled", "must have num_reqs rows")
    ns = need(a, "num_sampled", I32, (B,)).astype(np.int64)
    cu = need(a, "cu_num_logits", I32, (B + 1,)).astype(np.int64)
    if cu[0] != 0 or np.any(np.diff(cu) < 0):
        raise ContractViolation("arrays.cu_num_logits", "must start at 0 and never decrease")
    n = np.maximum(ns, 0)
    if np.any(n > sampled.shape[1]):
        raise ContractViolation("arrays.num_sampled", "must stay within the row of sampled")
    limit = max(int(cu[-1]), 0)
    for b in range(B - 1, -1, -1):  # each row's writes end before the next writing row's start
        if n[b] and cu[b] + n[b] > limit:
            raise ContractViolation("arrays.num_sampled", "a row's writes must not reach another row's or pass the output")
        if n[b]:
            limit = int(cu[b])


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    ns = a["num_sampled"].astype(np.int64)
    nl = np.diff(a["cu_num_logits"].astype(np.int64))
    s = a["sampled"]
    checks = {"nothing_sampled": bool(np.any(ns <= 0)), "sampled_past_logits": bool(np.any(ns > nl)),
              "any_ids": bool(np.any((s < -1) | (s > 1 << 31)))}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 12 rows, sampled counts from -3 to past the row's logits (into the room of a next
    row that writes nothing), any ids."""
    B = c.integer(1, 12)
    K = c.integer(1, 8)
    logits = [int(x) for x in c.array(np.int64, B, 0, K + 1)]
    ns = [c.integer(-3, K + 1) for _ in range(B)]
    cu = np.concatenate([[0], np.cumsum(logits)])
    limit = int(cu[-1])
    for b in range(B - 1, -1, -1):  # cut each count to the room before the next writing row
        ns[b] = min(ns[b], limit - int(cu[b]))
        if ns[b] > 0:
            limit = int(cu[b])
    sampled = c.array_of(np.int64, B * (K + 1), [(-1, 99), (-(2**63), 2**63 - 1)]).reshape(B, K + 1)
    return build(sampled, ns, logits)


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Fewer rows (each alone, each half, each left out)."""
    a = case.arrays
    nl = np.diff(a["cu_num_logits"].astype(np.int64))
    for keep in row_subsets(len(nl)):
        yield build(a["sampled"][keep], a["num_sampled"][keep], nl[keep])
