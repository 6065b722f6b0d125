"""``_gather_block_tables_kernel`` on the device (docs/CONTRACT.md §21): a Model Runner V2
kernel, fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the GPU 256 at
a time (:attr:`~...targetkit.step_batch.StepBatchDevice.batch`; each case holds its groups' block
tables: some 50 MiB a batch on average), as its record's generator draws them (one to
three KV-cache groups a batch, block sizes 1 to 64, tables of up to 4 or 64 blocks a row, any
counts of blocks, sliding windows half the time with a reach per window group, grid rows past
the batch; one case in 10 the tour's long context: a group of 8192 blocks a row, rows of more
than 1024 of them, padding rows as wide), checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_steps_v2.gather_block_tables`) and compared on the GPU, every
entry of every group's gathered table (the entries past a row's blocks and the rows past the
grid never written: they keep the buffers' sentinels)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...generation.choosers import EDGE_ODDS
from ...targetkit.device import DeviceCase
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.runner_v2 import BLOCK, MAX_MODEL_LEN
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    chosen,
    draw_rows,
    feature_sets,
    owners,
    per_case_any,
    rows_of,
    state_rows,
)
from .layout import NAME, dst, src
from .record import TARGET

SIZES = (16, 1, 4, 32, 64)
IDS = 1 << 20
"""Block ids are drawn in ``[0, IDS]`` (0: the null block)."""
LONG = 10
"""One case in this many is the tour's long context (a tenth of the record's production cases
are one of its tour's shapes): 1 to 3 rows over one or two more state rows, group 0 a
full-attention table of ``MAX_MODEL_LEN // 16`` blocks a row (counts of 1025 and more), every
other group a sliding window's table of 64 (reach 1 to 4095), blocks of 16, counts of up to
``MAX_MODEL_LEN`` tokens, a padding row or more."""


def _integer(rng: np.random.Generator, lo: Any, hi: Any) -> np.ndarray:
    """Per element an integer in ``[lo, hi]``, an end of the range (either, at even odds) one
    time in :data:`EDGE_ODDS` where the range has two: as ``RngChooser.integer`` draws one."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64))
    u = rng.integers(lo, hi, endpoint=True)
    edge = (rng.integers(0, EDGE_ODDS, size=lo.shape) == 0) & (hi > lo)
    return np.where(edge, np.where(rng.integers(0, 2, size=lo.shape) == 1, hi, lo), u)


