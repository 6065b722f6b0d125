"""The extended tier of ``_post_update_num_computed_tokens_kernel``: docs/CONTRACT.md §20.4.

Counts near the int32 limit, where ``count + query length`` wraps (int32, as the kernel holds
it), and rows of no tokens (the count is stored unchanged). The oracles compute §20.1 on them
unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, Scale
from ...targetkit.runner_v2 import I32, check_batch, need, row_subsets, state_rows
from .layout import build

FEATURES = {
    "wraps": "a count plus its query length past 2**31 - 1 (the int32 sum wraps)",
    "empty_row": "a row of no tokens (its count stored unchanged)",
}


def validate(case: Case) -> None:
    """Distinct state rows, ``query_start_loc`` from 0 and never decreasing, any int32 counts."""
    counts = case.arrays.get("num_computed_tokens")
    R = counts.shape[0] if counts is not None and counts.ndim == 1 else 0
    check_batch(case, R, min_qlen=0)
    need(case.arrays, "num_computed_tokens", I32, (R,))


def features_of(case: Case) -> frozenset[str]:
    s = case.arrays["idx_mapping"]
    qlen = np.diff(case.arrays["query_start_loc"].astype(np.int64))
    c = case.arrays["num_computed_tokens"].astype(np.int64)[s]
    checks = {"wraps": bool(np.any(c + qlen > INT32_MAX)), "empty_row": bool(np.any(qlen == 0))}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 16 rows: empty ones among them, counts anywhere in int32 (near its limit too)."""
    B = c.integer(1, 16)
    R = B + c.integer(0, 4)
    rows = state_rows(c, B, R)
    qlens = [int(x) for x in c.array(np.int64, B, 0, 40)]
    counts = c.array_of(np.int64, R, [(0, 1000), (INT32_MAX - 40, INT32_MAX), (-(2**31), INT32_MAX)])
    return build(rows, qlens, counts)


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Fewer rows (each alone, each half, each left out)."""
    s = case.arrays["idx_mapping"]
    qlen = np.diff(case.arrays["query_start_loc"].astype(np.int64))
    for keep in row_subsets(len(s)):
        yield build(s[keep], qlen[keep], case.arrays["num_computed_tokens"])
