"""The extended tier of ``_get_num_sampled_and_rejected_kernel``: docs/CONTRACT.md §18.4.

Any int32 sampled counts (``logits - sampled`` wraps in int32) and a ``cu_num_logits`` that
decreases (a negative logits count): the kernel is int32 arithmetic on in-bounds reads, and
the oracles compute §18.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, INT32_MIN, Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I32, check_batch, need, row_subsets, state_rows
from .layout import build

FEATURES = {
    "sampled_outside_logits": "a sampled count outside [1, the row's logits] (0, negative, more than verified)",
    "wraps": "logits - sampled past the int32 range (the difference wraps)",
    "decreasing_cu": "cu_num_logits decreases (a negative logits count)",
}


def validate(case: Case) -> None:
    """The batch's arrays of §18.2's dtypes and shapes, any int32 values."""
    a = case.arrays
    prefill = need(a, "prefill_len", I32, ndim=1)
    batch = check_batch(case, prefill.shape[0], qsl=False)
    for n in ("num_sampled", "seq_lens"):
        need(a, n, I32, (batch.B,))
    need(a, "cu_num_logits", I32, (batch.B + 1,))
    if a["cu_num_logits"][0] != 0:
        raise ContractViolation("arrays.cu_num_logits", "must start at 0")


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    nl = np.diff(a["cu_num_logits"].astype(np.int64))
    ns = a["num_sampled"].astype(np.int64)
    d = nl - ns
    checks = {
        "sampled_outside_logits": bool(np.any((ns < 1) | (ns > nl))),
        "wraps": bool(np.any((d > INT32_MAX) | (d < INT32_MIN))),
        "decreasing_cu": bool(np.any(nl < 0)),
    }
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 16 rows with any int32 sampled counts and logits counts of either sign."""
    B = c.integer(1, 16)
    R = B + c.integer(0, 4)
    rows = state_rows(c, B, R)
    logits = c.array_of(np.int64, B, [(0, 17), (-40, 40), (-(2**20), 2**20)])
    cu = np.concatenate([[0], np.cumsum(logits)])
    cu = np.clip(cu, INT32_MIN, INT32_MAX)
    sampled = c.array_of(np.int64, B, [(0, 17), (INT32_MIN, INT32_MAX), (INT32_MAX - 8, INT32_MAX)])
    seq = c.array(np.int64, B, 1, 100)
    prompts = c.array(np.int64, R, 1, 100)
    return build(rows, np.diff(cu), sampled, seq, prompts)


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Fewer rows (each alone, each half, each left out)."""
    a = case.arrays
    nl = np.diff(a["cu_num_logits"].astype(np.int64))
    for keep in row_subsets(len(nl)):
        yield build(a["idx_mapping"][keep], nl[keep], a["num_sampled"][keep], a["seq_lens"][keep], a["prefill_len"])
