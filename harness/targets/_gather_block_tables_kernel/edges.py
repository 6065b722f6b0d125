"""The extended tier of ``_gather_block_tables_kernel``: docs/CONTRACT.md §21.4.

Two batch rows naming one state row (each writes its own destination row), reaches larger than
the counts (``null = 0``) or windows past the row (``null > n``: every entry nulled), block sizes
that are not powers of two, a ``num_blocks`` stride past ``max_num_reqs`` (a wider array). The
oracles compute §21.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I32, I64, need, need_int, npow2
from .layout import build, groups, src

FEATURES = {
    "shared_state_row": "two batch rows naming one state row",
    "window_past_row": "a sliding window that nulls every block of a row (null > n)",
    "odd_block_size": "a block size that is not a power of two",
    "wide_num_blocks": "num_blocks with more columns than max_num_reqs (its stride past it)",
}


def validate(case: Case) -> None:
    """Every read inside its table: state rows in ``[0, R)``, counts in ``[0, W_g]``, block sizes
    ``>= 1``, grid rows in ``[B, R]``."""
    a = case.arrays
    B = need_int(case.scalars, "num_reqs", 1)
    s = need(a, "idx_mapping", I64, (B,))
    nb = need(a, "num_blocks", I32, ndim=2)
    G = nb.shape[0]
    if not 1 <= G <= 8:
        raise ContractViolation("arrays.num_blocks", "must have 1 to 8 groups")
    R = need(a, src(0), I32, ndim=2).shape[0]
    for g in range(G):
        t = need(a, src(g), I32, ndim=2)
        if t.shape[0] != R or t.shape[1] < 1 or np.any(nb[g, :R] < 0) or np.any(nb[g, :R] > t.shape[1]):
            raise ContractViolation(f"arrays.{src(g)}", "every table has max_num_reqs rows, counts in [0, its width]")
    if nb.shape[1] < R or np.any((s < 0) | (s >= R)):
        raise ContractViolation("arrays.idx_mapping", "must hold state rows in [0, max_num_reqs)")
    for n in ("sliding_window_reach", "block_sizes"):
        need(a, n, I32, (G,))
    need(a, "num_computed_tokens", I32, (R,))
    if np.any(a["block_sizes"] < 1):
        raise ContractViolation("arrays.block_sizes", "must be >= 1")
    need_int(case.scalars, "num_rows", B, R)
    if not isinstance(case.scalars.get("MASK_SLIDING_WINDOW"), bool):
        raise ContractViolation("scalars.MASK_SLIDING_WINDOW", "must be true or false")


def null_counts(case: Case) -> np.ndarray:
    """``[G, B]``: how many leading blocks of each batch row §21.1 nulls."""
    a = case.arrays
    s = a["idx_mapping"]
    out = np.zeros((groups(case), len(s)), dtype=np.int64)
    if case.scalars["MASK_SLIDING_WINDOW"]:
        first = a["num_computed_tokens"].astype(np.int64)[s]
        for g in range(groups(case)):
            reach, bs = int(a["sliding_window_reach"][g]), int(a["block_sizes"][g])
            if reach > 0:
                out[g] = np.maximum(first - reach, 0) // bs
    return out


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    s = a["idx_mapping"]
    R = a[src(0)].shape[0]
    n = a["num_blocks"].astype(np.int64)[:, s]
    checks = {"shared_state_row": len(np.unique(s)) < len(s),
              "window_past_row": bool(np.any((null_counts(case) > n) & (n > 0))),
              "odd_block_size": any(npow2(int(x)) != int(x) for x in a["block_sizes"]),
              "wide_num_blocks": a["num_blocks"].shape[1] > R}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 6 rows of as many state rows or more (shared now and then), 1 or 2 groups of odd block
    sizes and small windows, a ``num_blocks`` with spare columns."""
    R = c.integer(1, 6)
    B = c.integer(1, R)
    rows = c.array(np.int64, B, 0, R - 1)
    G = c.integer(1, 2)
    widths = [c.integer(1, 8) for _ in range(G)]
    tables = [c.array(np.int64, R * w, 0, 999).reshape(R, w) for w in widths]
    nb = np.concatenate([np.stack([c.array(np.int64, R, 0, w) for w in widths]),
                         np.zeros((G, c.integer(0, 3)), np.int64)], axis=1)
    reach = [c.integer(0, 12) for _ in range(G)]
    sizes = [c.choice([3, 5, 1, 6]) for _ in range(G)]
    return build(rows, tables, nb, c.array(np.int64, R, 0, 60), reach, sizes, c.integer(B, R), c.chance(0.8))


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """The first batch row alone."""
    if case.scalars["num_reqs"] > 1:
        yield case.replace(arrays={"idx_mapping": case.arrays["idx_mapping"][:1]},
                           scalars={"num_reqs": 1, "num_rows": 1})
