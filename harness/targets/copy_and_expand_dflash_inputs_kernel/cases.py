"""The production tier of ``copy_and_expand_dflash_inputs_kernel`` (docs/CONTRACT.md §9.2): in-contract
cases by construction, both variants, for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from ...core.case import Case
from ...generation.strategies import (
    INT32_MAX,
    INT32_MIN,
    Scale,
    cdiv,
    draw_shape,
    int32s,
    random_shape,
    request_counts,
)
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
from .tour import SHAPES


def _block_bases() -> st.SearchStrategy[int]:
    """Block ids: small ones (vLLM's), any int32 (negative too), and ones whose slots pass 2**31."""
    return st.one_of(st.integers(0, 1 << 16), int32s(), st.integers(1 << 27, INT32_MAX))


@st.composite
def _request(draw: st.DrawFn, cap: int, width: int, max_model_len: int, Q: int, mode: str) -> dict[str, Any]:
    """One request's own draws, together, so shrinking drops a request with its data."""
    n = draw(st.integers(1, cap))
    if mode == "scrambled":
        positions = np.array(draw(st.lists(st.integers(0, max_model_len) | st.integers(0, MAX_POSITION),
                                           min_size=n, max_size=n)), dtype=np.int64)  # fmt: skip
    else:
        if mode == "large":
            p0 = draw(st.integers(1 << 31, MAX_POSITION - n))
        else:  # consecutive within max_model_len; sometimes ending near it (the block clamp)
            end = max(max_model_len - n, 0)
            p0 = draw(st.integers(0, end) | st.integers(max(0, end - Q - 1), end))
        positions = p0 + np.arange(n, dtype=np.int64)
    step = draw(st.sampled_from([1, 3, -1, 1000003]))
    return {
        "positions": positions,
        "rejected": draw(st.integers(0, n - 1)),
        "next": draw(int32s()),
        "row": block_row(draw(_block_bases()), step, width),
    }


@st.composite
def _launch(draw: st.DrawFn, lengths: list[int], K: int, scale: Scale) -> dict[str, int | None]:
    spare = draw(st.none() | st.integers(1, 16))
    if not draw(st.booleans()):  # shrinks toward vLLM's own launch
        return {"buffer_spare": spare}
    max_tokens = vllm_max_tokens(lengths, K)
    allowed = allowed_blocks(len(lengths), max_tokens, scale)
    block = draw(st.sampled_from(allowed) | st.just(allowed[0]))  # the smallest (1) now and then
    need = cdiv(max_tokens, block)
    budget = max(0, scale.max_programs // len(lengths) - need)
    extra = draw(st.integers(0, min(2, budget)))
    return {
        "triton_block_size": block,
        "max_tokens_per_req": max_tokens + extra * block if extra else None,
        "buffer_spare": spare,
    }


@st.composite
def strategy(draw: st.DrawFn, scale: Scale) -> Case:
    """In-contract cases of §9, both variants, shrinking toward small plain batches."""
    extreme = draw(draw_shape(SHAPES, scale))
    if extreme is not None:
        return extreme
    has = draw(st.booleans())
    K = draw(st.one_of(st.integers(1, 16), st.just(0), st.just(15), st.integers(0, MAX_SPEC_TOKENS)))
    bs = draw(st.one_of(st.sampled_from(COMMON_BLOCK_SIZES), st.sampled_from(ODD_BLOCK_SIZES),
                        st.integers(1, MAX_BLOCK_SIZE)))  # fmt: skip
    width = draw(st.one_of(st.integers(1, 8), st.sampled_from([1, 16, 32]), st.integers(1, 64)))
    max_model_len = width * bs - draw(st.integers(0, bs - 1))  # width = cdiv(max_model_len, bs)
    mode = draw(st.sampled_from(["consecutive", "scrambled", "large"]))
    R = draw(request_counts(scale))
    cap = draw(st.sampled_from(sorted({4, 16, 64, scale.max_query_len})))
    reqs = draw(st.lists(_request(cap, width, max_model_len, 1 + K, mode), min_size=R, max_size=R))
    return build(
        reqs,
        has_num_rejected=has,
        K=K,
        block_size=bs,
        mask_id=draw(st.just(0) | int32s()),
        launch=draw(_launch([len(q["positions"]) for q in reqs], K, scale)),
    )


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    """One in-contract case drawn with NumPy alone."""
    extreme = random_shape(rng, SHAPES, scale)
    if extreme is not None:
        return extreme
    R = int(rng.integers(1, scale.max_requests + 1)) if rng.random() < 0.9 else int(rng.integers(1, scale.request_tail + 1))
    cap = int(rng.choice([4, 16, 64, scale.max_query_len]))
    lengths = rng.integers(1, cap + 1, size=R).tolist()
    K = int(rng.choice([0, 1, 3, 7, 15])) if rng.random() < 0.6 else int(rng.integers(0, MAX_SPEC_TOKENS + 1))
    Q = 1 + K
    u = rng.random()
    bs = int(rng.choice(COMMON_BLOCK_SIZES)) if u < 0.7 else int(rng.choice(ODD_BLOCK_SIZES)) if u < 0.85 else int(rng.integers(1, MAX_BLOCK_SIZE + 1))
    width = int(rng.choice([1, 16, 32])) if rng.random() < 0.3 else int(rng.integers(1, 65))
    max_model_len = width * bs - int(rng.integers(0, bs))
    mode = rng.choice(["consecutive", "consecutive", "scrambled", "large"])
    base_kind = int(rng.integers(0, 3))
    reqs = []
    for n in lengths:
        if mode == "scrambled":
            positions = np.where(rng.random(n) < 0.5, rng.integers(0, max_model_len + 1, size=n),
                                 rng.integers(0, MAX_POSITION + 1, size=n)).astype(np.int64)  # fmt: skip
        else:
            if mode == "large":
                p0 = int(rng.integers(1 << 31, MAX_POSITION - n + 1))
            else:
                end = max(max_model_len - n, 0)
                p0 = int(rng.integers(0, end + 1)) if rng.random() < 0.7 else int(rng.integers(max(0, end - Q - 1), end + 1))
            positions = p0 + np.arange(n, dtype=np.int64)
        base = [int(rng.integers(0, 1 << 16)), int(rng.integers(INT32_MIN, INT32_MAX, endpoint=True)),
                int(rng.integers(1 << 27, INT32_MAX, endpoint=True))][base_kind]  # fmt: skip
        reqs.append({
            "positions": positions,
            "rejected": int(rng.integers(0, n)),
            "next": int(rng.integers(INT32_MIN, INT32_MAX, endpoint=True)),
            "row": block_row(base, int(rng.choice([1, 3, -1, 1000003])), width),
        })
    if rng.random() < 0.1:
        reqs[int(rng.integers(0, R))]["next"] = int(rng.choice([INT32_MIN, INT32_MAX]))
    launch: dict[str, int | None] = {"buffer_spare": None if rng.random() < 0.6 else int(rng.integers(1, 17))}
    if rng.random() < 0.5:
        max_tokens = vllm_max_tokens(lengths, K)
        block = int(rng.choice(allowed_blocks(R, max_tokens, scale)))
        need = cdiv(max_tokens, block)
        extra = int(rng.integers(0, 3)) if R * (need + 2) <= scale.max_programs else 0
        launch.update(triton_block_size=block, max_tokens_per_req=max_tokens + extra * block if extra else None)
    mask_id = 0 if rng.random() < 0.3 else int(rng.integers(INT32_MIN, INT32_MAX, endpoint=True))
    return build(reqs, has_num_rejected=bool(rng.integers(0, 2)), K=K, block_size=bs, mask_id=mask_id, launch=launch)
