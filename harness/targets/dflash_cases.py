"""Cases of ``copy_and_expand_dflash_inputs_kernel`` (docs/CONTRACT.md §9): building, the
Hypothesis strategy, the bulk NumPy generator and the shrink moves.

A case is built from per-request pieces (context positions, rejected count, bonus token,
block-table row) plus the batch's settings, so every generator and every shrink move yields an
in-contract case by construction: ``query_start_loc`` is the cumulative sum of the lengths,
``0 <= rejected <= qlen - 1``, ``num_query_per_req = 1 + K`` and ``total_input_tokens = T``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from hypothesis import strategies as st

from ..core.case import Case
from ..generation.strategies import (
    FLOAT32_EXACT,
    INT16_MAX,
    INT32_MAX,
    INT32_MIN,
    MAX_NUM_SEQS,
    POWERS_OF_TWO,
    SPEC_TOKENS,
    Scale,
    Shape,
    cdiv,
    draw_shape,
    int32s,
    next_power_of_2,
    query_start_loc_from,
    random_shape,
    request_counts,
)

NAME = "copy_and_expand_dflash_inputs_kernel"
MAX_POSITION = 1 << 62
"""Largest position the harness generates: ``p + Q`` never nears the int64 limit."""
MAX_SPEC_TOKENS = 32
MAX_BLOCK_SIZE = 1 << 24
MAX_SPARE = 1 << 16
COMMON_BLOCK_SIZES = (16, 1, 2, 32, 64, 128, 256)
ODD_BLOCK_SIZES = (3, 48, 528, 1056)  # hybrid models align attention blocks to other page sizes


def build(
    reqs: list[dict[str, Any]],
    *,
    has_num_rejected: bool,
    K: int,
    block_size: int,
    mask_id: int,
    launch: dict[str, int | None],
) -> Case:
    """The case of ``reqs`` (each: ``positions`` int64 array, ``rejected``, ``next`` and the
    block-table ``row``, all rows of one width) with the batch settings."""
    lengths = [len(q["positions"]) for q in reqs]
    qsl = query_start_loc_from(lengths)
    arrays = {
        "next_token_ids": np.array([q["next"] for q in reqs], dtype=np.int32),
        "target_positions": np.concatenate([q["positions"] for q in reqs]).astype(np.int64),
        "block_table": np.stack([np.asarray(q["row"], dtype=np.int32) for q in reqs]),
        "query_start_loc": qsl,
    }
    if has_num_rejected:
        arrays["num_rejected_tokens"] = np.array(
            [min(q["rejected"], n - 1) for q, n in zip(reqs, lengths, strict=True)], dtype=np.int32
        )
    return Case(
        kernel=NAME,
        arrays=arrays,
        scalars={
            "parallel_drafting_token_id": int(mask_id),
            "block_size": int(block_size),
            "num_query_per_req": 1 + int(K),
            "num_speculative_tokens": int(K),
            "total_input_tokens": int(qsl[-1]),
            "has_num_rejected": bool(has_num_rejected),
        },
        launch={k: launch.get(k) for k in ("triton_block_size", "max_tokens_per_req", "buffer_spare")},
    )


def requests_of(case: Case) -> list[dict[str, Any]]:
    """``case`` split into its per-request pieces (the inverse of :func:`build`)."""
    a = case.arrays
    qsl = a["query_start_loc"].astype(np.int64)
    rej = a.get("num_rejected_tokens")
    return [
        {
            "positions": a["target_positions"][qsl[r] : qsl[r + 1]],
            "rejected": 0 if rej is None else int(rej[r]),
            "next": int(a["next_token_ids"][r]),
            "row": a["block_table"][r],
        }
        for r in range(len(qsl) - 1)
    ]


def settings_of(case: Case) -> dict[str, Any]:
    s = case.scalars
    return {
        "has_num_rejected": bool(s["has_num_rejected"]),
        "K": int(s["num_speculative_tokens"]),
        "block_size": int(s["block_size"]),
        "mask_id": int(s["parallel_drafting_token_id"]),
        "launch": dict(case.launch),
    }


def vllm_max_tokens(lengths: list[int], K: int) -> int:
    """vLLM's ``max_tokens_per_req``: the longest request's context plus its ``1 + K`` queries."""
    return max(lengths) + 1 + K


def allowed_blocks(R: int, max_tokens: int, scale: Scale) -> list[int]:
    """Token-block sizes whose grid stays within ``scale.max_programs`` (vLLM's always allowed)."""
    vllm_block = min(256, next_power_of_2(max_tokens))
    ok = [b for b in POWERS_OF_TWO if R * cdiv(max_tokens, b) <= scale.max_programs]
    return ok or [vllm_block]


def block_row(base: int, step: int, width: int) -> np.ndarray:
    """A block-table row of distinct ids ``base, base + step, ...`` (wrapping in int32)."""
    return (np.int64(base) + np.int64(step) * np.arange(width, dtype=np.int64)).astype(np.int32)


# -- Hypothesis ---------------------------------------------------------------------------


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
def cases(draw: st.DrawFn, scale: Scale) -> Case:
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


# -- bulk (NumPy) -------------------------------------------------------------------------


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


# -- shrinking ----------------------------------------------------------------------------


def _rebuild(case: Case, reqs: list[dict[str, Any]], **overrides: Any) -> Case:
    """``case`` rebuilt from ``reqs``; a launch too small for the new batch falls back to vLLM's."""
    s = {**settings_of(case), **overrides}
    launch = dict(s["launch"])
    lengths = [len(q["positions"]) for q in reqs]
    if (launch.get("max_tokens_per_req") or 0) and launch["max_tokens_per_req"] < vllm_max_tokens(lengths, s["K"]):
        launch["max_tokens_per_req"] = None
    s["launch"] = launch
    return build(reqs, **s)


def alike(case: Case, k: int) -> Case:
    """``case`` with every request like request ``k`` (:meth:`Target.alike`)."""
    reqs = requests_of(case)
    if len(reqs) < 2 or not -len(reqs) <= k < len(reqs):
        return case
    return _rebuild(case, [reqs[k]] * len(reqs))


def shrink(case: Case) -> Iterator[Case]:
    """Smaller variants of ``case``: drop requests, shorten one, then simplify values and launch."""
    reqs = requests_of(case)
    R = len(reqs)
    if R > 1:
        yield _rebuild(case, reqs[: R // 2])
        yield _rebuild(case, reqs[R // 2 :])
        for r in range(R):
            yield _rebuild(case, reqs[:r] + reqs[r + 1 :])
    for r, q in enumerate(reqs):
        n = len(q["positions"])
        for new_n in sorted({1, n // 2, n - 1} - {0, n}):
            yield _rebuild(case, reqs[:r] + [{**q, "positions": q["positions"][:new_n]}] + reqs[r + 1 :])
        if q["rejected"]:
            yield _rebuild(case, reqs[:r] + [{**q, "rejected": 0}] + reqs[r + 1 :])
    s = settings_of(case)
    if any(v is not None for v in s["launch"].values()):
        yield _rebuild(case, reqs, launch={})
    for name, simple in (("has_num_rejected", False), ("K", 1), ("block_size", 16), ("mask_id", 0)):
        if s[name] != simple:
            yield _rebuild(case, reqs, **{name: simple})
    width = len(reqs[0]["row"])
    plain_rows = [{**q, "row": block_row(r * width, 1, width)} for r, q in enumerate(reqs)]
    if any(not np.array_equal(q["row"], p["row"]) for q, p in zip(reqs, plain_rows, strict=True)):
        yield _rebuild(case, plain_rows)
    plain = [{**q, "positions": np.arange(len(q["positions"]), dtype=np.int64), "next": 0} for q in reqs]
    if any(not np.array_equal(q["positions"], p["positions"]) or q["next"] for q, p in zip(reqs, plain, strict=True)):
        yield _rebuild(case, plain)


# -- production extremes: cheap-but-large shapes ------------------------------------------

VOCAB = 1 << 18
"""Vocabularies of 256k ids (Gemma, Llama 4, ...): ids past 65535."""


def _shape_case(rng: np.random.Generator, reqs: list[dict[str, Any]], K: int, bs: int) -> Case:
    """``reqs`` (positions and rows) with random rejected counts and 256k-vocabulary ids,
    launched as vLLM launches it."""
    for q in reqs:
        q.update(rejected=int(rng.integers(0, len(q["positions"]))), next=int(rng.integers(0, VOCAB)))
    return build(reqs, has_num_rejected=bool(rng.integers(0, 2)), K=K, block_size=bs,
                 mask_id=int(rng.integers(INT16_MAX * 2 + 2, VOCAB)), launch={})  # fmt: skip


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """max_model_len in the millions (past 2**24), W = cdiv(M, bs) as vLLM's table, K = 15-32:
    one or two requests ending near M (the query's block clamp), their last blocks' ids within
    2**16 slots of the int32 limit (the null block 0 elsewhere)."""
    bs = int(rng.choice([1056, 2112]))  # hybrid models' block sizes keep W near 16k
    M = FLOAT32_EXACT + int(rng.integers(4096, 1 << 16))
    W = cdiv(M, bs)
    top = (INT32_MAX - bs + 1) // bs
    reqs = []
    for _ in range(int(rng.integers(1, 3))):
        n = int(rng.integers(1, 65))
        row = np.zeros(W, dtype=np.int64)
        first = (M - 256) // bs
        row[first:] = rng.integers(top - 7, top, size=W - first, endpoint=True)
        p0 = M - n - int(rng.integers(0, 64))
        reqs.append({"positions": p0 + np.arange(n, dtype=np.int64), "row": row.astype(np.int32)})
    return _shape_case(rng, reqs, int(rng.integers(SPEC_TOKENS, MAX_SPEC_TOKENS + 1)), bs)


def _huge_offsets(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_batched_tokens of 32k and more: a prefill of 32768-33280 tokens and a short
    request (2 x 131 programs at most)."""
    M = int(rng.integers(1 << 16, 1 << 17))
    bs = int(rng.choice([64, 128, 256]))
    W = cdiv(M, bs)
    lengths = [int(rng.integers(INT16_MAX + 1, INT16_MAX + 514)), int(rng.integers(1, 17))]
    reqs = [{"positions": int(rng.integers(0, M - n + 1)) + np.arange(n, dtype=np.int64),
             "row": block_row(int(rng.integers(0, 1 << 16)), 1, W)} for n in rng.permutation(lengths)]  # fmt: skip
    return _shape_case(rng, reqs, int(rng.integers(1, 16)), bs)


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 requests of 1-3 tokens with K = 31-32 (R * Q past 32767)."""
    W = int(rng.integers(1, 5))
    M = W * 16 - int(rng.integers(0, 16))
    reqs = []
    for n in rng.integers(1, 4, size=int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65))).tolist():
        p0 = int(rng.integers(0, max(M - n, 0) + 1))
        reqs.append({"positions": p0 + np.arange(n, dtype=np.int64), "row": block_row(int(rng.integers(0, 1 << 20)), 1, W)})
    return _shape_case(rng, reqs, int(rng.integers(31, MAX_SPEC_TOKENS + 1)), 16)


SHAPES = (
    Shape("long_context", 2, _long_context),
    Shape("huge_offsets", 262, _huge_offsets),
    Shape("many_requests", MAX_NUM_SEQS + 64, _many_requests),
)
