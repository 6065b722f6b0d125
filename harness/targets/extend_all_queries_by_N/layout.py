"""How a case of ``extend_all_queries_by_N`` is laid out (docs/CONTRACT.md §4.1): the metadata's
arrays and scalars, the function's other arguments, and the case built from request lengths.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    INT32_MAX,
    INT32_MIN,
    query_start_loc_from,
)

NAME = "extend_all_queries_by_N"
"""The target's name (its registry key, folder and vLLM name)."""



I32, I64 = np.dtype(np.int32), np.dtype(np.int64)


MAX_BATCH = 512


SLOT_CAP = 256
"""Longest slot mapping a case stores: the function only passes it through, so its length is
free; capping it keeps cases (and their reproducers) small."""


NEAR_LIMIT = 1 << 16


PRODUCTION_LIMIT = 1 << 30
"""The production tier's bound on every value after extension (``query_start_loc[i] + i*N``,
``seq_lens + N``): vLLM's token counts are far below 2**31 (docs/CONTRACT.md §4.2)."""


SLOT_ID_LIMIT = 1 << 31
"""Slot ids of the production tier are below this (int32 slots, docs/CONTRACT.md §7.2), or -1."""


ARRAYS = {
    "query_start_loc": (I32, 1),
    "seq_lens": (I32, 1),
    "block_table": (I32, 2),
    "slot_mapping": (I64, 1),
    "new_slot_mapping": (I64, 1),
    "arange": (I32, 1),
}


INT_SCALARS = ("N", "num_reqs", "num_actual_tokens", "max_query_len", "max_seq_len")


BOOL_SCALARS = ("causal", "optional_fields", "device_copies_on_device")


ALIASES = {"_seq_lens_cpu": "seq_lens_cpu", "_num_computed_tokens_cpu": "num_computed_tokens_cpu"}
"""vLLM's newer field names for the CPU caches -> ours."""


def _slots(rng: np.random.Generator, n: int, wide: bool) -> np.ndarray:
    out = rng.integers(0, 1 << 40 if wide else SLOT_ID_LIMIT, size=n, dtype=np.int64)
    out[rng.random(n) < 0.1] = -1
    return out


def build(
    lengths: list[int],
    seq: list[int],
    *,
    N: int,
    num_reqs: int,
    token_pad: int,
    query_len_pad: int,
    seq_len_pad: int,
    arange_extra: int,
    width: int,
    seed: int,
    causal: bool,
    optional_fields: bool,
    on_device: bool,
    wide_ids: bool = False,
) -> Case:
    """The case of requests with query ``lengths`` and sequence lengths ``seq``; the block table
    and slot mappings random from ``seed``: block ids ``>= 0`` and slot ids below 2**31 (or -1)
    as vLLM's, or (``wide_ids``, the extended tier) any int32 block ids and slots up to 2**40."""
    R = len(lengths)
    qsl = query_start_loc_from(lengths) if R else np.zeros(1, dtype=np.int32)
    tokens = int(qsl[-1]) + token_pad
    rng = np.random.default_rng(seed)
    return Case(
        kernel=NAME,
        arrays={
            "query_start_loc": qsl,
            "seq_lens": np.asarray(seq, dtype=np.int64).astype(np.int32).reshape(R),
            "block_table": rng.integers(INT32_MIN if wide_ids else 0, INT32_MAX, size=(R, width), endpoint=True,
                                        dtype=np.int32),
            "slot_mapping": _slots(rng, min(tokens, SLOT_CAP), wide_ids),
            "new_slot_mapping": _slots(rng, min(tokens + R * N, SLOT_CAP), wide_ids),
            "arange": np.arange(R + 1 + arange_extra, dtype=np.int32),
        },
        scalars={
            "N": int(N),
            "num_reqs": int(num_reqs),
            "num_actual_tokens": tokens,
            "max_query_len": max(lengths, default=0) + query_len_pad,
            "max_seq_len": max(seq, default=0) + seq_len_pad,
            "causal": bool(causal),
            "optional_fields": bool(optional_fields),
            "device_copies_on_device": bool(on_device),
        },
    )
