"""``_expand_idx_mapping_kernel`` on the device (docs/CONTRACT.md §17): a Model Runner V2 kernel,
fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the GPU 256 at a
time, as its record's generator draws them (``K`` of 1-4 or 1-16 drafts, each row 1 to
``K + 1`` logits), checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_steps_v2.expand_idx_mapping`) and compared on the GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ....oracles.host_copy import host_to
from ...generation.strategies import MAX_NUM_SEQS
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.runner_v2 import npow2
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    chosen,
    cumulative,
    draw_drafts,
    draw_rows,
    feature_sets,
    per_case_any,
    rows_of,
    state_rows,
)
from .layout import NAME
from .record import TARGET


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps: per case ``K`` (1-4 or 1-16 drafts, ``max_expand_len = K + 1``), its
        state rows a permutation's first ``B``; per row 1 to ``K + 1`` logits (an end one time
        in 32)."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        rows = draw_rows(rng, k, device, max_requests)
        K = draw_drafts(rng, k)
        one = torch.ones(rows.n, dtype=torch.int64, device=device)
        nl = chosen(gen, one, rows.per_row(K + 1), ends=1 / 32)
        sums = torch.zeros(k, dtype=torch.int64, device=device).index_add_(0, rows.cid, nl)
        N = sums.cpu().numpy().tolist()  # the outputs' sizes: the batch's one wait for the device
        B = rows.B.tolist()
        cat = {"idx_mapping": state_rows(rows, gen), "cu_num_logits": cumulative(rows, nl)}
        lengths = {"idx_mapping": B, "cu_num_logits": [b + 1 for b in B]}
        return DeviceBatch(cat, lengths, {n: [(x,) for x in lengths[n]] for n in cat}, {}, {},
                           {"expanded_idx_mapping": (torch.int64, N), "expanded_local_pos": (torch.int32, N)},
                           [{"num_reqs": b, "max_expand_len": int(x) + 1} for b, x in zip(B, K, strict=True)])

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        rows = rows_of(b.lengths, "idx_mapping", None, b.cat["idx_mapping"].device.type)
        N = np.asarray(b.outputs["expanded_local_pos"][1], dtype=np.int64)
        return tensor_steps_v2.expand_idx_mapping(**b.cat, cu_at=rows.cu_at, out_base=rows.per_row(np.cumsum(N) - N),
                                                  total=int(N.sum()))


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        rows = rows_of(b.lengths, "idx_mapping", None, a["idx_mapping"].device.type)
        cu = a["cu_num_logits"].long()
        nl = cu[rows.cu_at + 1] - cu[rows.cu_at]
        E = np.asarray([s["max_expand_len"] for s in b.scalars], dtype=np.int64)
        first = host_to(np.cumsum(rows.B) - rows.B, nl.device)[rows.cid]
        on = per_case_any(rows, {"no_drafts_row": nl == 1, "full_row": nl == rows.per_row(E), "ragged": nl != nl[first],
                                 "permuted_state_rows": a["idx_mapping"] != rows.local, "sixteen_drafts": nl >= 16})
        on |= {"block_wider": np.asarray([npow2(int(e)) > e for e in E]), "several_rows": rows.B > 1,
               "many_requests": rows.B > 64, "beyond_1024_rows": rows.B > MAX_NUM_SEQS}
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
