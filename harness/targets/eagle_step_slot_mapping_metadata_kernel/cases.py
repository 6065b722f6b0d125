"""The production tier of ``eagle_step_slot_mapping_metadata_kernel`` (docs/CONTRACT.md §6.2):
in-contract cases by construction, one body for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import INT32_MAX, Scale, cdiv
from ...targetkit.block_tables import BLOCK_SIZES, MAX_POSITION
from .layout import (
    build,
    max_model_len_for,
    padded_batch,
    production_position,
    production_seq_len,
    table_shape,
    vllm_block_size,
)

KINDS = ("any", "end", "block")
"""Where a request's position lies (:func:`~.layout.production_position`), the plainest first."""

PRODUCTION_BLOCK_SIZES = tuple(b for b in BLOCK_SIZES if vllm_block_size(b))
"""vLLM's block sizes: powers of two and multiples of 16 (docs/CONTRACT.md §6.2)."""


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §6.2): a small, medium or tail-sized batch,
    vLLM's block sizes, a contiguous table as wide as the model length needs (or wider),
    positions anywhere up to ``M - 2`` (the drafter gate), at a block's end or near the gate,
    sequence lengths that follow the positions (a text target) or pass them (an M-RoPE target's
    temporal coordinates), each request's allocation covering its step slot, cudagraph padding
    or none, positions aliased or not."""
    regime = c.choice(["small"] * 6 + ["medium"] * 3 + ["tail"])
    top = {"small": 8, "medium": scale.max_requests, "tail": scale.request_tail}[regime]
    B = c.integer(1, max(1, top))
    bs = c.choice(PRODUCTION_BLOCK_SIZES)
    nb, _ = table_shape(B, c.integer_of([(1, 16), (1, 512)]), 0)
    M = max_model_len_for(nb, bs, c.choice(["exact", "fits"]), c.integer(0, 1 << 30))
    if M < 2:  # room for a step: positions + 1 <= M - 1
        M, nb = 2, max(nb, cdiv(2, bs))
    kinds = [KINDS[k] for k in c.array(np.int8, B, 0, len(KINDS) - 1)]
    offs = c.array_of(np.int64, B, [(0, 1 << 20), (0, MAX_POSITION)])
    positions = [production_position(k, M, bs, int(o)) for k, o in zip(kinds, offs, strict=True)]
    seq_mode = c.choice(["follow", "follow", "mrope"])
    seq_k = c.array(np.int64, B, 0, INT32_MAX)
    seqs = [production_seq_len(seq_mode, p, M, int(k)) for p, k in zip(positions, seq_k, strict=True)]
    spare = c.array(np.int64, B, 0, 2)
    allocated = [min(nb, (p + 1) // bs + 1 + int(e)) for p, e in zip(positions, spare, strict=True)]
    ib = c.optional(lambda c: padded_batch(B, c.choice(["plus", "capture"]), c.integer(1, 16)))
    return build(
        positions, seqs, bs, M, nb, 0,
        ids=c.choice(["small", "any", "near_limit"]),
        seed=c.integer(0, (1 << 32) - 1), input_batch_size=ib, aliased=c.boolean(), allocated=allocated,
    )  # fmt: skip
