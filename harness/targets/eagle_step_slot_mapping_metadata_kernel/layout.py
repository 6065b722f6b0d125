"""How a case of ``eagle_step_slot_mapping_metadata_kernel`` is laid out (docs/CONTRACT.md §6.1):
each request's quantities of the contract's table, and the case built from positions, sequence
lengths and a block table.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    INT32_MAX,
    cdiv,
)
from ...targetkit.block_tables import MAX_POSITION, MAX_TABLE, max_block_id

NAME = "eagle_step_slot_mapping_metadata_kernel"
"""The target's name (its registry key, folder and vLLM name)."""




I32, I64 = np.dtype(np.int32), np.dtype(np.int64)


PAD_ID = -1
"""vLLM's ``PADDING_SLOT_ID``, the ``PAD_ID`` its wrapper passes."""


CAPTURE_SIZES = (1, 2, 4, 8, *range(16, 513, 8))
"""vLLM's default cudagraph capture sizes: a padded batch is the next one up."""


class Step:
    """Per-request quantities of the contract's table (int64 arrays), for features and reports."""

    def __init__(self, case: Case) -> None:
        s = case.scalars
        self.B = len(case.arrays["positions"])
        self.bs, self.M, self.nb = int(s["block_size"]), int(s["max_model_len"]), int(s["n_blocks_per_req"])
        ib = case.launch.get("input_batch_size")
        self.IB = self.B if ib is None else int(ib)
        self.pos = case.arrays["positions"].astype(np.int64)
        self.seq = case.arrays["seq_lens"].astype(np.int64)
        self.p = self.pos + 1
        self.exceeds = self.p >= self.M
        self.clamped = np.where(self.exceeds, 0, self.p)
        self.raw_col = self.clamped // self.bs
        self.col = np.minimum(self.raw_col, self.nb - 1)
        table = case.arrays["block_table"].astype(np.int64)
        self.block = table[np.arange(self.B), self.col] if self.B else np.zeros(0, np.int64)
        self.slot = np.where(self.exceeds, PAD_ID, self.block * self.bs + self.clamped % self.bs)


def vllm_block_size(bs: int) -> bool:
    """A block size vLLM's KV caches use: a power of two, or a multiple of 16 (hybrid models)."""
    return bs & (bs - 1) == 0 or bs % 16 == 0


def allocated_columns(case: Case) -> np.ndarray | None:
    """The case's ``num_allocated_blocks`` (int64), ``None`` when it has none."""
    a = case.arrays.get("num_allocated_blocks")
    return None if a is None else a.astype(np.int64)


def table_shape(B: int, nb: int, extra: int) -> tuple[int, int]:
    """``(n_blocks_per_req, extra columns)`` cut so that the table stays within MAX_TABLE."""
    width = max(1, MAX_TABLE // B)
    nb = max(1, min(nb, width))
    return nb, max(0, min(extra, width - nb))


def max_model_len_for(nb: int, bs: int, regime: str, k: int) -> int:
    """A max_model_len for a table of ``nb`` columns: ``exact`` fills it (``nb * bs``), ``fits``
    is anything vLLM could pair with it (``<= nb * bs``), ``narrow`` needs more columns."""
    full = nb * bs
    if regime == "exact":
        return full
    if regime == "fits":
        return 1 + k % full
    return full + 1 + k % (3 * full)


def production_position(kind: str, M: int, bs: int, k: int) -> int:
    """A position of the production tier (docs/CONTRACT.md §6.2: ``positions + 1 <= M - 1``,
    the drafter gate): ``end`` at most ``M - 2``, ``block`` one short of a block start,
    ``any`` anywhere up to ``M - 2``."""
    top = max(0, M - 2)
    if kind == "end":
        return max(0, top - k % 4)
    if kind == "block":
        blocks = cdiv(M, bs)
        return max(0, min(top, (k % blocks) * bs - 1))
    return k % (top + 1)


def production_seq_len(mode: str, position: int, M: int, k: int) -> int:
    """``follow``: position + 1 (a text target); ``mrope``: from position + 1 up to ``M - 1``
    (an M-RoPE target: the position is the temporal coordinate, at most the token index)."""
    if mode == "follow":
        return position + 1
    return position + 1 + k % max(1, M - 1 - position)


def position_of(kind: str, M: int, bs: int, k: int) -> int:
    """A position: ``end`` near max_model_len, ``past`` beyond it, ``block`` one short of a
    block start, ``any`` anywhere below max_model_len."""
    if kind == "end":
        return max(0, M - 1 - k % 4)
    if kind == "past":
        return M + (k % 3 if k % 2 else k % (MAX_POSITION - M + 1))
    if kind == "block":
        blocks = cdiv(M, bs)
        return max(0, min(M - 1, (k % blocks) * bs - 1))
    return k % M


def seq_len_of(mode: str, position: int, M: int, k: int) -> int:
    """``follow``: position + 1 (vLLM's invariant); ``near_max``: around max_model_len; ``any``."""
    if mode == "follow":
        return min(position + 1, INT32_MAX - 1)
    if mode == "near_max":
        return max(0, min(INT32_MAX - 1, M - 2 + k % 4))
    return k % INT32_MAX


def padded_batch(B: int, how: str, k: int) -> int:
    if how == "capture":
        return next((c for c in CAPTURE_SIZES if c >= B), B + k)
    return B + k


def build(
    positions: list[int],
    seqs: list[int],
    bs: int,
    M: int,
    nb: int,
    extra: int,
    *,
    ids: str,
    seed: int,
    input_batch_size: int | None,
    aliased: bool,
    allocated: list[int] | None = None,
) -> Case:
    """The case; ``allocated``: each request's ``num_allocated_blocks`` (none: the case has no
    such array, the audit then cannot tell a request's blocks from stale columns)."""
    B = len(positions)
    rng = np.random.default_rng(seed)
    top = max_block_id(bs)
    if ids == "small":
        table = rng.integers(0, min(top, 4096), size=(B, nb + extra), endpoint=True)
    elif ids == "near_limit":  # slots within 2**16 of the int32 limit
        table = rng.integers(max(0, top - (1 << 16) // bs), top, size=(B, nb + extra), endpoint=True)
    else:
        table = rng.integers(0, top, size=(B, nb + extra), endpoint=True)
    table[:, nb:] = rng.integers(-(2**31), INT32_MAX, size=(B, extra), endpoint=True)  # never read
    arrays = {
        "positions": np.asarray(positions, dtype=np.int64),
        "block_table": table.astype(np.int32),
        "seq_lens": np.asarray(seqs, dtype=np.int64).astype(np.int32),
    }
    if allocated is not None:
        arrays["num_allocated_blocks"] = np.asarray(allocated, dtype=np.int32)
    return Case(
        kernel=NAME,
        arrays=arrays,
        scalars={"block_size": int(bs), "max_model_len": int(M), "n_blocks_per_req": int(nb)},
        launch={"input_batch_size": input_batch_size, "aliased_positions": bool(aliased)},
    )