def _sizes(b: DeviceBatch) -> dict[str, Any]:
    """The host-known sizes of ``b`` (from its shapes and scalars alone)."""
    G = len([n for n in b.cat if n.startswith("src_block_table_")])
    K = len(b)
    return {"B": b.lengths["idx_mapping"], "R": [b.shapes[src(0)][k][0] for k in range(K)],
            "NR": [s["num_rows"] for s in b.scalars], "W": [[b.shapes[src(g)][k][1] for g in range(G)] for k in range(K)],
            "mask": [bool(s["MASK_SLIDING_WINDOW"]) for s in b.scalars]}


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps of ``G`` groups (1 to 3, the batch's): per case ``B`` rows (distinct state
        rows of ``R``), ``MASK_SLIDING_WINDOW`` half the time, grid rows ``B`` to ``R``; per
        case and group a block size (:data:`SIZES`), a table width of 1 to 4 or 1 to 64, a reach
        (masked: 0 or 1 to 2000 at even odds; else 0); per state row its counts of blocks (0 to
        the width), computed tokens (0 to 4096 masked, else 0 to 100) and block ids (0 to
        :data:`IDS`), the ends of each range one time in 32; one case in :data:`LONG` the
        tour's long context."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        G = int(rng.integers(1, 4))
        rows = draw_rows(rng, k, device, max_requests)
        long = rng.random(k) < 1 / LONG
        B = np.where(long, rng.integers(1, 4, size=k), rows.B)
        R = np.where(long, B + rng.integers(1, 3, size=k), rows.R)
        rows = rows_of({"b": B.tolist(), "r": R.tolist()}, "b", "r", device)
        NR = np.where(long, rng.integers(np.minimum(B + 1, R), R, endpoint=True), _integer(rng, B, R))
        mask = long | (rng.random(k) < 0.5)
        sizes = np.where(long[:, None], 16, np.asarray(SIZES)[rng.integers(0, len(SIZES), size=(k, G))])
        W = _integer(rng, 1, np.where(rng.random((k, G)) < 0.5, 4, 64))
        window = mask[:, None] & (rng.random((k, G)) < 0.5)
        reach = np.where(window, _integer(rng, 1, np.full((k, G), 2000)), 0)
        W[long] = [MAX_MODEL_LEN // 16] + [64] * (G - 1)
        n_long = int(long.sum())
        reach[long] = np.concatenate([np.zeros((n_long, 1), np.int64), rng.integers(1, 4096, size=(n_long, G - 1))], 1)
        # the state rows' computed tokens and each group's counts of blocks (ends one time in 32)
        sc = owners(R, device)
        top = np.where(long, MAX_MODEL_LEN - 1, np.where(mask, 4096, 100))
        counts = chosen(gen, torch.zeros_like(sc), host_to(top, device)[sc], ends=1 / 32)
        nc = owners(G * R, device)
        g = (torch.arange(nc.numel(), device=device) - host_to(np.cumsum(G * R) - G * R, device)[nc]) // \
            host_to(R, device)[nc]
        at = nc * G + g
        lo = host_to(np.where(long[:, None] & (np.arange(G) == 0), BLOCK + 1, 0).reshape(-1), device)[at]
        num_blocks = chosen(gen, lo, host_to(W.reshape(-1), device)[at], ends=1 / 32)
        s = state_rows(rows, gen)
        Bl, Rl = B.tolist(), R.tolist()
        cat = {"idx_mapping": s, "num_blocks": num_blocks.to(torch.int32), "num_computed_tokens": counts.to(torch.int32),
               "sliding_window_reach": host_to(reach.reshape(-1).astype(np.int32), device),
               "block_sizes": host_to(sizes.reshape(-1).astype(np.int32), device)}
        lengths = {"idx_mapping": Bl, "num_blocks": (G * R).tolist(), "num_computed_tokens": Rl,
                   "sliding_window_reach": [G] * k, "block_sizes": [G] * k}
        shapes = {x: [(y,) for y in lengths[x]] for x in cat} | {"num_blocks": [(G, r) for r in Rl]}
        outputs = {}
        for h in range(G):
            cells = R * W[:, h]
            ids = torch.randint(0, IDS + 1, (int(cells.sum()),), generator=gen, device=device, dtype=torch.int32)
            u = torch.rand((2, ids.numel()), generator=gen, device=device)
            cat[src(h)] = torch.where(u[0] < 1 / 32, torch.where(u[1] < 0.5, 0, IDS), ids).to(torch.int32)
            lengths[src(h)] = cells.tolist()
            shapes[src(h)] = [(r, int(w)) for r, w in zip(Rl, W[:, h], strict=True)]
            outputs[dst(h)] = (torch.int32, cells.tolist())
        scalars = [{"num_reqs": b, "num_rows": int(nr), "MASK_SLIDING_WINDOW": bool(m)}
                   for b, nr, m in zip(Bl, NR, mask, strict=True)]
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, scalars)

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        a = b.cat
        G = len([x for x in a if x.startswith("src_block_table_")])
        return tensor_steps_v2.gather_block_tables(
            idx_mapping=a["idx_mapping"], src_block_tables=[a[src(g)] for g in range(G)], num_blocks=a["num_blocks"],
            num_computed_tokens=a["num_computed_tokens"], sliding_window_reach=a["sliding_window_reach"],
            block_sizes=a["block_sizes"], **_sizes(b))

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        """Through the record's launch, which counts the groups off ``num_blocks`` (``[G, R]``);
        each gathered table in its source's shape."""
        G = int(views["num_blocks"].shape[0])
        views = dict(views) | {dst(g): views[dst(g)].view(views[src(g)].shape) for g in range(G)}
        self.record.launch(impl, views, Case(kernel=self.name, arrays={"num_blocks": np.empty((G, 0), np.int32)},
                                             scalars=dict(dc.scalars), launch={}))


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        z = _sizes(b)
        K = len(b)
        Wn = np.asarray(z["W"], dtype=np.int64).reshape(K, -1)
        G = Wn.shape[1]
        rows = rows_of(b.lengths, "idx_mapping", "num_computed_tokens", a["idx_mapping"].device.type)
        s = a["idx_mapping"].long()
        Rn = np.asarray(z["R"], dtype=np.int64)
        mask = np.asarray(z["mask"], dtype=bool)
        reach = a["sliding_window_reach"].cpu().numpy().reshape(K, G).astype(np.int64)
        sizes = a["block_sizes"].long()
        first = a["num_computed_tokens"].long()[rows.state_base + s]
        nb = a["num_blocks"].reshape(-1).long()
        flags = {"permuted_state_rows": s != rows.local}
        for g in range(G):
            n = nb[rows.per_row(np.cumsum(G * Rn) - G * Rn + g * Rn) + s]
            r = rows.per_row(reach[:, g])
            null = torch.where(rows.per_row(mask) & (r > 0), (first - r).clamp(min=0) // sizes[rows.cid * G + g], 0)
            more = {"sliding_window_nulls": (null > 0) & (n > 0), "empty_row": n == 0,
                    "full_row": n == rows.per_row(Wn[:, g]), "row_past_1024_blocks": n > BLOCK}
            flags |= {f: flags[f] | v if f in flags else v for f, v in more.items()}
        on = per_case_any(rows, flags)
        NR = np.asarray(z["NR"], dtype=np.int64)
        on |= {"full_attention": (~(mask[:, None] & (reach > 0))).any(1), "no_mask": ~mask,
               "several_groups": np.full(K, G > 1), "padding_rows": NR > rows.B, "several_rows": rows.B > 1,
               "many_requests": rows.B > 64, "padding_past_1024_blocks": (NR > rows.B) & (Wn > BLOCK).any(1)}
        return feature_sets(on, K)


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
