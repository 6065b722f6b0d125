"""The extended tier of ``_expand_idx_mapping_kernel``: docs/CONTRACT.md §17.4.

A block smaller than a row's logits (only its first ``BLOCK_SIZE`` entries are written), rows
of no logits, and any int64 state rows (copied as they are, negative ones included). The
oracles compute §17.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I64, check_cu, need, need_int, npow2, row_subsets
from .layout import build

FEATURES = {
    "block_cut_short": "BLOCK_SIZE smaller than a row's logits (the row's first BLOCK_SIZE entries only)",
    "empty_row": "a row of no logits (nothing written for it)",
    "any_state_rows": "state rows outside [0, max_num_reqs) (negative or past 2**31): copied as they are",
}


def validate(case: Case) -> None:
    """Rows of 0 or more logits, any int64 state rows, any power-of-two block of up to 1024."""
    B = need_int(case.scalars, "num_reqs", 1)
    need(case.arrays, "idx_mapping", I64, (B,))
    check_cu(case, B, 0, 1 << 12)
    need_int(case.scalars, "max_expand_len", 1, 1024)
    block = case.launch.get("BLOCK_SIZE")
    if block is not None and (not isinstance(block, int) or block < 1 or block > 1024 or npow2(block) != block):
        raise ContractViolation("launch.BLOCK_SIZE", "must be null or a power of two from 1 to 1024")


def features_of(case: Case) -> frozenset[str]:
    nl = np.diff(case.arrays["cu_num_logits"].astype(np.int64))
    s = case.arrays["idx_mapping"]
    block = case.launch.get("BLOCK_SIZE") or npow2(case.scalars["max_expand_len"])
    checks = {"block_cut_short": bool(np.any(nl > block)), "empty_row": bool(np.any(nl == 0)),
              "any_state_rows": bool(np.any((s < 0) | (s >= 1 << 31)))}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 16 rows of 0 to 12 logits, a block of 1 to 8, state rows anywhere in int64."""
    B = c.integer(1, 16)
    rows = c.array_of(np.int64, B, [(0, 64), (-(2**63), 2**63 - 1)])
    logits = [int(x) for x in c.array(int, B, 0, 12)]
    block = c.choice([None, 1, 2, 4, 8])
    return build(rows, logits, c.integer(1, 13), block)


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Fewer rows (each alone, each half, each left out)."""
    s = case.arrays["idx_mapping"]
    nl = np.diff(case.arrays["cu_num_logits"].astype(np.int64))
    for keep in row_subsets(len(s)):
        yield build(s[keep], nl[keep], case.scalars["max_expand_len"], case.launch.get("BLOCK_SIZE"))
