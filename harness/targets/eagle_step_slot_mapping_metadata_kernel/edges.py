"""The extended tier of ``eagle_step_slot_mapping_metadata_kernel``: docs/CONTRACT.md §6.4.

Inputs vLLM's draft loop does not hand the kernel where every read stays in the table (§6.1
defines them): positions reaching or past ``max_model_len`` (parked at 0), sequence lengths
unrelated to the positions (the cap engages), tables narrower than ``max_model_len`` needs
(the column clamp engages) or column slices of wider ones, block sizes vLLM does not use, and
a request whose step slot falls in a column past its allocated blocks (PR #54296's class: the
column holds a stale id, another request's block or the null block).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, Scale
from ...targetkit.block_tables import BLOCK_SIZES, MAX_POSITION
from .layout import (
    Step,
    allocated_columns,
    build,
    max_model_len_for,
    padded_batch,
    position_of,
    seq_len_of,
    table_shape,
    vllm_block_size,
)

FEATURES = {
    "reaches_max": "a request at position M - 1: the step reaches max_model_len and is parked",
    "past_max": "a request already at or past max_model_len (exceeds: parked at 0)",
    "column_clamped": "a table narrower than max_model_len needs: the column clamp nb - 1 engages",
    "strided_table": "block_table_stride > n_blocks_per_req (a column slice of a wider table)",
    "seq_len_capped": "an in-range request with seq_lens + 1 > max_model_len (the cap engages)",
    "seq_below_position": "a request with seq_lens < positions + 1 (no position's sequence)",
    "other_block_size": "a block size vLLM does not use (neither a power of two nor a multiple of 16)",
    "stale_block_column": "a request whose step slot lies in a column at or past its allocated blocks "
                          "(num_allocated_blocks): the slot is a stale block's (PR #54296's class)",
}

KINDS = ("any", "end", "block", "past")


def features_of(case: Case) -> frozenset[str]:
    t = Step(case)
    inside = ~t.exceeds
    alloc = allocated_columns(case)
    checks = {
        "reaches_max": np.any(t.p == t.M),
        "past_max": np.any(t.p > t.M),
        "column_clamped": np.any(inside & (t.raw_col > t.nb - 1)),
        "strided_table": case.arrays["block_table"].shape[1] > t.nb,
        "seq_len_capped": np.any(inside & (t.seq + 1 > t.M)),
        "seq_below_position": np.any(t.seq < t.p),
        "other_block_size": not vllm_block_size(t.bs),
        "stale_block_column": alloc is not None and bool(np.any(inside & (t.col >= alloc))),
    }
    return frozenset(k for k, ok in checks.items() if ok)


def _body(c: Chooser, scale: Scale) -> Case:
    """Anything §6.1 defines: any block size, tables as wide as needed, wider, narrower or
    strided, positions anywhere (near and past max_model_len), sequence lengths following the
    positions or not, allocations that cover the step slot or stop one block short of it."""
    B = c.integer(1, max(1, min(12, scale.max_requests)))
    bs = c.choice(BLOCK_SIZES)
    nb, extra = table_shape(B, c.integer_of([(1, 16), (1, 64)]), c.integer_of([(0, 0), (1, 8)]))
    M = max_model_len_for(nb, bs, c.choice(["exact", "fits", "narrow"]), c.integer(0, 1 << 30))
    kinds = [KINDS[k] for k in c.array(np.int8, B, 0, len(KINDS) - 1)]
    offs = c.array_of(np.int64, B, [(0, 1 << 20), (0, MAX_POSITION)])
    positions = [position_of(k, M, bs, int(o)) for k, o in zip(kinds, offs, strict=True)]
    seq_mode = c.choice(["follow", "any", "near_max"])
    seq_k = c.array(np.int64, B, 0, INT32_MAX)
    seqs = [seq_len_of(seq_mode, p, M, int(k)) for p, k in zip(positions, seq_k, strict=True)]
    short = c.array(np.int8, B, 0, 1)
    allocated = None
    if c.boolean():
        cols = [min(nb - 1, (p + 1) // bs) if p + 1 < M else 0 for p in positions]
        allocated = [max(0, col + 1 - int(k)) for col, k in zip(cols, short, strict=True)]
    ib = c.optional(lambda c: padded_batch(B, c.choice(["plus", "capture"]), c.integer(1, 16)))
    return build(
        positions, seqs, bs, M, nb, extra,
        ids=c.choice(["small", "any", "near_limit"]),
        seed=c.integer(0, (1 << 32) - 1), input_batch_size=ib, aliased=c.boolean(), allocated=allocated,
    )  # fmt: skip


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return _body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(_body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Sequence lengths that follow the positions."""
    a = case.arrays
    follow = np.minimum(a["positions"] + 1, INT32_MAX - 1).astype(np.int32)
    if not np.array_equal(follow, a["seq_lens"]):
        yield case.replace(arrays={"seq_lens": follow})
