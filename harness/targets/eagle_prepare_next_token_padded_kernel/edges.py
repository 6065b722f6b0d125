"""The extended tier of ``eagle_prepare_next_token_padded_kernel``: docs/CONTRACT.md §3.4.

Inputs vLLM's call sites do not produce where the kernel is still defined (every read inside
its buffer): ``-1`` inside a row, ids below ``-1``, ``BLOCK_SIZE_TOKENS < S``, ``S = 0`` (with
an explicit block: vLLM's ``next_power_of_2(0)`` is 0, which no kernel launches with) and
``vocab_size <= 0``. The oracles compute §3.1 on them unchanged: the first
``min(S, BLOCK_SIZE_TOKENS)`` columns are read, a column is valid when ``id != -1`` and
``id < vocab_size`` (signed).

Also here, by the rule that a draw outside a cited production precondition (§3.2) is
extended: ids at or past ``vocab_size`` (anywhere in a row, before a valid one too: issue
22's example), a kept row of ``-1`` only (vLLM's own test has one; its sampler never writes
one), rows wider than ``S`` (a row stride past ``S``), backup ids outside the vocabulary,
blocks larger than vLLM's and padded grids. :func:`_wide_body` draws them.
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
    POWERS_OF_TWO,
    Scale,
    next_power_of_2,
)
from ...targetkit.base import ContractViolation
from .layout import MAX_EXTENDED_S, build

FEATURES = {
    "minus_one_inside": "a kept row with -1 before a later id: that column does not count, later ones do",
    "id_below_minus_one": "an id below -1 in a kept row: valid (signed compare), it may become the next token",
    "block_below_s": "BLOCK_SIZE_TOKENS < S: only the first BLOCK_SIZE_TOKENS columns are read",
    "no_column": "S = 0: no column is read, the backup is used",
    "vocab_not_positive": "vocab_size <= 0: only negative ids other than -1 are valid",
    "no_valid_token": "a kept request with no valid column: the backup is used",
    "id_equals_vocab": "an id equal to vocab_size (invalid)",
    "id_above_vocab": "an id above vocab_size (invalid)",
    "invalid_before_valid": "a kept row with an invalid id (>= vocab_size) before a valid one",
    "id_at_int32_max": "an id of 2**31-1 in a kept request (the int32 limit)",
    "strided_rows": "row stride larger than S (junk columns must be ignored)",
    "custom_block": "BLOCK_SIZE_TOKENS larger than next_power_of_2(S)",
    "padded_launch": "a grid larger than num_reqs (extra programs write nothing)",
    "backup_outside_vocab": "a backup id outside [0, vocab_size) (-1 and the int32 limits included)",
}


def validate(case: Case, inputs: dict) -> None:
    """The extended tier's rules (raises :class:`ContractViolation`)."""
    a, s = case.arrays, case.scalars
    for name, dtype in inputs.items():
        if name not in a:
            raise ContractViolation(f"arrays.{name}", "is required")
        if a[name].dtype != dtype:
            raise ContractViolation(f"arrays.{name}", f"must be a {dtype} array")
    for name in ("vocab_size", "num_sampled_tokens_per_req", "num_reqs"):
        v = s.get(name)
        if not isinstance(v, int) or isinstance(v, bool):
            raise ContractViolation(f"scalars.{name}", "must be an int")
    R, S, vocab = s["num_reqs"], s["num_sampled_tokens_per_req"], s["vocab_size"]
    ids = a["sampled_token_ids"]
    if R < 1:
        raise ContractViolation("scalars.num_reqs", "must be >= 1")
    if ids.ndim != 2 or ids.shape[0] != R or ids.shape[1] < 1:
        raise ContractViolation("arrays.sampled_token_ids", "must be 2-D with num_reqs rows and at least one column")
    if not 0 <= S <= MAX_EXTENDED_S:
        raise ContractViolation("scalars.num_sampled_tokens_per_req", f"must be from 0 to {MAX_EXTENDED_S} "
                                "(extended tier; a larger one asks for a block no backend may launch)")
    if S > ids.shape[1]:
        raise ContractViolation("scalars.num_sampled_tokens_per_req", "must be from 0 to the row stride (extended tier)")
    if not INT32_MIN <= vocab <= INT32_MAX:
        raise ContractViolation("scalars.vocab_size", "must be an int32 (extended tier)")
    for name in ("discard_request_mask", "backup_next_token_ids"):
        if a[name].ndim != 1 or len(a[name]) < R:
            raise ContractViolation(f"arrays.{name}", "must be 1-D with at least num_reqs entries")
    block = case.launch.get("block_size_tokens")
    if block is None and S == 0:
        raise ContractViolation("launch.block_size_tokens", "must be given when S = 0 (next_power_of_2(0) is 0)")
    if block is not None and block not in POWERS_OF_TWO:
        raise ContractViolation("launch.block_size_tokens", "must be null or a power of two from 1 to 256")
    grid = case.launch.get("grid_size")
    if grid is not None and (not isinstance(grid, int) or isinstance(grid, bool) or grid < R):
        raise ContractViolation("launch.grid_size", "must be null or an int >= num_reqs")


