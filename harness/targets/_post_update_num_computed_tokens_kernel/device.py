"""``_post_update_num_computed_tokens_kernel`` on the device (docs/CONTRACT.md §20): a Model
Runner V2 kernel, fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the
GPU 256 at a time, as its record's generator draws them (a pooling model's step: decodes,
chunks and whole prompts, counts within a model of 4096 or 131072 tokens), checked against the
batched torch oracle (:func:`~eaglefuzz.oracles.tensor_steps_v2.post_update_num_computed_tokens`)
and compared on the GPU (the counts updated in place; every state row no batch row names
untouched)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ...generation.strategies import INT16_MAX
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    cumulative,
    draw_rows,
    feature_sets,
    per_case_sum,
    rows_of,
    scheduled_counts,
)
from .layout import NAME
from .record import TARGET

QUERIES = ((1, 1), (1, 16), (1, 2048))
"""A case's query lengths, one range per case (the record's: decodes, short chunks, prompts)."""


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps: per case a range of query lengths of :data:`QUERIES` and a model of 4096
        or 131072 tokens; per row its query (an end one time in 32); every state row's count
        below the model's length, a scheduled row's leaving room for its query."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        rows = draw_rows(rng, k, device, max_requests)
        R = rows.R
        qlen, s, counts = scheduled_counts(rng, gen, rows, QUERIES)
        B = rows.B.tolist()
        cat = {"idx_mapping": s, "query_start_loc": cumulative(rows, qlen), "num_computed_tokens": counts.to(torch.int32)}
        lengths = {"idx_mapping": B, "query_start_loc": [b + 1 for b in B], "num_computed_tokens": R.tolist()}
        return DeviceBatch(cat, lengths, {n: [(x,) for x in lengths[n]] for n in cat}, {}, {}, {},
                           [{"num_reqs": b} for b in B], inout=("num_computed_tokens",))

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        rows = rows_of(b.lengths, "idx_mapping", "num_computed_tokens", b.cat["idx_mapping"].device.type)
        return tensor_steps_v2.post_update_num_computed_tokens(**b.cat, state_base=rows.state_base, cu_at=rows.cu_at)


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        rows = rows_of(b.lengths, "idx_mapping", "num_computed_tokens", a["idx_mapping"].device.type)
        q = a["query_start_loc"].long()
        qlen = q[rows.cu_at + 1] - q[rows.cu_at]
        after = a["num_computed_tokens"].long()[rows.state_base + a["idx_mapping"]] + qlen
        on = per_case_sum(rows, {"decode_rows": qlen == 1, "chunk_rows": qlen > 1,
                                 "permuted_state_rows": a["idx_mapping"] != rows.local, "counts_past_32767": after > INT16_MAX,
                                 "tokens": qlen})
        on = {f: v > (INT16_MAX if f == "tokens" else 0) for f, v in on.items()}
        on["offsets_past_32767"] = on.pop("tokens")
        on |= {"untouched_state_rows": rows.R > rows.B, "several_rows": rows.B > 1, "many_requests": rows.B > 64}
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
