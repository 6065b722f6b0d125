"""``compute_new_slot_mapping``'s cases (docs/CONTRACT.md §7): the strategy, the bulk generator
and the builder they share; the contract logic is in :mod:`.new_slot_mapping`."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from ..core.case import Case
from ..generation.strategies import INT32_MAX, Scale, draw_shape, query_start_loc_from, random_shape
from .eagle_step import BLOCK_SIZES, MAX_POSITION, MAX_TABLE, max_block_id
from .new_slot_mapping_tour import SHAPES

NAME = "compute_new_slot_mapping"
MAX_TOKENS = 1 << 14
"""Most tokens a generated case holds."""


def random_case(rng: np.random.Generator, scale: Scale, shapes: Any = SHAPES) -> Case:
    """The bulk generator: a tour shape now and then, else a random batch (:func:`_build`)."""
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
    return _build(
        lengths, N, bs,
        nb=int(rng.integers(1, 17)) if pick[3] < 0.7 else int(rng.integers(1, 513)),
        fit=str(rng.choice(["exact", "fits"])),
        layout=str(rng.choice(["vllm", "vllm", "scattered"])),
        ids=str(rng.choice(["small", "any", "near_limit"], p=[0.5, 0.3, 0.2])),
        seed=int(rng.integers(0, 1 << 32)), views=bool(pick[4] < 0.5),
    )  # fmt: skip


def _build(
    lengths: list[int],
    N: int,
    bs: int,
    *,
    nb: int,
    fit: str,
    layout: str,
    ids: str,
    seed: int,
    views: bool,
    p0_near_end: bool | None = None,
    max_tokens: int = MAX_TOKENS,
    max_table: int = MAX_TABLE,
) -> Case:
    """A case: ``lengths`` (qlen per request), ``N`` new tokens each, a table of ``nb`` columns
    (cut to fit MAX_TABLE) and max_model_len filling it (``exact``) or not (``fits``, narrower
    than the table: a wide table); values from ``seed``."""
    rng = np.random.default_rng(seed)
    R = len(lengths)
    while sum(lengths) + R * N > max_tokens:  # shorten the requests, then drop some
        lengths = [x // 2 for x in lengths] if sum(lengths) else lengths[: len(lengths) // 2]
        R = len(lengths)
    nb = max(1, min(nb, max_table // max(R, 1)))
    full = nb * bs
    M = full if fit == "exact" else int(rng.integers(1, full + 1))
    counts = [q + N for q in lengths]
    L = sum(counts)
    if layout == "vllm":
        pos, rej = [], []
        near = rng.random() < 0.5 if p0_near_end is None else p0_near_end
        for q, n in zip(lengths, counts, strict=True):
            k = int(rng.integers(0, q)) if q > 1 and rng.random() < 0.6 else 0  # rejected: at most qlen - 1
            live = n - k
            p0 = max(0, M - live + int(rng.integers(-3, 4))) if near else int(rng.integers(0, M))
            pos += list(range(p0, p0 + live)) + [0] * k
            rej += [False] * live + [True] * k
        positions = np.asarray(pos, dtype=np.int64)
        rejected = np.asarray(rej, dtype=bool)
    else:
        positions = np.where(
            rng.random(L) < 0.8, rng.integers(0, M + 4, size=L), rng.integers(0, MAX_POSITION, size=L, endpoint=True)
        ).astype(np.int64)
        rejected = rng.random(L) < 0.3
    top = max_block_id(bs)
    if ids == "small":
        table = rng.integers(0, min(top, 4096), size=(R, nb), endpoint=True)
    elif ids == "near_limit":
        table = rng.integers(max(0, top - (1 << 16) // bs), top, size=(R, nb), endpoint=True)
    else:
        table = rng.integers(0, top, size=(R, nb), endpoint=True)
    T = sum(lengths)
    return Case(
        kernel=NAME,
        arrays={
            "query_start_loc": query_start_loc_from(lengths) if R else np.zeros(1, np.int32),
            "block_table": table.astype(np.int32).reshape(R, nb),
            "seq_lens": np.asarray([min(INT32_MAX, q + int(rng.integers(0, M))) for q in lengths], dtype=np.int64).astype(np.int32),
            "slot_mapping": rng.integers(-1, 1 << 40, size=T).astype(np.int64),
            "new_positions": positions,
            "is_rejected_token_mask": rejected,
        },
        scalars={"block_size": int(bs), "num_new_tokens": int(N), "max_model_len": int(M)},
        launch={"views": bool(views)},
    )


@st.composite
def cases(draw: st.DrawFn, scale: Scale) -> Case:
    """The default strategy: a tour shape now and then, else small, medium, tail-sized or empty
    batches of requests with N new tokens each (:func:`_build`)."""
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
    return _build(
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
