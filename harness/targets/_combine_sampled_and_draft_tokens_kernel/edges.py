"""The extended tier of ``_combine_sampled_and_draft_tokens_kernel``: docs/CONTRACT.md §16.4.

A ``BLOCK_SIZE`` smaller than a row's logits (only the first ``BLOCK_SIZE`` indices and drafts
written), ``NUM_NEW_SAMPLED_TOKENS = 0`` (the drafts take every logits slot), and token ids
outside int32 (truncated). The oracles compute §16.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, INT32_MIN, Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    I32,
    I64,
    check_batch,
    check_cu,
    need,
    npow2,
    row_subsets,
    state_rows,
)
from .layout import Row, build, rows_of

FEATURES = {
    "block_cut_short": "BLOCK_SIZE smaller than a row's logits (its first BLOCK_SIZE indices and drafts only)",
    "no_new_token": "NUM_NEW_SAMPLED_TOKENS = 0 (the drafts take every logits slot)",
    "wide_ids": "a token id outside int32 written (truncated)",
}


def validate(case: Case) -> None:
    """The production tier's shapes, rows holding their logits, any block and ``NUM_NEW`` of
    0 or 1, any int64 ids."""
    a = case.arrays
    drafts = need(a, "draft_tokens", I64, ndim=2)
    R, K = drafts.shape
    batch = check_batch(case, R)
    need(a, "last_sampled_tokens", I64, (R, 1))
    need(a, "prefill_len", I32, (R,))
    need(a, "seq_lens", I32, (batch.B,))
    new = case.launch.get("NUM_NEW_SAMPLED_TOKENS")
    if new not in (None, 0, 1):
        raise ContractViolation("launch.NUM_NEW_SAMPLED_TOKENS", "must be null, 0 or 1")
    nl = check_cu(case, batch.B, 0, K + (1 if new is None else new))
    if np.any(batch.qlen < nl):
        raise ContractViolation("arrays.query_start_loc", "every row's query must hold its logits")
    block = case.launch.get("BLOCK_SIZE")
    if block is not None and (not isinstance(block, int) or block < 1 or block > 1024 or npow2(block) != block):
        raise ContractViolation("launch.BLOCK_SIZE", "must be null or a power of two up to 1024")


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    nl = np.diff(a["cu_num_logits"].astype(np.int64))
    new = case.launch.get("NUM_NEW_SAMPLED_TOKENS")
    block = case.launch.get("BLOCK_SIZE") or npow2(a["draft_tokens"].shape[1] + (1 if new is None else new))
    ids = np.concatenate([a["last_sampled_tokens"].reshape(-1), a["draft_tokens"].reshape(-1)])
    checks = {"block_cut_short": bool(np.any(nl > block)), "no_new_token": new == 0,
              "wide_ids": bool(np.any((ids < INT32_MIN) | (ids > INT32_MAX)))}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 8 decoding rows of up to 6 drafts, a block of 1 to 8, ``NUM_NEW`` 0 or 1, ids
    anywhere in int64."""
    B = c.integer(1, 8)
    R = B + c.integer(0, 3)
    s = state_rows(c, B, R)
    K = c.integer(1, 6)
    new = c.choice([None, 0, 1])
    rows = [Row(int(x), c.integer(K + 1, K + 3), c.integer(50, 90), c.integer(0, K)) for x in s]
    ids = [(0, 99), (INT32_MIN - 5, INT32_MIN + 5), (INT32_MAX - 5, INT32_MAX + 5), (-(2**63), 2**63 - 1)]
    return build(rows, c.array(np.int64, R, 1, 50), c.array_of(np.int64, R, ids),
                 c.array_of(np.int64, R * K, ids).reshape(R, K), c.choice([None, 1, 2, 4, 8]), new)


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Fewer rows (each alone, each half, each left out)."""
    rows = rows_of(case)
    a = case.arrays
    for keep in row_subsets(len(rows)):
        yield build([rows[b] for b in keep], a["prefill_len"], a["last_sampled_tokens"], a["draft_tokens"],
                    case.launch.get("BLOCK_SIZE"), case.launch.get("NUM_NEW_SAMPLED_TOKENS"))
