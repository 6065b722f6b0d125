"""The extended tier of ``input_batch_prepare_prefill_inputs_kernel``: docs/CONTRACT.md §14.4.

``LOOKAHEAD_BLOCK`` smaller than ``num_lookahead`` (the rows past it not written) and a chunk
that runs past its prompt (the copy reads past it, inside the row). The oracles compute §14.1
on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I32, check_batch, need, need_int, npow2, row_subsets, state_rows
from .layout import build, state

FEATURES = {
    "lookahead_block_cut_short": "LOOKAHEAD_BLOCK smaller than num_lookahead (the rows past it not written)",
    "chunk_past_prompt": "a prefilling row whose chunk runs past its prompt (copied as the row holds it)",
}


def validate(case: Case) -> None:
    """The production tier's shapes; chunks inside the row (not the prompt); any power-of-two
    ``LOOKAHEAD_BLOCK``."""
    a = case.arrays
    table = need(a, "all_token_ids", I32, ndim=2)
    R, W = table.shape
    batch = check_batch(case, R)
    prefill = need(a, "prefill_len", I32, (R,)).astype(np.int64)
    counts = need(a, "num_computed_tokens", I32, (R,)).astype(np.int64)
    n = need_int(case.scalars, "num_lookahead", 1, 64)
    block = case.launch.get("LOOKAHEAD_BLOCK")
    if block is not None and (not isinstance(block, int) or block < 1 or npow2(block) != block or block > npow2(n)):
        raise ContractViolation("launch.LOOKAHEAD_BLOCK", "must be null or a power of two up to num_lookahead's")
    c = counts[batch.s]
    pre = c < prefill[batch.s]
    if np.any(counts < 0) or np.any(prefill < 0) or np.any(prefill > W) or np.any(c[pre] + batch.qlen[pre] > W):
        raise ContractViolation("arrays.num_computed_tokens", "a prefilling row's chunk must stay inside its row")


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    s = a["idx_mapping"]
    qlen = np.diff(a["query_start_loc"].astype(np.int64))
    c = a["num_computed_tokens"].astype(np.int64)[s]
    L = a["prefill_len"].astype(np.int64)[s]
    block = case.launch.get("LOOKAHEAD_BLOCK")
    checks = {"lookahead_block_cut_short": block is not None and block < case.scalars["num_lookahead"],
              "chunk_past_prompt": bool(np.any((c < L) & (c + qlen > L)))}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 8 prefilling rows whose chunks may run past their prompts, a lookahead block that
    may be cut short."""
    B = c.integer(1, 8)
    R = B + c.integer(0, 3)
    rows = state_rows(c, B, R)
    W = c.choice([8, 32])
    prefill = np.asarray(c.array(np.int64, R, 1, W))
    counts = np.asarray(c.array(np.int64, R, 0, W - 1))
    counts[rows] = np.minimum(counts[rows], prefill[rows] - 1)
    qlens = [c.integer(1, W - int(counts[r])) for r in rows]
    n = c.integer(1, 8)
    block = c.choice([None, max(1, npow2(n) // 2), 1])
    return build(rows, qlens, state(lambda k, lo, hi: c.array(np.int64, k, lo, hi), R, W), prefill, counts, n, block)


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Fewer rows (each alone, each half, each left out)."""
    a = case.arrays
    qlen = np.diff(a["query_start_loc"].astype(np.int64))
    for keep in row_subsets(len(qlen)):
        yield build(a["idx_mapping"][keep], qlen[keep], a["all_token_ids"], a["prefill_len"],
                    a["num_computed_tokens"], case.scalars["num_lookahead"], case.launch.get("LOOKAHEAD_BLOCK"))
