"""The production tier of ``eagle_step_slot_mapping_metadata_kernel`` (docs/CONTRACT.md §6.2):
in-contract cases by construction, one body for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import INT32_MAX, Scale
from ...targetkit.block_tables import BLOCK_SIZES, MAX_POSITION
from .layout import build, max_model_len_for, padded_batch, position_of, seq_len_of, table_shape

KINDS = ("any", "end", "block", "past")
"""Where a request's position lies (:func:`~.layout.position_of`), the plainest first."""


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §6.2): a small, medium or tail-sized batch,
    any block size, a table as wide as the model length needs (or wider, or narrower), positions
    anywhere, at a block's end, near and past ``max_model_len``, sequence lengths that follow the
    positions or not, cudagraph padding or none, positions aliased or not."""
    regime = c.choice(["small"] * 6 + ["medium"] * 3 + ["tail"])
    top = {"small": 8, "medium": scale.max_requests, "tail": scale.request_tail}[regime]
    B = c.integer(1, max(1, top))
    bs = c.choice(BLOCK_SIZES)
    nb, extra = table_shape(B, c.integer_of([(1, 16), (1, 512)]), c.integer_of([(0, 0), (1, 8)]))
    M = max_model_len_for(nb, bs, c.choice(["exact", "fits", "narrow"]), c.integer(0, 1 << 30))
    kinds = [KINDS[k] for k in c.array(np.int8, B, 0, len(KINDS) - 1)]
    offs = c.array_of(np.int64, B, [(0, 1 << 20), (0, MAX_POSITION)])
    positions = [position_of(k, M, bs, int(o)) for k, o in zip(kinds, offs, strict=True)]
    seq_mode = c.choice(["follow", "any", "near_max"])
    seq_k = c.array(np.int64, B, 0, INT32_MAX)
    seqs = [seq_len_of(seq_mode, p, M, int(k)) for p, k in zip(positions, seq_k, strict=True)]
    ib = c.optional(lambda c: padded_batch(B, c.choice(["plus", "capture"]), c.integer(1, 16)))
    return build(
        positions, seqs, bs, M, nb, extra,
        ids=c.choice(["small", "any", "near_limit"]),
        seed=c.integer(0, (1 << 32) - 1), input_batch_size=ib, aliased=c.boolean(),
    )  # fmt: skip
