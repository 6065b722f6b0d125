"""The production tier of ``copy_and_expand_eagle_inputs_kernel`` (docs/CONTRACT.md §1.2): in-contract
cases by construction, for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import (
    INT32_MAX,
    INT32_MIN,
    INT64_NEAR_LIMITS,
    POWERS_OF_TWO,
    Scale,
    cdiv,
    next_power_of_2,
    request_count_ranges,
)
from .layout import build, positions_from_starts


def _allowed_blocks(R: int, max_tokens: int, scale: Scale) -> list[int]:
    vllm_block = min(256, next_power_of_2(max_tokens))
    ok = [b for b in POWERS_OF_TWO if R * cdiv(max_tokens, b) <= scale.max_programs]
    return ok or [vllm_block]


def _launch(c: Chooser, lengths: list[int], P: int, shift: bool, scale: Scale) -> dict[str, int | None]:
    """vLLM's own launch half the time (where shrinking heads), else a block size the scale
    affords (one slot per program a fifth of the time it is affordable) and a grid padded by up
    to two blocks."""
    max_tokens = max(lengths) + P - int(shift)
    if not c.boolean():
        return {"block_size_tokens": None, "num_blocks": None}
    allowed = _allowed_blocks(len(lengths), max_tokens, scale)
    block = 1 if allowed[0] == 1 and c.chance(0.2) else c.choice(allowed)
    need = cdiv(max_tokens, block)
    budget = max(0, scale.max_programs // len(lengths) - need)
    extra = c.integer(0, min(2, budget))
    return {"block_size_tokens": block, "num_blocks": need + extra if extra else None}


def _padding_slots(c: Chooser, shift: bool) -> int:
    """P from 1 to 8. With shift, vLLM uses P >= 2: P = 1 is drawn 1 time in 8 and shrinks to 2."""
    return c.choice([2, 3, 4, 5, 6, 7, 8, 1]) if shift else c.integer(1, 8)


def _request(c: Chooser, cap: int, consecutive: bool) -> dict[str, Any]:
    """One request's own draws, together, so shrinking drops a request with its data."""
    n = c.integer(1, cap)
    if consecutive:
        positions = positions_from_starts(np.array([c.integer_of(INT64_NEAR_LIMITS)], dtype=np.int64), [n])
    else:
        positions = c.array_of(np.int64, n, INT64_NEAR_LIMITS)
    return {
        "tokens": c.array(np.int32, n, INT32_MIN, INT32_MAX),
        "positions": positions,
        "rejected": c.integer(0, n - 1),
        "next": c.integer(INT32_MIN, INT32_MAX),
    }


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §1.2): shift on or off, P from 1 to 8, a
    few to a few hundred requests of up to ``scale.max_query_len`` tokens, ids anywhere in
    int32, positions consecutive or not (only each request's first is read) near the int64
    limits too, vLLM's launch or another grid that covers every slot."""
    shift = c.boolean()
    P = _padding_slots(c, shift)
    R = c.integer_of(request_count_ranges(scale))
    cap = c.choice(sorted({4, 16, 64, scale.max_query_len}))
    consecutive = c.boolean()
    reqs = c.repeat(R, lambda c: _request(c, cap, consecutive))
    lengths = [len(q["tokens"]) for q in reqs]
    return build(
        lengths,
        [q["rejected"] for q in reqs],
        shift=shift,
        P=P,
        token_ids=np.concatenate([q["tokens"] for q in reqs]),
        positions=np.concatenate([q["positions"] for q in reqs]),
        next_ids=np.array([q["next"] for q in reqs], dtype=np.int32),
        padding_id=c.integer_of([(0, 0), (INT32_MIN, INT32_MAX)]),
        parallel_id=c.integer(INT32_MIN, INT32_MAX),
        launch=_launch(c, lengths, P, shift, scale),
    )
