"""The extended tier of ``copy_and_expand_eagle_inputs_kernel``: docs/CONTRACT.md §1.4.

Inputs vLLM's call sites do not produce where the kernel's behaviour is still defined: every
read and write stays inside its buffer and no two program instances write the same element
(otherwise the result would depend on their order). Edges: ``P = 0``; ``qe = qs - 1`` (nv = 0
without shift, -1 with it) and ``qe = qs - 2``; ``qe >= nqs``; empty requests (before the
last non-empty one); ``total_input_tokens`` other than ``len(target_token_ids)`` where every
read stays in bounds; grids that do not cover every slot. The oracles model all of them
(``slots_per_request`` for the grid).

Also here, by the rule that a draw outside a cited production precondition (§1.2) is
extended: shift with ``P = 1``, ``padding_token_id != 0``, negative ids and the int32
limits, positions that are not consecutive or pass ``max_model_len`` (near the int64 limits,
where ``p0 + j`` wraps), and launches other than vLLM's (other block sizes, padded grids).
:func:`_wide_body` draws them on otherwise production-shaped batches.
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
    INT64_MAX,
    INT64_MIN,
    INT64_NEAR_LIMITS,
    POWERS_OF_TWO,
    Scale,
    cdiv,
    next_power_of_2,
)
from ...targetkit.base import ContractViolation, require_arrays
from .layout import Layout, build, positions_from_starts, requests_of

FEATURES = {
    "p_zero": "P = 0: no bonus or parallel slot, no new-token index",
    "p_zero_shift": "P = 0 with shift: each request gets qlen - 1 slots, the grid covers max_query_len - 1",
    "nv_zero_without_shift": "qe = qs - 1 without shift (nv = 0): every input token rejected",
    "nv_negative": "nv < 0 (qe = qs - 1 with shift, qs - 2 without): no bonus slot",
    "qe_past_request": "qe >= nqs (a negative number of rejected tokens): valid reads cross into the next request",
    "empty_request": "a request without tokens: p0 is the next request's first position",
    "short_total_input_tokens": "total_input_tokens < len(target_token_ids): reads clamp to total_input_tokens - 1",
    "long_total_input_tokens": "total_input_tokens > len(target_token_ids) with every read in bounds",
    "partial_grid": "a grid that does not cover every slot: the tail slots (and map entries) stay untouched",
    "shift_with_p_1": "shift with P = 1 (vLLM takes its plain EAGLE path instead)",
    "nonzero_padding_id": "padding_token_id != 0 (vLLM passes the literal 0)",
    "negative_ids": "a negative token, next-token or parallel-drafting id",
    "int32_extreme_ids": "token ids at the int32 limits",
    "scrambled_positions": "positions are not consecutive within a request (only p0 is read)",
    "positions_wrap": "p0 + j wraps around the int64 limit",
    "custom_block": "a BLOCK_SIZE_TOKENS other than vLLM's",
    "block_of_1": "BLOCK_SIZE_TOKENS = 1",
    "padded_launch": "more token blocks than needed (extra programs write nothing)",
}


class EdgeLayout:
    """What each request reads and writes, from the contract's table (§1.1) and the grid."""

    def __init__(self, case: Case) -> None:
        b = Layout(case)
        self.base = b
        self.covered = b.blocks * b.block
        self.n = np.clip(b.total, 0, self.covered)  # slots written per request
        self.s = int(b.shift)


