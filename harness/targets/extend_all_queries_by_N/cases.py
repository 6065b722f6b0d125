"""The production tier of ``extend_all_queries_by_N`` (docs/CONTRACT.md §4.2): in-contract cases by
construction, one body for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale
from .layout import MAX_BATCH, PRODUCTION_LIMIT, build


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §4.2), as ``set_inputs_first_pass`` hands it:
    1 to 512 requests, each with a query of at least one token and a sequence at least as long,
    ``N >= 1`` (often 1, large now and then), queries and contexts small or large (every value
    far below 2**31), the drafter's unpadded metadata (``num_reqs = batch_size()``, exact
    ``num_actual_tokens`` and ``max_query_len``, ``max_seq_len`` exact or an upper bound, causal,
    on the device), with or without its optional fields."""
    R = c.integer_of([(1, 8), (1, 1), (1, scale.max_requests), (1, MAX_BATCH)])
    if c.choice(["small", "large"]) == "large":
        share = max(1, (PRODUCTION_LIMIT // 2) // R)  # the tokens and the drafts stay below 2**30
        lengths = c.array(np.int64, R, 1, min(1 << 20, share)).tolist()
        context = c.array(np.int64, R, 0, 1 << 24).tolist()
        N = c.integer(1, min(1 << 16, share))
    else:
        cap = c.choice(sorted({4, 16, 64, scale.max_query_len}))
        lengths = c.array(np.int64, R, 1, max(cap, 1)).tolist()
        context = c.array(np.int64, R, 0, 4096).tolist()
        N = c.integer_of([(1, 8), (1, 1), (1, 64), (1, 1 << 16)])
    seq = [q + k for q, k in zip(lengths, context, strict=True)]
    return build(
        lengths,
        seq,
        N=N,
        num_reqs=R,
        token_pad=0,
        query_len_pad=0,
        seq_len_pad=c.integer_of([(0, 0), (1, 16)]),
        arange_extra=c.integer(0, 64),
        width=c.integer(1, 8),
        seed=c.integer(0, (1 << 32) - 1),
        causal=True,
        optional_fields=c.boolean(),
        on_device=True,
    )