def features_of(case: Case) -> frozenset[str]:
    s = case.scalars
    R, S, vocab = s["num_reqs"], s["num_sampled_tokens_per_req"], s["vocab_size"]
    head = case.arrays["sampled_token_ids"][:, :S].astype(np.int64)
    kept = ~case.arrays["discard_request_mask"][:R]
    minus = head == -1
    inside = (minus[:, :-1] & ~minus[:, 1:]).any(axis=1) if S > 1 else np.zeros(R, dtype=bool)
    block = case.launch.get("block_size_tokens") or next_power_of_2(S)
    valid = (head != -1) & (head < vocab)
    invalid = ~valid & (head != -1)
    before = (invalid[:, :-1] & valid[:, 1:]).any(axis=1) if S > 1 else np.zeros(R, dtype=bool)
    backup = case.arrays["backup_next_token_ids"][:R].astype(np.int64)
    checks = {
        "no_valid_token": np.any(kept & (valid.sum(axis=1) == 0)),
        "id_equals_vocab": np.any(head == vocab),
        "id_above_vocab": np.any(head > vocab),
        "invalid_before_valid": np.any(kept & before),
        "id_at_int32_max": np.any(kept[:, None] & (head == INT32_MAX)),
        "strided_rows": case.arrays["sampled_token_ids"].shape[1] > S,
        "custom_block": case.launch.get("block_size_tokens") not in (None, next_power_of_2(S)) and block > next_power_of_2(S),
        "padded_launch": (case.launch.get("grid_size") or R) > R,
        "backup_outside_vocab": bool(np.any((backup < 0) | (backup >= vocab))),
        "minus_one_inside": np.any(kept & inside),
        "id_below_minus_one": np.any(kept[:, None] & (head < -1)),
        "block_below_s": block < S,
        "no_column": S == 0,
        "vocab_not_positive": vocab <= 0,
    }
    return frozenset(k for k, v in checks.items() if v)


def _row(c: Chooser, S: int, stride: int, vocab: int) -> list[int]:
    k = c.integer(0, S)
    hi = max(vocab - 1, 0)
    row = [int(c.integer(0, hi)) if c.chance(0.8) else vocab for _ in range(k)] + [-1] * (S - k)
    if S and c.chance(0.3):  # an id below -1
        row[c.integer(0, S - 1)] = c.choice([-2, INT32_MIN, -c.integer(2, 1 << 20)])
    if S > 1 and c.chance(0.3):  # -1 inside the row
        row[c.integer(0, S - 2)] = -1
    return row + [int(c.integer(0, hi)) for _ in range(stride - S)]


def _wide_row(c: Chooser, S: int, stride: int, vocab: int) -> np.ndarray:
    """``k`` sampled ids (some at or past the vocabulary, anywhere), then ``-1`` up to ``S``,
    then junk up to the row stride (never read)."""
    k = c.integer(0, S)
    head = c.array_of(np.int64, k, [(0, vocab - 1), (vocab, vocab), (vocab, INT32_MAX)])
    junk = c.array(np.int64, stride - S, 0, vocab - 1)
    return np.concatenate([head, np.full(S - k, -1, dtype=np.int64), junk])


