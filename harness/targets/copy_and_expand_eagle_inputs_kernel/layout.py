"""How a case of ``copy_and_expand_eagle_inputs_kernel`` is laid out (docs/CONTRACT.md §1.1):
built from its requests, split back into them, and each request's quantities of the contract's
table; what the other files of this folder build on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import cdiv, next_power_of_2, query_start_loc_from

NAME = "copy_and_expand_eagle_inputs_kernel"

MAX_MODEL_LEN = 2**31
"""The largest ``max_model_len`` of the production tier: every written position is below it
(vLLM's token counts are int32; the drafter runs only while its positions fit)."""


I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)


SLOT_OUTPUTS = ("out_input_ids", "out_positions", "out_is_rejected_token_mask", "out_is_masked_token_mask")


def positions_from_starts(starts: np.ndarray, lengths: list[int]) -> np.ndarray:
    """Consecutive int64 positions per request, ``start, start+1, ...``, wrapping at the limits."""
    lens = np.asarray(lengths, dtype=np.int64)
    local = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
    with np.errstate(over="ignore"):
        return (np.repeat(starts.astype(np.int64), lens) + local).astype(np.int64)


class Layout:
    """Per-request quantities of the contract table, as int64 arrays (for reports/features)."""

    def __init__(self, case: Case) -> None:
        qsl = case.arrays["query_start_loc"].astype(np.int64)
        self.qs, self.nqs = qsl[:-1], qsl[1:]
        self.qe = case.arrays["query_end_loc"].astype(np.int64)
        self.R = len(self.qe)
        self.P = int(case.scalars["num_padding_slots_per_request"])
        self.shift = bool(case.scalars["shift_input_ids"])
        self.qlen = self.nqs - self.qs
        self.nv = self.qe - self.qs + (0 if self.shift else 1)
        r = np.arange(self.R, dtype=np.int64)
        self.out_start = self.qs + r * (self.P - int(self.shift))
        self.rejected = self.nqs - self.qe - 1
        self.total = self.nv + self.P + self.rejected
        self.max_query_len = int(self.qlen.max()) if self.R else 0
        self.max_tokens = self.max_query_len + self.P - int(self.shift)
        block = case.launch.get("block_size_tokens")
        self.vllm_block = min(256, next_power_of_2(self.max_tokens))
        self.block = self.vllm_block if block is None else int(block)
        blocks = case.launch.get("num_blocks")
        self.min_blocks = cdiv(self.max_tokens, self.block)
        self.blocks = self.min_blocks if blocks is None else int(blocks)


def build(
    lengths: list[int],
    rejected: list[int],
    *,
    shift: bool,
    P: int,
    token_ids: np.ndarray,
    positions: np.ndarray,
    next_ids: np.ndarray,
    padding_id: int,
    parallel_id: int,
    launch: dict[str, int | None],
) -> Case:
    qsl = query_start_loc_from(lengths)
    qel = (qsl[1:] - 1 - np.asarray(rejected, dtype=np.int32)).astype(np.int32)
    return Case(
        kernel=NAME,
        arrays={
            "target_token_ids": token_ids.astype(np.int32),
            "target_positions": positions.astype(np.int64),
            "next_token_ids": next_ids.astype(np.int32),
            "query_start_loc": qsl,
            "query_end_loc": qel,
        },
        scalars={
            "padding_token_id": int(padding_id),
            "parallel_drafting_token_id": int(parallel_id),
            "total_input_tokens": int(qsl[-1]),
            "num_padding_slots_per_request": int(P),
            "shift_input_ids": bool(shift),
        },
        launch=launch,
    )


def requests_of(case: Case) -> list[dict[str, Any]]:
    """The case split per request: its tokens, positions, rejected count and next token."""
    qsl = case.arrays["query_start_loc"].astype(np.int64)
    qel = case.arrays["query_end_loc"].astype(np.int64)
    out = []
    for r in range(len(qel)):
        lo, hi = int(qsl[r]), int(qsl[r + 1])
        out.append(
            {
                "tokens": case.arrays["target_token_ids"][lo:hi],
                "positions": case.arrays["target_positions"][lo:hi],
                "rejected": int(hi - qel[r] - 1),
                "next": case.arrays["next_token_ids"][r],
            }
        )
    return out


def rebuild(case: Case, reqs: list[dict[str, Any]], **overrides: Any) -> Case:
    """``case`` rebuilt from per-request pieces; an explicit grid too small for it is dropped."""
    s = {**case.scalars, **overrides.get("scalars", {})}
    lengths = [len(q["tokens"]) for q in reqs]
    new = build(
        lengths,
        [min(q["rejected"], n - 1) for q, n in zip(reqs, lengths, strict=True)],
        shift=s["shift_input_ids"],
        P=s["num_padding_slots_per_request"],
        token_ids=np.concatenate([q["tokens"] for q in reqs]).astype(np.int32),
        positions=np.concatenate([q["positions"] for q in reqs]).astype(np.int64),
        next_ids=np.array([q["next"] for q in reqs], dtype=np.int32),
        padding_id=s["padding_token_id"],
        parallel_id=s["parallel_drafting_token_id"],
        launch=dict(overrides.get("launch", case.launch)),
    )
    blocks = new.launch.get("num_blocks")
    if blocks is not None and blocks < Layout(new).min_blocks:
        new = new.replace(launch={"num_blocks": None})
    return new
