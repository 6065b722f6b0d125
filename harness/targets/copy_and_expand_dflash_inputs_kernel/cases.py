"""The production tier of ``copy_and_expand_dflash_inputs_kernel`` (docs/CONTRACT.md §9.2): in-contract
cases by construction, both variants, one body for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import INT32_MAX, Scale, cdiv, request_count_ranges
from .layout import (
    COMMON_BLOCK_SIZES,
    MAX_SPEC_TOKENS,
    ODD_BLOCK_SIZES,
    VOCAB,
    block_row,
    build,
)


def _request(c: Chooser, cap: int, max_model_len: int, Q: int, width: int, mode: str) -> dict[str, Any]:
    """One request's own draws, together, so shrinking drops a request with its data: ``n``
    context tokens whose last position leaves room for the ``Q`` query slots below
    max_model_len (vLLM's drafter gate), consecutive (a text target) or never decreasing with
    repeats (an M-RoPE target's temporal coordinates)."""
    n = c.integer(1, max(1, min(cap, max_model_len - Q)))
    end = max(max_model_len - Q - n, 0)
    p0 = c.integer_of([(0, end), (max(0, end - Q - 1), end)])
    if mode == "mrope":
        steps = c.array(np.int64, n, 0, 1)
        steps[0] = 0
        positions = p0 + np.cumsum(steps)
    else:
        positions = p0 + np.arange(n, dtype=np.int64)
    return {
        "positions": positions,
        "rejected": c.integer(0, n - 1),
        "next": c.integer_of([(0, 1 << 15), (0, VOCAB - 1)]),
        "row": block_row(c.integer_of([(0, 1 << 16), (0, 1 << 20)]), c.choice([1, 3]), width),
    }


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case of §9.2, either variant: up to 32 speculative tokens, vLLM's
    block sizes (powers of two, hybrid models' multiples of 16), block tables as wide as the
    model length needs, positions consecutive or M-RoPE-like (some ending where the query
    reaches max_model_len - 1), block ids with slots within int32, vocabulary ids, vLLM's
    launch."""
    has = c.boolean()
    K = c.integer_of([(1, 16), (0, 0), (15, 15), (0, MAX_SPEC_TOKENS)])
    Q = 1 + K
    bs = c.choice(COMMON_BLOCK_SIZES) if c.chance(0.7) else c.choice([b for b in ODD_BLOCK_SIZES if b % 16 == 0])
    kind = c.choice([0, 1, 2])
    width = c.integer(1, 8) if kind == 0 else c.choice([1, 16, 32]) if kind == 1 else c.integer(1, 64)
    width = max(width, cdiv(Q + 2, bs))  # room for a context token and its queries
    max_model_len = width * bs - c.integer(0, min(bs - 1, width * bs - Q - 2))  # width = cdiv(M, bs)
    mode = c.choice(["consecutive", "consecutive", "mrope"])
    R = c.integer_of(request_count_ranges(scale))
    cap = c.choice(sorted({4, 16, 64, scale.max_query_len}))
    reqs = c.repeat(R, lambda c: _request(c, cap, max_model_len, Q, width, mode))
    top = (INT32_MAX - bs + 1) // bs
    for q in reqs:  # slots within int32
        q["row"] = np.minimum(q["row"].astype(np.int64), top).astype(np.int32)
    return build(
        reqs,
        has_num_rejected=has,
        K=K,
        block_size=bs,
        mask_id=c.integer_of([(0, 0), (0, VOCAB - 1)]),
        launch={"buffer_spare": c.optional(lambda c: c.integer(1, 16))},
    )
