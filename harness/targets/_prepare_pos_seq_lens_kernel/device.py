"""``_prepare_pos_seq_lens_kernel`` on the device (docs/CONTRACT.md §15): a Model Runner V2
kernel, fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the GPU 256
at a time, as its record's generator draws them (decodes, drafts and chunks of up to 2048
tokens, counts within a model of 4096 or 131072 tokens; now and then a ``max_num_reqs`` of
2048 and more, whose padding spans two blocks), checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_steps_v2.prepare_pos_seq_lens`) and compared on the GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    cumulative,
    draw_rows,
    feature_sets,
    per_case_any,
    rows_of,
    scheduled_counts,
)
from .layout import NAME
from .record import BLOCK, TARGET

QUERIES = ((1, 1), (1, 17), (1, 2048))
"""A case's query lengths, one range per case (the record's: decodes, drafts, chunks)."""
WIDE = 8
"""One case in this many has 1025 to 3072 more state rows than rows (``max_num_seqs`` of 2048
and more: the last program's padding past one block)."""


def _sizes(b: DeviceBatch) -> dict[str, list[int]]:
    return {"B": b.lengths["idx_mapping"], "R": b.lengths["num_computed_tokens"], "T": b.outputs["pos"][1]}


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps: per case a range of query lengths of :data:`QUERIES`, a model of 4096 or
        131072 tokens, its state rows (:data:`WIDE`); per row its query (an end one time in 32);
        every state row's count below the model's length, a scheduled row's leaving room for its
        query."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        rows = draw_rows(rng, k, device, max_requests)
        wide = rng.random(k) < 1 / WIDE
        rows.R = rows.R + np.where(wide, rng.integers(BLOCK + 1, 3 * BLOCK + 1, size=k), 0)
        rows = rows_of({"b": rows.B.tolist(), "r": rows.R.tolist()}, "b", "r", device)
        R = rows.R
        qlen, s, counts = scheduled_counts(rng, gen, rows, QUERIES)
        T = torch.zeros(k, dtype=torch.int64, device=device).index_add_(0, rows.cid, qlen).cpu().numpy().tolist()
        Bl, Rl = rows.B.tolist(), R.tolist()
        cat = {"idx_mapping": s, "query_start_loc": cumulative(rows, qlen), "num_computed_tokens": counts.to(torch.int32)}
        lengths = {"idx_mapping": Bl, "query_start_loc": [b + 1 for b in Bl], "num_computed_tokens": Rl}
        return DeviceBatch(cat, lengths, {n: [(x,) for x in lengths[n]] for n in cat}, {}, {},
                           {"pos": (torch.int64, T), "seq_lens": (torch.int32, Rl)},
                           [{"num_reqs": b, "max_num_reqs": r} for b, r in zip(Bl, Rl, strict=True)])

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        return tensor_steps_v2.prepare_pos_seq_lens(**b.cat, **_sizes(b))


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        rows = rows_of(b.lengths, "idx_mapping", "num_computed_tokens", a["idx_mapping"].device.type)
        q = a["query_start_loc"].long()
        qlen = q[rows.cu_at + 1] - q[rows.cu_at]
        on = per_case_any(rows, {"decode_rows": qlen == 1, "chunk_rows": qlen > 1, "chunk_past_1024": qlen > BLOCK,
                                 "permuted_state_rows": a["idx_mapping"] != rows.local})
        B, R = rows.B, rows.R
        on |= {"padding": R > B, "no_padding": R == B, "several_rows": B > 1, "many_requests": B > 64,
               "padding_past_1024": R - B > BLOCK}
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