def validate(case: Case, inputs: dict) -> None:
    """The extended tier's rules (raises :class:`ContractViolation`)."""
    a, s = case.arrays, case.scalars
    require_arrays(a, inputs)
    for name in ("padding_token_id", "parallel_drafting_token_id", "total_input_tokens",
                 "num_padding_slots_per_request", "shift_input_ids"):
        if name not in s:
            raise ContractViolation(f"scalars.{name}", "is required")
    qsl, qel = a["query_start_loc"].astype(np.int64), a["query_end_loc"].astype(np.int64)
    R, T = len(qel), len(a["target_token_ids"])
    if R < 1:
        raise ContractViolation("arrays.query_end_loc", "needs at least one request")
    if len(qsl) != R + 1 or qsl[0] != 0 or np.any(np.diff(qsl) < 0):
        raise ContractViolation("arrays.query_start_loc", "must have len(query_end_loc) + 1 entries, start at 0 and never decrease (extended tier)")
    if qsl[-1] != T or len(a["target_positions"]) != T or T < 1:
        raise ContractViolation("arrays.query_start_loc", "last entry must equal len(target_token_ids) == len(target_positions) >= 1")
    if len(a["next_token_ids"]) != R:
        raise ContractViolation("arrays.next_token_ids", "must have one entry per request")
    if np.any(np.abs(qel) >= 2**30):
        raise ContractViolation("arrays.query_end_loc", "must stay below 2**30 in magnitude (extended tier)")
    P = s["num_padding_slots_per_request"]
    if not isinstance(P, int) or isinstance(P, bool) or not 0 <= P <= 64:
        raise ContractViolation("scalars.num_padding_slots_per_request", "must be an int from 0 to 64 (extended tier)")
    if not isinstance(s["shift_input_ids"], bool):
        raise ContractViolation("scalars.shift_input_ids", "must be true or false")
    for name in ("padding_token_id", "parallel_drafting_token_id"):
        v = s[name]
        if not isinstance(v, int) or isinstance(v, bool) or not INT32_MIN <= v <= INT32_MAX:
            raise ContractViolation(f"scalars.{name}", "must be an int32")
    tt = s["total_input_tokens"]
    if not isinstance(tt, int) or isinstance(tt, bool) or not 1 <= tt <= 2**30:
        raise ContractViolation("scalars.total_input_tokens", "must be an int from 1 to 2**30 (extended tier)")
    block, blocks = case.launch.get("block_size_tokens"), case.launch.get("num_blocks")
    if block is not None and block not in POWERS_OF_TWO:
        raise ContractViolation("launch.block_size_tokens", "must be null or a power of two from 1 to 256")
    if blocks is not None and (not isinstance(blocks, int) or isinstance(blocks, bool) or blocks < 1):
        raise ContractViolation("launch.num_blocks", "must be null or an int >= 1 (extended tier)")
    if int(np.diff(qsl).max()) + P - int(s["shift_input_ids"]) < 1:
        raise ContractViolation("scalars.num_padding_slots_per_request", "max_query_len + P - shift must be >= 1 (vLLM's launch divides by it)")
    _check_accesses(case, EdgeLayout(case))


def _check_accesses(case: Case, lay: EdgeLayout) -> None:
    """Every read and write in bounds; no element written by two requests."""
    b, n = lay.base, lay.n
    tokens, positions = len(case.arrays["target_token_ids"]), len(case.arrays["target_positions"])
    T1 = int(case.scalars["total_input_tokens"]) - 1
    nonrej = np.minimum(n, np.maximum(b.nv + b.P, 0)) > 0  # some slot j < nv + P is written
    if np.any(nonrej & ((b.qs < 0) | (b.qs >= positions))):
        r = int(np.flatnonzero(nonrej & (b.qs >= positions))[0])
        raise ContractViolation("arrays.query_start_loc", f"request {r} reads p0 = target_positions[{int(b.qs[r])}] past the buffer (an empty last request)")
    reads = np.minimum(n, np.maximum(b.nv, 0))  # valid slots written
    last = np.minimum(b.qs + lay.s + reads - 1, T1)
    if np.any((reads > 0) & (last >= tokens)):
        raise ContractViolation("scalars.total_input_tokens", "valid reads would pass the end of target_token_ids")
    starts, ends = b.out_start[n > 0], (b.out_start + n)[n > 0]
    if np.any(starts < 0):
        raise ContractViolation("arrays.query_start_loc", "a request's output range starts before the buffer")
    order = np.argsort(starts, kind="stable")
    if np.any(starts[order][1:] < ends[order][:-1]):
        raise ContractViolation("arrays.query_start_loc", "two requests write the same output slot (order-dependent: undefined)")


