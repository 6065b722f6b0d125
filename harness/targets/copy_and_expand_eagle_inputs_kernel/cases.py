"""The production tier of ``copy_and_expand_eagle_inputs_kernel`` (docs/CONTRACT.md §1.2): in-contract
cases by construction, for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import INT32_MAX, Scale, request_count_ranges
from .layout import MAX_MODEL_LEN, build, positions_from_starts


def _padding_slots(c: Chooser, shift: bool) -> int:
    """P from 1 to 8; with shift from 2 (vLLM runs the kernel only when ``P - shift >= 1``)."""
    return c.integer(2, 8) if shift else c.integer(1, 8)


def _request(c: Chooser, cap: int, P: int) -> dict[str, Any]:
    """One request's own draws, together, so shrinking drops a request with its data: vocabulary
    ids, consecutive positions from a first one that keeps every written position below
    :data:`MAX_MODEL_LEN`."""
    n = c.integer(1, cap)
    p0 = c.integer_of([(0, 4096), (0, MAX_MODEL_LEN - 1 - n - P)])
    return {
        "tokens": c.array(np.int32, n, 0, INT32_MAX),
        "positions": positions_from_starts(np.array([p0], dtype=np.int64), [n]),
        "rejected": c.integer(0, n - 1),
        "next": c.integer(0, INT32_MAX),
    }


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §1.2): shift off with P from 1 to 8 or on
    with P from 2 to 8, a few to a few hundred requests of up to ``scale.max_query_len``
    tokens, vocabulary ids (``>= 0``), consecutive positions below ``max_model_len``,
    ``padding_token_id = 0``, a mask id ``>= 0``, vLLM's launch."""
    shift = c.boolean()
    P = _padding_slots(c, shift)
    R = c.integer_of(request_count_ranges(scale))
    cap = c.choice(sorted({4, 16, 64, scale.max_query_len}))
    reqs = c.repeat(R, lambda c: _request(c, cap, P))
    lengths = [len(q["tokens"]) for q in reqs]
    return build(
        lengths,
        [q["rejected"] for q in reqs],
        shift=shift,
        P=P,
        token_ids=np.concatenate([q["tokens"] for q in reqs]),
        positions=np.concatenate([q["positions"] for q in reqs]),
        next_ids=np.array([q["next"] for q in reqs], dtype=np.int32),
        padding_id=0,
        parallel_id=c.integer_of([(0, 1 << 18), (0, INT32_MAX)]),
        launch={"block_size_tokens": None, "num_blocks": None},
    )
