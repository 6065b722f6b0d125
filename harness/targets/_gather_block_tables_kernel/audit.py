"""What a caller of ``_gather_block_tables_kernel`` relies on (docs/CONTRACT.md §21).

Attention reads a request's KV cache through its gathered row: every block the request holds
(past the window's nulled ones) must be its own block (the state row's, not another request's),
the nulled ones the null block 0, and the grid's rows past the batch all 0 (a CUDA graph replays
them as empty requests)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from .edges import null_counts
from .layout import dst, groups, src


def own_blocks(case: Case, o: Observation) -> str | None:
    a = case.arrays
    nulls = null_counts(case)
    for g in range(groups(case)):
        for b, s in enumerate(a["idx_mapping"]):
            n = int(a["num_blocks"][g, s])
            want = a[src(g)][s, :n].copy()
            want[: min(int(nulls[g, b]), n)] = 0
            got = o.out[dst(g)][b, :n]
            if not np.array_equal(got, want):
                return f"group {g}, row {b}: blocks {got[:6].tolist()}..., not its own {want[:6].tolist()}..."
    return None


def padding_rows_zero(case: Case, o: Observation) -> str | None:
    B, NR = case.scalars["num_reqs"], case.scalars["num_rows"]
    for g in range(groups(case)):
        rows = o.out[dst(g)][B:NR]
        if np.any(rows != 0):
            return f"group {g}: a grid row past the batch holds {rows[np.any(rows != 0, axis=1)][0][:6].tolist()}..."
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("rows_hold_their_own_blocks", "a row holds its state row's blocks, the window's nulled ones 0",
             own_blocks),
    Property("padding_rows_zero", "the grid's rows past the batch are all 0", padding_rows_zero),
    Property("nothing_past_the_tables", "nothing is written outside the gathered tables", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
