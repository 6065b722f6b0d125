"""The production tier of ``compute_new_slot_mapping`` (docs/CONTRACT.md §7.2): in-contract cases by
construction, for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from ...core.case import Case
from ...generation.strategies import (
    Scale,
    draw_shape,
    random_shape,
)
from ...targetkit.block_tables import BLOCK_SIZES
from .layout import build
from .tour import SHAPES


def random_case(rng: np.random.Generator, scale: Scale, shapes: Any = SHAPES) -> Case:
    """The bulk generator: a tour shape now and then, else a random batch (:func:`build`)."""
    extreme = random_shape(rng, shapes, scale)
    if extreme is not None:
        return extreme
    pick = rng.random(8)
    if pick[0] < 0.03:
        R = 0
    else:
        top = 8 if pick[1] < 0.6 else scale.max_requests if pick[1] < 0.9 else scale.request_tail
        R = int(rng.integers(1, top + 1))
    cap = int(rng.choice([4, 16, 64, scale.max_query_len]))
    N = int(rng.choice([0, 1, 1, 2, 3, 4, 7, 15]))
    lengths = rng.integers(0 if pick[2] < 0.2 else 1, cap + 1, size=R).tolist()
    bs = int(rng.choice(BLOCK_SIZES))
    return build(
        lengths, N, bs,
        nb=int(rng.integers(1, 17)) if pick[3] < 0.7 else int(rng.integers(1, 513)),
        fit=str(rng.choice(["exact", "fits"])),
        layout=str(rng.choice(["vllm", "vllm", "scattered"])),
        ids=str(rng.choice(["small", "any", "near_limit"], p=[0.5, 0.3, 0.2])),
        seed=int(rng.integers(0, 1 << 32)), views=bool(pick[4] < 0.5),
    )  # fmt: skip


@st.composite
def strategy(draw: st.DrawFn, scale: Scale) -> Case:
    """The default strategy: a tour shape now and then, else small, medium, tail-sized or empty
    batches of requests with N new tokens each (:func:`build`)."""
    extreme = draw(draw_shape(SHAPES, scale))
    if extreme is not None:
        return extreme
    regime = draw(st.sampled_from(["small"] * 6 + ["medium"] * 3 + ["tail", "empty"]))
    if regime == "empty":
        R = 0
    else:
        R = draw(st.integers(1, {"small": 8, "medium": scale.max_requests, "tail": scale.request_tail}[regime]))
    cap = draw(st.sampled_from([4, 16, 64, scale.max_query_len]))
    lengths = draw(st.lists(st.integers(1, cap) | st.integers(0, cap), min_size=R, max_size=R))
    return build(
        lengths,
        draw(st.sampled_from([1, 2, 0, 3, 4, 7, 15])),
        draw(st.sampled_from(BLOCK_SIZES)),
        nb=draw(st.integers(1, 16) | st.integers(1, 512)),
        fit=draw(st.sampled_from(["exact", "fits"])),
        layout=draw(st.sampled_from(["vllm", "scattered"])),
        ids=draw(st.sampled_from(["small", "any", "near_limit"])),
        seed=draw(st.integers(0, (1 << 32) - 1)),
        views=draw(st.booleans()),
        p0_near_end=draw(st.booleans()),
    )
