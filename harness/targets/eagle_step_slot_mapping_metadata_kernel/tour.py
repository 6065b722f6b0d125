"""The tour of production extremes of ``eagle_step_slot_mapping_metadata_kernel``
(docs/CONTRACT.md §6): cheap-but-large shapes, cheapest first.

Under the Triton interpreter a case costs its programs (one per request, plus the cudagraph
padding), not its values: a context of millions of tokens costs one program per request, a
batch of 1025 requests about a thousand.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    FLOAT32_EXACT,
    MAX_NUM_SEQS,
    Scale,
    Shape,
)
from ...targetkit.block_tables import max_block_id, table_width
from .layout import build, production_position


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """max_model_len in the millions (past 2**24) with a table as wide as vLLM's: one or two
    requests, one stepping onto M - 1 (its slot within 2**16 of the int32 limit), the other
    onto M - 2. Columns not looked up hold the null block 0."""
    bs = int(rng.choice([1024, 528, 512]))
    M = FLOAT32_EXACT + int(rng.integers(2048, 1 << 16))
    nb = table_width(M, bs)
    B = int(rng.integers(1, 3))
    positions = [M - 2, M - 3][:B]
    positions = [positions[i] for i in rng.permutation(B)]
    ib = None if rng.random() < 0.7 else B + int(rng.integers(1, 5))
    case = build(positions, [p + 1 for p in positions], bs, M, nb, 0, ids="small", seed=int(rng.integers(0, 1 << 32)),
                  input_batch_size=ib, aliased=bool(rng.random() < 0.5))  # fmt: skip
    top = max_block_id(bs)
    table = np.zeros((B, nb), dtype=np.int64)
    for r, p in enumerate(positions):  # a request's last blocks: ids near the limit
        col = min(p + 1, M - 1) // bs if p + 1 < M else 0
        lo = max(0, col - 2)
        table[r, lo : col + 1] = rng.integers(top - 7, top, size=col + 1 - lo, endpoint=True)
    return case.replace(arrays={"block_table": table.astype(np.int32)})


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 requests on narrow tables, sometimes padded."""
    B = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65))
    bs = int(rng.choice([16, 32, 64]))
    nb = int(rng.integers(1, 17))
    M = max(2, nb * bs - int(rng.integers(0, bs)))
    kinds = rng.choice(["end", "any", "block"], size=B, p=[0.25, 0.55, 0.2])
    positions = [production_position(str(k), M, bs, int(o)) for k, o in zip(kinds, rng.integers(0, 1 << 20, size=B), strict=True)]
    seqs = [p + 1 for p in positions]
    ib = None if rng.random() < 0.5 else B + int(rng.integers(1, 17))
    return build(positions, seqs, bs, M, nb, 0, ids="any", seed=int(rng.integers(0, 1 << 32)),
                  input_batch_size=ib, aliased=bool(rng.random() < 0.5))  # fmt: skip


SHAPES = (
    Shape("long_context", 6, _long_context),
    Shape("many_requests", MAX_NUM_SEQS + 80, _many_requests),
)