def _wide_body(c: Chooser, scale: Scale) -> Case:
    """Sampler-shaped batches with the draws outside §3.2's cited preconditions: ids at and
    past the vocabulary anywhere in a row, rows of ``-1`` only, row strides past ``S``, any
    int32 backup ids, larger blocks and padded grids."""
    R = c.integer(1, min(scale.max_requests, 16))
    S = c.integer_of([(1, 8), (1, 33)])
    stride = S + c.integer_of([(0, 0), (1, 4)])
    vocab = c.integer(1, INT32_MAX) if c.boolean() else c.choice([32000, 128256, 1, 2, INT32_MAX])
    rows = np.stack(c.repeat(R, lambda c: _wide_row(c, S, stride, vocab)))
    extra = c.integer_of([(0, 0), (1, 8)])
    mode = c.choice(["none", "some", "all"])
    if mode == "some":
        discard = c.array(np.int8, R + extra, 0, 1).astype(bool)
    else:
        discard = np.full(R + extra, mode == "all")
    backup = c.array(np.int32, R + extra, INT32_MIN, INT32_MAX)
    block = c.optional(lambda c: c.choice([b for b in POWERS_OF_TWO if b >= next_power_of_2(S)]))
    grid = c.optional(lambda c: c.integer(R + 1, R + 8))
    return build(rows, discard, backup, vocab, S, block, grid)


def _body(c: Chooser, scale: Scale) -> Case:
    if c.chance(0.4):
        return _wide_body(c, scale)
    R = c.integer(1, min(scale.max_requests, 12))
    S = 0 if c.chance(0.15) else c.integer(1, 8) if c.chance(0.8) else c.integer(1, 33)
    stride = S + (c.integer(1, 3) if S == 0 or c.chance(0.3) else 0)
    vocab = c.choice([32000, 2, 1]) if not c.chance(0.2) else c.choice([0, -1, -5, INT32_MIN])
    rows = np.array([_row(c, S, stride, vocab) for _ in range(R)], dtype=np.int64).reshape(R, stride)
    extra = c.integer(0, 4)
    mode = c.choice(["none", "some", "all"])
    discard = np.array([mode == "all" or (mode == "some" and c.chance(0.3)) for _ in range(R + extra)], dtype=bool)
    backup = c.array(np.int32, R + extra, INT32_MIN, INT32_MAX)
    if S == 0:
        block: int | None = c.choice(list(POWERS_OF_TWO[:4]))
    elif S > 1 and c.chance(0.35):
        block = c.choice([b for b in POWERS_OF_TWO if b < S])
    else:
        block = None
    grid = R + c.integer(1, 4) if c.chance(0.2) else None
    return build(rows.astype(np.int32), discard, backup, vocab, S, block, grid)


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return _body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(_body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """A block that reads every column; every id below -1 set to -1 in turn per row."""
    s = case.scalars
    S, block = s["num_sampled_tokens_per_req"], case.launch.get("block_size_tokens")
    if S >= 1 and block is not None and block < S:
        yield case.replace(launch={"block_size_tokens": next_power_of_2(S)})
    rows = case.arrays["sampled_token_ids"]
    if S > 1:  # drop one column (of every row): S - 1 columns
        for col in range(S):
            keep = [k for k in range(rows.shape[1]) if k != col]
            yield case.replace(arrays={"sampled_token_ids": rows[:, keep]},
                               scalars={"num_sampled_tokens_per_req": S - 1},
                               launch={"block_size_tokens": None if block is None else min(block, max(next_power_of_2(S - 1), 1))})
    for r in range(rows.shape[0]):
        if np.any(rows[r, :S] < -1):
            fixed = rows.copy()
            fixed[r, :S] = np.where(rows[r, :S] < -1, 0, rows[r, :S])
            yield case.replace(arrays={"sampled_token_ids": fixed})
