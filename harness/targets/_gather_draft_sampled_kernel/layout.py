"""How a case of ``_gather_draft_sampled_kernel`` is built (docs/CONTRACT.md §23.1): a step's
batch (rows with their state row, computed count, query length and logits count) from which
vLLM's earlier kernels made the logits rows (§16, §17): their token indices, state rows and
local positions; the batch's input ids and positions; the state's prompt lengths."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...core.case import Case

NAME = "_gather_draft_sampled_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


@dataclass(frozen=True)
class Row:
    """Batch row: state row ``s``, ``qlen`` tokens after ``c`` computed, its last ``logits`` tokens
    verified."""

    s: int
    c: int
    qlen: int
    logits: int


def build(rows: Sequence[Row], input_ids: np.ndarray, prefill_len: Sequence[int], block: int | None = None) -> Case:
    """The case of ``rows``: positions ``c + i``; logits rows at each row's last ``logits``
    tokens (``logits_indices``, ``expanded_idx_mapping``, ``expanded_local_pos``);
    ``input_ids`` one per token."""
    q = np.concatenate([[0], np.cumsum([r.qlen for r in rows])]).astype(np.int64)
    pos = np.concatenate([r.c + np.arange(r.qlen) for r in rows]).astype(np.int64)
    idx = np.concatenate([q[b + 1] - r.logits + np.arange(r.logits) for b, r in enumerate(rows)]).astype(np.int64)
    return Case(
        kernel=NAME,
        arrays={
            "input_ids": np.asarray(input_ids, dtype=np.int64).astype(np.int32),
            "positions": pos,
            "logits_indices": idx,
            "expanded_idx_mapping": np.concatenate([np.full(r.logits, r.s) for r in rows]).astype(np.int64),
            "expanded_local_pos": np.concatenate([np.arange(r.logits) for r in rows]).astype(np.int32),
            "prefill_len": np.asarray(prefill_len, dtype=np.int64).astype(np.int32),
        },
        scalars={"num_logits": int(idx.size)},
        launch={"BLOCK_SIZE": block},
    )


def rows_of(case: Case) -> list[Row] | None:
    """The rows a case was built from (``None``: its logits rows are no batch's)."""
    a = case.arrays
    lp = a["expanded_local_pos"].astype(np.int64)
    starts = np.flatnonzero(lp == 0)
    if len(starts) == 0 or starts[0] != 0:
        return None
    ends = np.concatenate([starts[1:], [len(lp)]])
    idx, pos = a["logits_indices"], a["positions"]
    rows, q0 = [], 0
    for b0, b1 in zip(starts, ends, strict=True):
        qe = int(idx[b1 - 1]) + 1
        if not q0 < qe <= len(pos):
            return None
        rows.append(Row(int(a["expanded_idx_mapping"][b0]), int(pos[q0]), qe - q0, int(b1 - b0)))
        q0 = qe
    return rows