def features_of(case: Case) -> frozenset[str]:
    lay = EdgeLayout(case)
    b = lay.base
    f = set()
    if b.P == 0:
        f.add("p_zero_shift" if b.shift else "p_zero")
    if not b.shift and np.any((b.nv == 0) & (b.qlen > 0)):
        f.add("nv_zero_without_shift")
    if np.any((b.nv < 0) & (b.qlen > 0)):
        f.add("nv_negative")
    if np.any(b.qe >= b.nqs):
        f.add("qe_past_request")
    if np.any(b.qlen == 0):
        f.add("empty_request")
    T = len(case.arrays["target_token_ids"])
    tt = case.scalars["total_input_tokens"]
    if tt < T:
        f.add("short_total_input_tokens")
    if tt > T:
        f.add("long_total_input_tokens")
    if np.any(np.maximum(b.total, 0) > lay.covered) or (b.shift and np.any(b.qlen > lay.covered)):
        f.add("partial_grid")
    s = case.scalars
    if b.shift and b.P == 1:
        f.add("shift_with_p_1")
    if s["padding_token_id"] != 0:
        f.add("nonzero_padding_id")
    ids = np.concatenate([case.arrays["target_token_ids"], case.arrays["next_token_ids"]])
    if np.any(ids < 0) or s["parallel_drafting_token_id"] < 0:
        f.add("negative_ids")
    if np.any((ids == INT32_MIN) | (ids == INT32_MAX)):
        f.add("int32_extreme_ids")
    pos = case.arrays["target_positions"]
    if b.R and len(pos) and np.all(b.qs < len(pos)):
        p0 = pos[b.qs].astype(object)
        if any(int(p) + int(t) - 1 > INT64_MAX for p, t in zip(p0, b.total, strict=True)):
            f.add("positions_wrap")
        if np.all(b.qlen > 0) and not np.array_equal(positions_from_starts(pos[b.qs], b.qlen.tolist()), pos):
            f.add("scrambled_positions")
    if case.launch.get("block_size_tokens") not in (None, b.vllm_block):
        f.add("custom_block")
    if b.block == 1:
        f.add("block_of_1")
    if b.blocks > b.min_blocks:
        f.add("padded_launch")
    return frozenset(f)


def _allowed_blocks(R: int, max_tokens: int, scale: Scale) -> list[int]:
    vllm_block = min(256, next_power_of_2(max_tokens))
    ok = [b for b in POWERS_OF_TWO if R * cdiv(max_tokens, b) <= scale.max_programs]
    return ok or [vllm_block]


