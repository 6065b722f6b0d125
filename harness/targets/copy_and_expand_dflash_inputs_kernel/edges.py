"""The extended tier of ``copy_and_expand_dflash_inputs_kernel``: docs/CONTRACT.md §9.4.

Inputs DFlash's first pass does not hand the kernel where every read stays in its buffer (§9.1
defines them): launches other than vLLM's, any int32 ids and block-table entries (negative ones,
slots past 2**31), positions that decrease or pass 2**31, query positions past the table (the
block-number clamp engages), block sizes vLLM does not use, and an allocation whose lookahead
is short of vLLM's ``K + 1`` (``lookahead_tokens``): query slots in columns past the request's
allocated blocks (PR #42971, PR #54296's class).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import (
    INT32_MAX,
    INT32_MIN,
    Scale,
    cdiv,
    next_power_of_2,
    request_count_ranges,
)
from .layout import (
    COMMON_BLOCK_SIZES,
    MAX_BLOCK_SIZE,
    MAX_POSITION,
    MAX_SPEC_TOKENS,
    ODD_BLOCK_SIZES,
    Layout,
    allowed_blocks,
    block_row,
    build,
    rebuild,
    requests_of,
    vllm_max_tokens,
)

FEATURES = {
    "custom_block": "a triton_block_size other than vLLM's",
    "block_of_1": "triton_block_size = 1",
    "padded_launch": "more token blocks than needed (extra programs write nothing)",
    "query_block_clamp": "a query position's KV block number exceeds W - 1 (clamped to the row's last entry)",
    "context_block_clamp": "a context position's KV block number exceeds W - 1 (outside vLLM's positions)",
    "slot_beyond_int32": "a slot above 2**31 - 1 (the int64 arithmetic matters)",
    "negative_block_ids": "a block-table entry read is negative",
    "scrambled_positions": "positions that decrease within a request",
    "large_positions": "positions of 2**31 and beyond",
    "int32_extreme_ids": "a next-token or mask id at the int32 limits",
    "negative_ids": "a negative next-token or mask id",
    "other_block_size": "a block size vLLM does not use (neither a power of two nor a multiple of 16)",
    "query_past_allocation": "a query slot in a block column at or past the request's allocated blocks "
                             "(lookahead_tokens < K + 1: PR #42971, PR #54296's class)",
}


def allocated_blocks(case: Case) -> np.ndarray:
    """Per request, the blocks the scheduler allocated (docs/CONTRACT.md §9.2): its tokens up to
    its last (largest) context position plus ``lookahead_tokens`` (vLLM's ``K + 1`` when the case has
    none) lookahead slots, within the table."""
    a, s = case.arrays, case.scalars
    qsl = a["query_start_loc"].astype(np.int64)
    last = np.maximum.reduceat(a["target_positions"].astype(np.int64), qsl[:-1])  # every request has a token
    lookahead = int(s.get("lookahead_tokens", s["num_speculative_tokens"] + 1))
    W, bs = a["block_table"].shape[1], int(s["block_size"])
    return np.minimum((last + lookahead) // bs + 1, W)


def features_of(case: Case) -> frozenset[str]:
    lay = Layout(case)
    s, launch = case.scalars, case.launch
    ids = np.append(case.arrays["next_token_ids"].astype(np.int64), s["parallel_drafting_token_id"])
    inside = np.arange(lay.T) - np.repeat(lay.qs, lay.qlen) > 0
    q_blocks = np.minimum(lay.blocks_of(lay.query_positions), lay.W - 1)
    alloc = allocated_blocks(case)
    checks = {
        "custom_block": launch.get("triton_block_size") not in (None, min(256, next_power_of_2(lay.max_tokens))),
        "block_of_1": lay.block == 1,
        "padded_launch": lay.blocks > lay.min_blocks,
        "query_block_clamp": bool(np.any(lay.blocks_of(lay.query_positions) > lay.W - 1)),
        "context_block_clamp": bool(np.any(lay.blocks_of(lay.positions) > lay.W - 1)),
        "slot_beyond_int32": bool(np.any(lay.slots > INT32_MAX)),
        "negative_block_ids": bool(np.any(lay.read_block_ids < 0)),
        "scrambled_positions": bool(np.any(np.diff(lay.positions, prepend=0)[inside] < 0)),
        "large_positions": bool(np.any(lay.positions > INT32_MAX)),
        "int32_extreme_ids": bool(np.any((ids == INT32_MIN) | (ids == INT32_MAX))),
        "negative_ids": bool(np.any(ids < 0)),
        "other_block_size": not (lay.bs & (lay.bs - 1) == 0 or lay.bs % 16 == 0),
        "query_past_allocation": bool(np.any(q_blocks >= alloc[:, None])),
    }
    return frozenset(k for k, ok in checks.items() if ok)


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


def _wide_body(c: Chooser, scale: Scale) -> Case:
    """Anything §9.1 defines, either variant: up to 32 speculative tokens, common, odd or any
    block sizes, block tables as wide as the model length needs, positions consecutive (some
    ending at the model length: the query's block clamp), scrambled or large, block ids small,
    any or with slots past 2**31, vLLM's launch or another that covers every slot."""
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


def _body(c: Chooser, scale: Scale) -> Case:
    case = _wide_body(c, scale)
    if c.chance(0.5):  # an allocation short of vLLM's K + 1 lookahead, the first context ending a block
        K, bs = case.scalars["num_speculative_tokens"], case.scalars["block_size"]
        a = case.arrays
        qsl = a["query_start_loc"].astype(np.int64)
        pos = a["target_positions"].astype(np.int64)
        top = int(pos[qsl[0] : qsl[1]].max())
        shift = bs - 1 - top % bs
        arrays = {}
        if int(pos.max()) + shift + K + 1 <= MAX_POSITION:
            arrays["target_positions"] = pos + shift
        case = case.replace(arrays=arrays, scalars={"lookahead_tokens": 0 if c.chance(0.6) else c.integer(0, K)})
    return case


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return _body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(_body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """vLLM's launch; small block ids; positions from 0."""
    reqs = requests_of(case)
    if case.launch.get("triton_block_size") is not None or case.launch.get("max_tokens_per_req") is not None:
        yield rebuild(case, reqs, launch={"buffer_spare": case.launch.get("buffer_spare")})
    small = [dict(q, row=np.arange(len(q["row"]), dtype=np.int32)) for q in reqs]
    if any(not np.array_equal(q["row"], p["row"]) for q, p in zip(reqs, small, strict=True)):
        yield rebuild(case, small)
