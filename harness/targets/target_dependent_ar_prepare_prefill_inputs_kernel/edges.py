"""The extended tier of ``target_dependent_ar_prepare_prefill_inputs_kernel``: docs/CONTRACT.md §25.4.

A row whose every token is rejected (``q = 0``: no shifted copy, its next token written at
``qs_b - 1``, the previous row's last slot, as long as no other write lands there; never for the
first row), a negative sampled count (the next token comes from the prompt), last sampled ids
outside int32 (truncated) and ``max_num_reqs = B`` (no padding but the last query start). The
oracles compute §25.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, INT32_MIN, Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I32, I64, check_batch, need, need_int, row_subsets
from .layout import Row, build, rows_of

FEATURES = {
    "all_rejected": "a row whose every token is rejected (q = 0): its next token lands in the previous row's last slot",
    "negative_sampled": "a negative sampled count (the next token from the prompt)",
    "wide_last_sampled": "a last sampled id outside int32 (truncated)",
}


def written(case: Case) -> list[int]:
    """The ``draft_input_ids`` elements the rows write, in program order (§25.1)."""
    a = case.arrays
    q = a["query_start_loc"].astype(np.int64)
    out: list[int] = []
    for b in range(len(q) - 1):
        keep = int(q[b + 1] - q[b]) - int(a["num_rejected"][b])
        out += list(range(int(q[b]), int(q[b]) + max(keep, 1) - 1)) + [int(q[b]) + keep - 1]
    return out


def validate(case: Case) -> None:
    """The production tier's shapes; each row keeps ``0 <= q <= qlen`` tokens, its writes inside
    the buffers and apart from every other row's."""
    a = case.arrays
    last = need(a, "last_sampled", I64, ndim=2)
    R = last.shape[0]
    batch = check_batch(case, R)
    for n, dt in (("num_sampled", I32), ("num_rejected", I32), ("seq_lens", I32)):
        need(a, n, dt, (batch.B,))
    need(a, "target_input_ids", I32, (batch.tokens,))
    need(a, "target_positions", I64, (batch.tokens,))
    nxt = need(a, "next_prefill_tokens", I32, ndim=2)
    if nxt.shape[1] != R or last.shape[1] != 1:
        raise ContractViolation("arrays.next_prefill_tokens", "must be [n, max_num_reqs] beside last_sampled [max_num_reqs, 1]")
    need_int(case.scalars, "max_num_reqs", batch.B, R)
    keep = batch.qlen - a["num_rejected"].astype(np.int64)
    if np.any(keep < 0) or np.any(keep > batch.qlen):
        raise ContractViolation("arrays.num_rejected", "must be in [0, the row's query length]")
    w = written(case)
    if len(set(w)) != len(w) or (w and (min(w) < 0 or max(w) >= batch.tokens)):
        raise ContractViolation("arrays.num_rejected", "every row's writes must lie inside draft_input_ids, apart from "
                                "every other row's")


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    q = np.diff(a["query_start_loc"].astype(np.int64))
    last = a["last_sampled"][a["idx_mapping"]]
    checks = {"all_rejected": bool(np.any(q == a["num_rejected"])), "negative_sampled": bool(np.any(a["num_sampled"] < 0)),
              "wide_last_sampled": bool(np.any((last < INT32_MIN) | (last > INT32_MAX)))}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 8 rows of 1 to 6 tokens: rows past the first may reject all of theirs when the row
    before rejected one or more; sampled counts from -2; last sampled ids anywhere in int64."""
    B = c.integer(1, 8)
    R = B + c.integer(0, 3)
    rows: list[Row] = []
    for b in range(B):
        qlen = c.integer(1, 6)
        rej = c.integer(0, qlen - 1)
        if b and rows[-1].rejected and c.chance(0.5):
            rej = qlen
        rows.append(Row(b, qlen, c.integer(0, 50), c.integer(-2, 3), rej))
    T = sum(r.qlen for r in rows)
    last = c.array_of(np.int64, R, [(0, 99), (-(2**63), 2**63 - 1)])
    return build(rows, c.array(np.int64, T, 0, 99), last, c.array(np.int64, R, 0, 99).reshape(1, R),
                 c.integer(B, R))


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Fewer rows (each alone, each half, each left out)."""
    rows = rows_of(case)
    q = case.arrays["query_start_loc"].astype(np.int64)
    ids = case.arrays["target_input_ids"]
    for keep in row_subsets(len(rows)):
        kept = [rows[b] for b in keep]
        tokens = np.concatenate([ids[q[b] : q[b + 1]] for b in keep])
        yield build(kept, tokens, case.arrays["last_sampled"], case.arrays["next_prefill_tokens"],
                    max(case.scalars["max_num_reqs"], len(kept)))