def _wide_launch(c: Chooser, lengths: list[int], P: int, shift: bool, scale: Scale) -> dict[str, int | None]:
    """vLLM's own launch half the time, else a block size the scale affords (one slot per
    program a fifth of the time it is affordable) and a grid padded by up to two blocks."""
    max_tokens = max(lengths) + P - int(shift)
    if not c.boolean():
        return {"block_size_tokens": None, "num_blocks": None}
    allowed = _allowed_blocks(len(lengths), max_tokens, scale)
    block = 1 if allowed[0] == 1 and c.chance(0.2) else c.choice(allowed)
    need = cdiv(max_tokens, block)
    budget = max(0, scale.max_programs // len(lengths) - need)
    extra = c.integer(0, min(2, budget))
    return {"block_size_tokens": block, "num_blocks": need + extra if extra else None}


def _wide_request(c: Chooser, cap: int, consecutive: bool) -> dict[str, Any]:
    n = c.integer(1, cap)
    if consecutive:
        ranges = (*INT64_NEAR_LIMITS, (INT64_MAX - 8, INT64_MAX))  # the last: p0 + j wraps
        positions = positions_from_starts(np.array([c.integer_of(ranges)], dtype=np.int64), [n])
    else:
        positions = c.array_of(np.int64, n, INT64_NEAR_LIMITS)
    return {
        "tokens": c.array(np.int32, n, INT32_MIN, INT32_MAX),
        "positions": positions,
        "rejected": c.integer(0, n - 1),
        "next": c.integer(INT32_MIN, INT32_MAX),
    }


def _wide_body(c: Chooser, scale: Scale) -> Case:
    """A production-shaped batch with the draws outside §1.2's cited preconditions: P from 1
    with shift, ids anywhere in int32, any ``padding_token_id``, positions consecutive or not
    near the int64 limits too, launches other than vLLM's that cover every slot."""
    shift = c.boolean()
    P = 1 if shift and c.chance(0.3) else c.integer(1, 8)
    R = c.integer(1, min(scale.max_requests, 16))
    cap = c.choice(sorted({4, 16, 64, scale.max_query_len}))
    consecutive = c.boolean()
    reqs = c.repeat(R, lambda c: _wide_request(c, cap, consecutive))
    lengths = [len(q["tokens"]) for q in reqs]
    return build(
        lengths,
        [q["rejected"] for q in reqs],
        shift=shift,
        P=P,
        token_ids=np.concatenate([q["tokens"] for q in reqs]),
        positions=np.concatenate([q["positions"] for q in reqs]),
        next_ids=np.array([q["next"] for q in reqs], dtype=np.int32),
        padding_id=c.integer_of([(1, 1 << 18), (INT32_MIN, INT32_MAX)]),
        parallel_id=c.integer(INT32_MIN, INT32_MAX),
        launch=_wide_launch(c, lengths, P, shift, scale),
    )


def _body(c: Chooser, scale: Scale) -> Case:
    if c.chance(0.4):
        return _wide_body(c, scale)
    shift = c.chance(0.5)
    P = 0 if c.chance(0.3) else c.integer(1, 6)
    R = c.integer(1, min(scale.max_requests, 8))
    cap = c.choice([4, 16, 64])
    lengths = [c.integer(1, cap) for _ in range(R)]
    empty_ok = not (shift and P == 0)
    for r in range(R - 1):  # the last request keeps its tokens: an empty one would read p0 past the end
        if empty_ok and c.chance(0.25):
            lengths[r] = 0
    if shift and P == 0 and max(lengths) < 2:
        lengths[-1] = 2
    rejected = []
    for n in lengths:
        kind = c.choice(["some", "all", "all_and_one", "negative"]) if c.chance(0.6) else "some"
        if n == 0 or kind == "some":
            rejected.append(c.integer(0, max(n - 1, 0)))
        elif kind == "all":
            rejected.append(n)  # qe = qs - 1
        elif kind == "all_and_one":
            rejected.append(n + 1)  # qe = qs - 2
        else:
            rejected.append(-c.integer(1, 3))  # qe >= nqs
    T = sum(lengths)
    max_tokens = max(lengths) + P - int(shift)
    launch: dict[str, int | None] = {"block_size_tokens": None, "num_blocks": None}
    if max_tokens >= 2 and c.chance(0.35):  # a grid that stops short of the longest request
        block = c.choice([b for b in POWERS_OF_TWO if b < max_tokens])
        need = cdiv(max_tokens, block)
        launch = {"block_size_tokens": block, "num_blocks": c.integer(1, need - 1) if need > 1 else None}
    case = build(
        lengths,
        rejected,
        shift=shift,
        P=P,
        token_ids=c.array(np.int32, T, INT32_MIN, INT32_MAX),
        positions=c.array(np.int64, T, 0, 1 << 20) if c.chance(0.8) else c.array(np.int64, T, INT64_MIN, INT64_MAX),
        next_ids=c.array(np.int32, R, INT32_MIN, INT32_MAX),
        padding_id=c.integer_of([(0, 0), (INT32_MIN, INT32_MAX)]),
        parallel_id=c.integer(INT32_MIN, INT32_MAX),
        launch=launch,
    )
    if c.chance(0.3):  # total_input_tokens other than T, where every read stays in bounds
        tt = c.integer(1, T) if c.chance(0.7) else T + c.integer(1, 8)
        alt = case.replace(scalars={"total_input_tokens": tt})
        try:
            _check_accesses(alt, EdgeLayout(alt))
            case = alt
        except ContractViolation:
            pass
    return case


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return _body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(_body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Edge-preserving moves the production ones lack: ``total_input_tokens`` back to ``T``,
    vLLM's launch, and each request given back its tokens (an empty request dropped)."""
    T = len(case.arrays["target_token_ids"])
    if case.scalars["total_input_tokens"] != T:
        yield case.replace(scalars={"total_input_tokens": T})
    if case.launch.get("num_blocks") is not None or case.launch.get("block_size_tokens") is not None:
        yield case.replace(launch={"block_size_tokens": None, "num_blocks": None})
    block, blocks = case.launch.get("block_size_tokens"), case.launch.get("num_blocks")
    if block is not None and blocks is not None and block > 1:  # a smaller partial grid
        yield case.replace(launch={"block_size_tokens": block // 2})
    for name in ("parallel_drafting_token_id", "padding_token_id"):
        if case.scalars[name] != 0:
            yield case.replace(scalars={name: 0})
    reqs = requests_of(case)
    for r, q in enumerate(reqs):
        if len(q["tokens"]) == 0 and len(reqs) > 1:
            yield _rebuild_raw(case, reqs[:r] + reqs[r + 1 :])
        n = len(q["tokens"])
        for m in sorted({1, n // 2, n - 1} - {0, n}):  # shorter, qe - qs kept (the edge with it)
            short = {**q, "tokens": q["tokens"][:m], "positions": q["positions"][:m], "rejected": q["rejected"] - (n - m)}
            yield _rebuild_raw(case, reqs[:r] + [short] + reqs[r + 1 :])
        if q["rejected"] != 0:
            yield _rebuild_raw(case, reqs[:r] + [{**q, "rejected": 0}] + reqs[r + 1 :])
    plain = [{**q, "tokens": np.zeros_like(q["tokens"]), "next": 0,
              "positions": np.arange(len(q["positions"]), dtype=np.int64)} for q in reqs]
    if any(np.any(q["tokens"]) or q["next"] or np.any(q["positions"] != p["positions"]) for q, p in zip(reqs, plain, strict=True)):
        yield _rebuild_raw(case, plain)


def _rebuild_raw(case: Case, reqs: list[dict[str, Any]]) -> Case:
    """``case`` rebuilt from per-request pieces, rejected counts as given (edges kept)."""
    s = case.scalars
    lengths = [len(q["tokens"]) for q in reqs]
    new = build(
        lengths,
        [q["rejected"] for q in reqs],
        shift=s["shift_input_ids"],
        P=s["num_padding_slots_per_request"],
        token_ids=np.concatenate([q["tokens"] for q in reqs]).astype(np.int32),
        positions=np.concatenate([q["positions"] for q in reqs]).astype(np.int64),
        next_ids=np.array([q["next"] for q in reqs], dtype=np.int32),
        padding_id=s["padding_token_id"],
        parallel_id=s["parallel_drafting_token_id"],
        launch=dict(case.launch),
    )
    blocks = new.launch.get("num_blocks")
    if blocks is not None and blocks >= EdgeLayout(new).base.min_blocks:
        new = new.replace(launch={"num_blocks": None})  # the grid covers every slot now: vLLM's count
    T = len(case.arrays["target_token_ids"])
    if s["total_input_tokens"] != T:
        new = new.replace(scalars={"total_input_tokens": min(s["total_input_tokens"], max(len(new.arrays["target_token_ids"]), 1))})
    return new
