"""How a case of ``copy_and_expand_dflash_inputs_kernel`` is laid out (docs/CONTRACT.md §9.1): built
from its requests (positions, a block-table row, rejected count, next token) and settings, and
split back into them.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    POWERS_OF_TWO,
    Scale,
    cdiv,
    next_power_of_2,
    query_start_loc_from,
)

NAME = "copy_and_expand_dflash_inputs_kernel"


MAX_POSITION = 1 << 62
"""Largest position the harness generates: ``p + Q`` never nears the int64 limit."""


MAX_SPEC_TOKENS = 32


MAX_BLOCK_SIZE = 1 << 24


MAX_SPARE = 1 << 16


COMMON_BLOCK_SIZES = (16, 1, 2, 32, 64, 128, 256)


ODD_BLOCK_SIZES = (3, 48, 528, 1056)  # hybrid models align attention blocks to other page sizes


VOCAB = 1 << 18
"""Vocabularies of 256k ids (Gemma, Llama 4, ...): ids past 65535."""


def build(
    reqs: list[dict[str, Any]],
    *,
    has_num_rejected: bool,
    K: int,
    block_size: int,
    mask_id: int,
    launch: dict[str, int | None],
    lookahead: int | None = None,
) -> Case:
    """The case of ``reqs`` (each: ``positions`` int64 array, ``rejected``, ``next`` and the
    block-table ``row``, all rows of one width) with the batch settings; ``lookahead``: the
    allocation's lookahead slots (``lookahead_tokens``; none: vLLM's ``K + 1``)."""
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
        } | ({} if lookahead is None else {"lookahead_tokens": int(lookahead)}),
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
        "lookahead": s.get("lookahead_tokens"),
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


def rebuild(case: Case, reqs: list[dict[str, Any]], **overrides: Any) -> Case:
    """``case`` rebuilt from ``reqs``; a launch too small for the new batch falls back to vLLM's."""
    s = {**settings_of(case), **overrides}
    launch = dict(s["launch"])
    lengths = [len(q["positions"]) for q in reqs]
    if (launch.get("max_tokens_per_req") or 0) and launch["max_tokens_per_req"] < vllm_max_tokens(lengths, s["K"]):
        launch["max_tokens_per_req"] = None
    s["launch"] = launch
    return build(reqs, **s)


class Layout:
    """Per-request quantities of §9.1 as int64 arrays (features, reports, output sizes)."""

    def __init__(self, case: Case) -> None:
        a, s = case.arrays, case.scalars
        qsl = a["query_start_loc"].astype(np.int64)
        self.qs, self.nqs = qsl[:-1], qsl[1:]
        self.qlen = self.nqs - self.qs
        self.R = len(self.qs)
        self.T = int(qsl[-1])
        self.K = int(s["num_speculative_tokens"])
        self.Q = int(s["num_query_per_req"])
        self.bs = int(s["block_size"])
        self.W = int(a["block_table"].shape[1])
        rej = a.get("num_rejected_tokens")
        self.rejected = np.zeros(self.R, dtype=np.int64) if rej is None else rej.astype(np.int64)
        self.max_query_len = int(self.qlen.max())
        launch = case.launch
        self.vllm_max_tokens = self.max_query_len + self.Q
        self.max_tokens = launch.get("max_tokens_per_req") or self.vllm_max_tokens
        self.block = launch.get("triton_block_size") or min(256, next_power_of_2(self.max_tokens))
        self.min_blocks = cdiv(self.vllm_max_tokens, self.block)
        self.blocks = cdiv(self.max_tokens, self.block)
        self.spare = int(launch.get("buffer_spare") or 0)
        self.positions = a["target_positions"].astype(np.int64)
        self.table = a["block_table"].astype(np.int64)

    @cached_property
    def query_positions(self) -> np.ndarray:
        """``[R, Q]``: position of every query slot."""
        last = self.positions[self.nqs - self.rejected - 1]
        return last[:, None] + 1 + np.arange(self.Q, dtype=np.int64)[None, :]

    @cached_property
    def context_request(self) -> np.ndarray:
        return np.repeat(np.arange(self.R), self.qlen)

    def blocks_of(self, positions: np.ndarray) -> np.ndarray:
        """Unclamped KV block numbers of (non-negative) positions."""
        return positions // self.bs

    @cached_property
    def slots(self) -> np.ndarray:
        """Every slot the kernel computes, context then query (for value features)."""
        req = np.concatenate([self.context_request, np.repeat(np.arange(self.R), self.Q)])
        pos = np.concatenate([self.positions, self.query_positions.reshape(-1)])
        col = np.minimum(self.blocks_of(pos), self.W - 1)
        return self.table[req, col] * self.bs + pos % self.bs

    @cached_property
    def read_block_ids(self) -> np.ndarray:
        req = np.concatenate([self.context_request, np.repeat(np.arange(self.R), self.Q)])
        pos = np.concatenate([self.positions, self.query_positions.reshape(-1)])
        return self.table[req, np.minimum(self.blocks_of(pos), self.W - 1)]
