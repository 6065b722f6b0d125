"""The production tier of ``copy_and_expand_dflash_inputs_kernel`` (docs/CONTRACT.md §9.2): in-contract
cases by construction, both variants, one body for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import INT32_MAX, INT32_MIN, Scale, cdiv, request_count_ranges
from .layout import (
    COMMON_BLOCK_SIZES,
    MAX_BLOCK_SIZE,
    MAX_POSITION,
    MAX_SPEC_TOKENS,
    ODD_BLOCK_SIZES,
    allowed_blocks,
    block_row,
    build,
    vllm_max_tokens,
)

BLOCK_BASES = ((0, 1 << 16), (INT32_MIN, INT32_MAX), (1 << 27, INT32_MAX))
"""Block ids: small ones (vLLM's), any int32 (negative too), and ones whose slots pass 2**31."""


def _request(c: Chooser, cap: int, width: int, max_model_len: int, Q: int, mode: str) -> dict[str, Any]:
    """One request's own draws, together, so shrinking drops a request with its data."""
    n = c.integer(1, cap)
    if mode == "scrambled":
        positions = c.array_of(np.int64, n, [(0, max_model_len), (0, MAX_POSITION)])
    else:
        if mode == "large":
            p0 = c.integer(1 << 31, MAX_POSITION - n)
        else:  # consecutive within max_model_len; sometimes ending near it (the block clamp)
            end = max(max_model_len - n, 0)
            p0 = c.integer_of([(0, end), (max(0, end - Q - 1), end)])
        positions = p0 + np.arange(n, dtype=np.int64)
    step = c.choice([1, 3, -1, 1000003])
    return {
        "positions": positions,
        "rejected": c.integer(0, n - 1),
        "next": c.integer(INT32_MIN, INT32_MAX),
        "row": block_row(c.integer_of(BLOCK_BASES), step, width),
    }


def _launch(c: Chooser, lengths: list[int], K: int, scale: Scale) -> dict[str, int | None]:
    """vLLM's own launch half the time (where shrinking heads), else a Triton block size the
    scale affords (the smallest, 1, now and then) and up to two blocks of padding."""
    spare = c.optional(lambda c: c.integer(1, 16))
    if not c.boolean():
        return {"buffer_spare": spare}
    max_tokens = vllm_max_tokens(lengths, K)
    allowed = allowed_blocks(len(lengths), max_tokens, scale)
    block = allowed[0] if c.boolean() else c.choice(allowed)
    need = cdiv(max_tokens, block)
    budget = max(0, scale.max_programs // len(lengths) - need)
    extra = c.integer(0, min(2, budget))
    return {
        "triton_block_size": block,
        "max_tokens_per_req": max_tokens + extra * block if extra else None,
        "buffer_spare": spare,
    }


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case of §9.2, either variant: up to 31 speculative tokens, common,
    odd or any block sizes, block tables as wide as the model length needs, positions
    consecutive (some ending at the model length), scrambled or large, block ids small, any or
    with slots past 2**31, vLLM's launch or another that covers every slot."""
    has = c.boolean()
    K = c.integer_of([(1, 16), (0, 0), (15, 15), (0, MAX_SPEC_TOKENS)])
    kind = c.choice([0, 1, 2])
    bs = (c.choice(COMMON_BLOCK_SIZES) if kind == 0 else c.choice(ODD_BLOCK_SIZES) if kind == 1
          else c.integer(1, MAX_BLOCK_SIZE))  # fmt: skip
    kind = c.choice([0, 1, 2])
    width = c.integer(1, 8) if kind == 0 else c.choice([1, 16, 32]) if kind == 1 else c.integer(1, 64)
    max_model_len = width * bs - c.integer(0, bs - 1)  # width = cdiv(max_model_len, bs)
    mode = c.choice(["consecutive", "scrambled", "large"])
    R = c.integer_of(request_count_ranges(scale))
    cap = c.choice(sorted({4, 16, 64, scale.max_query_len}))
    reqs = c.repeat(R, lambda c: _request(c, cap, width, max_model_len, 1 + K, mode))
    return build(
        reqs,
        has_num_rejected=has,
        K=K,
        block_size=bs,
        mask_id=c.integer_of([(0, 0), (INT32_MIN, INT32_MAX)]),
        launch=_launch(c, [len(q["positions"]) for q in reqs], K, scale),
    )
