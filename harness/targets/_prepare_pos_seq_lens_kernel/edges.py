"""The extended tier of ``_prepare_pos_seq_lens_kernel``: docs/CONTRACT.md §15.4.

``max_num_reqs`` smaller than the ``seq_lens`` buffer (the rest untouched) or equal to ``B``
(nothing padded), counts near the int32 limit (``c + i`` and ``c + qlen`` wrap in int32), and
rows of no tokens (``seq_lens[b] = c``, no position). The oracles compute §15.1 on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I32, check_batch, need, need_int, row_subsets, state_rows
from .layout import build

FEATURES = {
    "short_max_num_reqs": "max_num_reqs smaller than the seq_lens buffer (its tail untouched)",
    "wraps": "a count plus its row's tokens past 2**31 - 1 (positions and the length wrap in int32)",
    "empty_row": "a row of no tokens (its length is its count, no position written)",
}


def validate(case: Case) -> None:
    """Distinct state rows, rows of 0 tokens or more, any int32 counts, ``B <= max_num_reqs <=``
    the buffer."""
    counts = need(case.arrays, "num_computed_tokens", I32, ndim=1)
    check_batch(case, counts.shape[0], min_qlen=0)
    need_int(case.scalars, "max_num_reqs", int(case.scalars["num_reqs"]), counts.shape[0])
    if case.launch.get("BLOCK_SIZE") is not None:
        raise ContractViolation("launch.BLOCK_SIZE", "must be null (vLLM's 1024)")


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    qlen = np.diff(a["query_start_loc"].astype(np.int64))
    c = a["num_computed_tokens"].astype(np.int64)[a["idx_mapping"]]
    checks = {"short_max_num_reqs": case.scalars["max_num_reqs"] < len(a["num_computed_tokens"]),
              "wraps": bool(np.any(c + qlen > INT32_MAX)), "empty_row": bool(np.any(qlen == 0))}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 12 rows of 0 to 20 tokens, counts anywhere in int32, ``max_num_reqs`` from ``B``
    to the buffer."""
    B = c.integer(1, 12)
    R = B + c.integer(0, 6)
    rows = state_rows(c, B, R)
    qlens = [int(x) for x in c.array(np.int64, B, 0, 20)]
    counts = c.array_of(np.int64, R, [(0, 1000), (INT32_MAX - 24, INT32_MAX), (-(2**31), INT32_MAX)])
    return build(rows, qlens, counts, c.integer(B, R))


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Fewer rows (each alone, each half, each left out)."""
    a = case.arrays
    qlen = np.diff(a["query_start_loc"].astype(np.int64))
    for keep in row_subsets(len(qlen)):
        yield build(a["idx_mapping"][keep], qlen[keep], a["num_computed_tokens"], case.scalars["max_num_reqs"])
