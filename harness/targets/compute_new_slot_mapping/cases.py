"""The production tier of ``compute_new_slot_mapping`` (docs/CONTRACT.md §7.2): in-contract cases by
construction, one body for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale
from ...targetkit.block_tables import BLOCK_SIZES
from .layout import build


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §7.2): small, medium or tail-sized batches
    of requests of one token or more with ``N >= 1`` new tokens each (:func:`~.layout.build`),
    any block size, slots in vLLM's layout (every live position below max_model_len), block
    tables as wide as needed or wider."""
    regime = c.choice(["small"] * 6 + ["medium"] * 3 + ["tail"])
    R = c.integer(1, {"small": 8, "medium": scale.max_requests, "tail": scale.request_tail}[regime])
    cap = c.choice([4, 16, 64, scale.max_query_len])
    lengths = c.array_of(np.int64, R, [(1, cap)]).tolist()
    return build(
        lengths,
        c.choice([1, 2, 3, 4, 7, 15]),
        c.choice(BLOCK_SIZES),
        nb=c.integer_of([(1, 16), (1, 512)]),
        fit=c.choice(["exact", "fits"]),
        layout="vllm",
        ids=c.choice(["small", "any", "near_limit"]),
        seed=c.integer(0, (1 << 32) - 1),
        views=c.boolean(),
        p0_near_end=c.boolean(),
    )
