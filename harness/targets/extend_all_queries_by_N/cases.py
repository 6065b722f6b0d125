"""The production tier of ``extend_all_queries_by_N`` (docs/CONTRACT.md §4.2): in-contract cases by
construction, one body for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import INT32_MAX, Scale
from .layout import MAX_BATCH, build


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §4.2): up to 512 requests (none, or one,
    too), ``N`` small (often 1), large now and then, queries and contexts small or large, some
    cases with an extended start and a sequence length just below the int32 limit, every
    metadata field's padding and device placement."""
    R = c.integer_of([(0, 8), (1, 1), (0, scale.max_requests), (0, MAX_BATCH)])
    regime = c.choice(["small", "large", "near_limit"])
    if regime == "large":
        lengths = c.array(np.int64, R, 0, 1 << 20).tolist()
        context = c.array(np.int64, R, 0, 1 << 24).tolist()
        N = c.integer(0, 1 << 16)
    else:
        cap = c.choice(sorted({4, 16, 64, scale.max_query_len})) if R else 0
        lengths = c.array(np.int64, R, 0, cap).tolist()
        context = c.array(np.int64, R, 0, 4096).tolist()
        N = c.integer_of([(0, 8), (1, 1), (0, 64), (0, 1 << 16)])
    seq = [q + k for q, k in zip(lengths, context, strict=True)]
    if regime == "near_limit" and R:
        # Stretch one request so that the last extended start lands just below INT32_MAX (the
        # extended starts never decrease, so none passes it), and put one seq_len there too.
        slack = c.integer(0, 4096)
        r = c.integer(0, R - 1)
        lengths[r] += max(0, INT32_MAX - slack - R * N - sum(lengths))
        seq[c.integer(0, R - 1)] = INT32_MAX - N - c.integer(0, 4096)
    return build(
        lengths,
        seq,
        N=N,
        num_reqs=c.integer_of([(R, R), (0, R)]),
        token_pad=c.integer_of([(0, 0), (1, 64)]),
        query_len_pad=c.integer_of([(0, 0), (1, 16)]),
        seq_len_pad=c.integer_of([(0, 0), (1, 16)]),
        arange_extra=c.integer(0, 64),
        width=c.integer(1, 8),
        seed=c.integer(0, (1 << 32) - 1),
        causal=c.choice([True, False]),
        optional_fields=c.boolean(),
        on_device=c.choice([True, False]),
    )
