"""The extended tier of ``_gather_draft_sampled_kernel``: docs/CONTRACT.md §23.4.

Any power-of-two ``BLOCK_SIZE`` from 1 to 1024 (the result does not depend on it), any int64
positions and int32 local positions (``p - lp`` in int64), and logits rows whose indices lie
anywhere inside the token buffers (not a batch's). The oracles compute §23.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, INT32_MIN, Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I32, I64, need, need_int, npow2

FEATURES = {
    "small_block": "a BLOCK_SIZE smaller than vLLM's 1024 (more programs, the same result)",
    "any_positions": "positions and local positions of no batch (negative, near the limits): p - lp in int64",
}


def validate(case: Case) -> None:
    """Every index inside the token buffers, every state row inside ``prefill_len``."""
    a = case.arrays
    n = need_int(case.scalars, "num_logits", 1)
    T = need(a, "input_ids", I32, ndim=1).shape[0]
    need(a, "positions", I64, (T,))
    R = need(a, "prefill_len", I32, ndim=1).shape[0]
    idx = need(a, "logits_indices", I64, (n,))
    rows = need(a, "expanded_idx_mapping", I64, (n,))
    need(a, "expanded_local_pos", I32, (n,))
    if np.any((idx < 0) | (idx >= T)) or np.any((rows < 0) | (rows >= R)):
        raise ContractViolation("arrays.logits_indices", "every token index and state row must lie inside its buffer")
    block = case.launch.get("BLOCK_SIZE")
    if block is not None and (not isinstance(block, int) or block < 1 or block > 1024 or npow2(block) != block):
        raise ContractViolation("launch.BLOCK_SIZE", "must be null or a power of two up to 1024")


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    checks = {"small_block": case.launch.get("BLOCK_SIZE") is not None,
              "any_positions": bool(np.any(a["positions"] < 0) or np.any(a["expanded_local_pos"] < 0))}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 40 logits rows gathering anywhere from up to 30 tokens, any positions."""
    from .layout import NAME

    T = c.integer(1, 30)
    n = c.integer(1, 40)
    R = c.integer(1, 6)
    arrays = {
        "input_ids": c.array_of(np.int64, T, [(0, 99), (INT32_MIN, INT32_MAX)]).astype(np.int32),
        "positions": c.array_of(np.int64, T, [(0, 99), (-(2**62), 2**62)]).astype(np.int64),
        "logits_indices": c.array(np.int64, n, 0, T - 1).astype(np.int64),
        "expanded_idx_mapping": c.array(np.int64, n, 0, R - 1).astype(np.int64),
        "expanded_local_pos": c.array_of(np.int64, n, [(0, 8), (INT32_MIN, INT32_MAX)]).astype(np.int32),
        "prefill_len": c.array_of(np.int64, R, [(0, 99), (INT32_MIN, INT32_MAX)]).astype(np.int32),
    }
    return Case(NAME, arrays, {"num_logits": n}, {"BLOCK_SIZE": c.choice([None, 1, 4, 8, 32])})


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """The first logits row, the first half of them."""
    n = case.scalars["num_logits"]
    for k in (1, n // 2):
        if 1 <= k < n:
            cut = {x: case.arrays[x][:k].copy() for x in ("logits_indices", "expanded_idx_mapping", "expanded_local_pos")}
            yield case.replace(arrays=cut, scalars={"num_logits": k})
