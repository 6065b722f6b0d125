"""``_compute_slot_mappings_kernel`` on the device (docs/CONTRACT.md §22): a Model Runner V2
kernel, fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the GPU 256 at
a time (:attr:`~...targetkit.step_batch.StepBatchDevice.batch`; each case holds its groups' block
tables: some 650 MiB of inputs and outputs a batch on average), as its record's generator draws them (one to
three KV-cache groups a batch, block sizes 1 to 64, decode context parallelism of 1 to 8 ranks
with an interleave dividing the block sizes, sharded and disabled groups, dummy rows; a
step's chunks or a drafter's one-token rows; now and then a chunk past 1024 tokens and a buffer
padded past 1024 slots), checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_steps_v2.compute_slot_mappings`) and compared on the GPU, every
slot of every group."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...targetkit.device import DeviceCase
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.runner_v2 import BLOCK
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    chosen,
    cumulative,
    draw_rows,
    feature_sets,
    per_case_any,
    rows_of,
    state_rows,
)
from .layout import NAME, table, widths_for
from .record import TARGET

SIZES = (16, 32, 64, 1)
RANKS = (1, 1, 2, 4, 8)
QUERIES = ((1, 1), (1, 17), (1, 600))
LONG = 8
"""One case in this many has up to 8 rows of chunks of 1025 to 2048 tokens (a model of 4096)
and, another one in this many, a buffer 1025 to 3000 slots wider than its tokens: the tour's
extremes."""


def _sizes(b: DeviceBatch) -> dict[str, Any]:
    G = len([n for n in b.cat if n.startswith("block_table_")])
    sc = b.scalars
    return {"B": b.lengths["idx_mapping"], "R": [b.shapes[table(0)][k][0] for k in range(len(b))],
            "T": b.lengths["positions"], "MT": [s["max_num_tokens"] for s in sc],
            "W": [[b.shapes[table(g)][k][1] for g in range(G)] for k in range(len(b))],
            "cp": [(s["CP_SIZE"], s["cp_rank"], s["CP_INTERLEAVE"]) for s in sc]}


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps of ``G`` groups (1 to 3, the batch's): per case each group's block size
        (:data:`SIZES`), ``CP_SIZE`` (:data:`RANKS`) and rank, an interleave dividing the block
        sizes, sharded groups (seven in ten under context parallelism), enabled groups (17 in
        20), a model of 64 or 4096 tokens and tables as wide as it needs, of block ids below
        2**20; dummy rows (``-1``) in two cases in ten; a step (half the cases: chunks of a
        range of :data:`QUERIES` at any start inside the model) or a drafter's decode step (one
        token a row at any position); the buffer up to 200 slots wider (:data:`LONG`)."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        G = int(rng.integers(1, 4))
        rows = draw_rows(rng, k, device, max_requests)
        long = rng.random(k) < 1 / LONG  # its chunks past 1024 tokens: a few rows (within 2**22 tokens)
        B = np.where(long, np.minimum(rows.B, rng.integers(1, 9, size=k)), rows.B)
        rows = rows_of({"b": B.tolist(), "r": (rows.R - rows.B + B).tolist()}, "b", "r", device)
        n, R = rows.n, rows.R
        sizes = np.asarray(SIZES)[rng.integers(0, len(SIZES), size=(k, G))]
        CP = np.asarray(RANKS)[rng.integers(0, len(RANKS), size=k)]
        rank = (rng.random(k) * CP).astype(np.int64)
        IL = np.asarray([rng.choice([i for i in (1, 2, 4, 8, 16) if all(x % i == 0 for x in row)]) for row in sizes])
        sharded = (CP[:, None] > 1) & (rng.random((k, G)) < 0.7)
        M = np.where(long | (rng.random(k) < 0.5), 4096, 64)
        W = np.asarray([widths_for(int(m), row.tolist(), sh.tolist(), int(c))
                        for m, row, sh, c in zip(M, sizes, sharded, CP, strict=True)])
        enabled = rng.random((k, G)) < 0.85
        step = long | (rng.random(k) < 0.5)
        lo, hi = np.asarray(QUERIES)[rng.integers(0, len(QUERIES), size=k)].T
        lo, hi = np.where(long, BLOCK + 1, lo), np.where(long, 2 * BLOCK, hi)
        zero = torch.zeros(n, dtype=torch.int64, device=device)
        Mr = rows.per_row(M)
        qlen = torch.where(rows.per_row(step), torch.minimum(chosen(gen, rows.per_row(lo), rows.per_row(hi), ends=1 / 32), Mr),
                           zero + 1)
        start = torch.where(rows.per_row(step), chosen(gen, zero, Mr - qlen), chosen(gen, zero, Mr - 1))
        s = state_rows(rows, gen)
        dummy = rows.per_row(rng.random(k) < 0.2) & (torch.randint(0, 5, (n,), generator=gen, device=device) == 0)
        s = torch.where(dummy, -1, s)
        T = torch.zeros(k, dtype=torch.int64, device=device).index_add_(0, rows.cid, qlen).cpu().numpy()
        tok = torch.repeat_interleave(torch.arange(n, device=device), qlen, output_size=int(T.sum()))
        positions = start[tok] + torch.arange(int(T.sum()), device=device) - (torch.cumsum(qlen, 0) - qlen)[tok]
        wide = rng.random(k) < 1 / LONG
        MT = T + np.where(wide, rng.integers(BLOCK + 1, 3000, size=k),
                          np.where(rng.random(k) < 0.5, 0, rng.integers(0, 201, size=k)))
        Bl, Rl, Tl = B.tolist(), R.tolist(), T.tolist()
        cat = {"idx_mapping": s, "query_start_loc": cumulative(rows, qlen), "positions": positions,
               "block_sizes": host_to(sizes.reshape(-1).astype(np.int32), device),
               "slot_mapping_enabled": host_to(enabled.reshape(-1), device),
               "dcp_sharded": host_to(sharded.reshape(-1), device)}
        lengths = {"idx_mapping": Bl, "query_start_loc": [b + 1 for b in Bl], "positions": Tl,
                   "block_sizes": [G] * k, "slot_mapping_enabled": [G] * k, "dcp_sharded": [G] * k}
        shapes = {x: [(y,) for y in lengths[x]] for x in cat}
        for g in range(G):
            cells = R * W[:, g]
            cat[table(g)] = torch.randint(0, 1 << 20, (int(cells.sum()),), generator=gen, device=device, dtype=torch.int32)
            lengths[table(g)] = cells.tolist()
            shapes[table(g)] = [(r, int(w)) for r, w in zip(Rl, W[:, g], strict=True)]
        scalars = [{"num_reqs": b, "max_num_tokens": int(mt), "cp_rank": int(r), "CP_SIZE": int(c), "CP_INTERLEAVE": int(i)}
                   for b, mt, r, c, i in zip(Bl, MT, rank, CP, IL, strict=True)]
        host = [{"shapes": {"slot_mappings": (G, int(mt))}, "G": G} for mt in MT]
        return DeviceBatch(cat, lengths, shapes, {}, {}, {"slot_mappings": (torch.int64, (G * MT).tolist())}, scalars,
                           host=host)

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        a = b.cat
        G = len([x for x in a if x.startswith("block_table_")])
        return tensor_steps_v2.compute_slot_mappings(
            idx_mapping=a["idx_mapping"], query_start_loc=a["query_start_loc"], positions=a["positions"],
            tables=[a[table(g)] for g in range(G)], block_sizes=a["block_sizes"],
            slot_mapping_enabled=a["slot_mapping_enabled"], dcp_sharded=a["dcp_sharded"], **_sizes(b))

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        """Through the record's launch, which counts the groups off ``block_sizes``."""
        G = dc.host["G"] if dc.host and "G" in dc.host else int(views["block_sizes"].numel())
        shapes = dc.host.get("shapes") if dc.host else None
        if shapes:
            views = dict(views) | {x: views[x].view(shape) for x, shape in shapes.items()}
        self.record.launch(impl, views, Case(kernel=self.name, arrays={"block_sizes": np.empty(G, np.int32)},
                                             scalars=dict(dc.scalars), launch={}))


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        z = _sizes(b)
        G = len(z["W"][0])
        rows = rows_of(b.lengths, "idx_mapping", None, a["idx_mapping"].device.type)
        q = a["query_start_loc"].long()
        qlen = q[rows.cu_at + 1] - q[rows.cu_at]
        s = a["idx_mapping"]
        on = per_case_any(rows, {"dummy_row": s < 0, "chunk_rows": qlen > 1, "not_draft": qlen != 1,
                                 "permuted_state_rows": (s >= 0) & (s != rows.local), "chunk_past_1024": qlen > BLOCK})
        on["draft_step"] = ~on.pop("not_draft")
        sh = a["dcp_sharded"].cpu().numpy().reshape(len(b), G)
        en = a["slot_mapping_enabled"].cpu().numpy().reshape(len(b), G)
        CP = np.asarray([c[0] for c in z["cp"]])
        IL = np.asarray([c[2] for c in z["cp"]])
        spare = np.asarray(z["MT"]) - np.asarray(z["T"])
        on |= {"context_parallel": CP > 1, "sharded_group": (CP > 1) & (sh & en).any(1),
               "unsharded_group_under_cp": (CP > 1) & (~sh & en).any(1), "interleave": (CP > 1) & (IL > 1),
               "disabled_group": (~en).any(1), "padding": spare > 0, "several_groups": np.full(len(b), G > 1),
               "several_rows": rows.B > 1, "many_requests": rows.B > 64, "padding_past_1024": spare > BLOCK}
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
