"""The tour of production extremes of ``compute_new_slot_mapping`` (docs/CONTRACT.md §7):
cheap-but-large shapes. A Python function costs its array sizes, not programs: every shape
keeps its arrays within a few tens of thousands of elements.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    FLOAT32_EXACT,
    INT16_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    Scale,
    Shape,
)
from ...targetkit.block_tables import max_block_id, table_width
from .layout import build


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """max_model_len in the millions (past 2**24) with a table as wide as vLLM's, N = 15-32
    (parallel drafting, K >= 15): one or two requests in section 1's layout ending near M - 1,
    their last blocks' ids within 2**16 slots of the int32 limit (the null block 0 elsewhere)."""
    bs = int(rng.choice([1024, 528]))
    nb = table_width(FLOAT32_EXACT + int(rng.integers(4096, 1 << 16)), bs)
    R = int(rng.integers(1, 3))
    case = build(
        rng.integers(1, 65, size=R).tolist(), int(rng.integers(SPEC_TOKENS, 33)), bs,
        nb=nb, fit="exact", layout="vllm", ids="small", seed=int(rng.integers(0, 1 << 32)),
        views=bool(rng.random() < 0.5), p0_near_end=True, max_table=R * nb,
    )  # fmt: skip
    M, top = case.scalars["max_model_len"], max_block_id(bs)
    table = np.zeros((R, nb), dtype=np.int64)
    first = (M - 256) // bs  # every live position lies past M - 100
    table[:, first:] = rng.integers(top - 7, top, size=(R, nb - first), endpoint=True)
    return case.replace(arrays={"block_table": table.astype(np.int32)})


def _huge_offsets(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_batched_tokens of 32k and more: a prefill of 32768-36863 tokens among a few
    short requests (later offsets past 32767), N = 1-4."""
    R = int(rng.integers(2, 5))
    lengths = rng.integers(1, 65, size=R).tolist()
    lengths[int(rng.integers(0, R))] = int(rng.integers(INT16_MAX + 1, INT16_MAX + 4097))
    bs = int(rng.choice([64, 128, 256]))
    nb = table_width(int(rng.integers(1 << 16, 1 << 18)), bs)
    case = build(
        lengths, int(rng.integers(1, 5)), bs, nb=nb, fit="exact", layout="vllm",
        ids=str(rng.choice(["small", "any"])), seed=int(rng.integers(0, 1 << 32)),
        views=bool(rng.random() < 0.5), p0_near_end=False, max_tokens=1 << 17, max_table=R * nb,
    )  # fmt: skip
    old = case.arrays["slot_mapping"]  # the metadata's own slots (never read): plain ones
    return case.replace(arrays={"slot_mapping": np.arange(len(old), dtype=np.int64)})


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 requests of 1-3 tokens, N = 1-3, narrow tables."""
    R = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65))
    return build(
        rng.integers(1, 4, size=R).tolist(), int(rng.integers(1, 4)), int(rng.choice([16, 32])),
        nb=int(rng.integers(1, 9)), fit=str(rng.choice(["exact", "fits"])), layout="vllm",
        ids="any", seed=int(rng.integers(0, 1 << 32)), views=bool(rng.random() < 0.5),
    )  # fmt: skip


SHAPES = (
    Shape("long_context", 1, _long_context),
    Shape("huge_offsets", 1, _huge_offsets),
    Shape("many_requests", 1, _many_requests),
)
