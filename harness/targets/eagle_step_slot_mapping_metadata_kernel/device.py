"""``eagle_step_slot_mapping_metadata_kernel`` on the device (docs/CONTRACT.md §6): one EAGLE
draft step, fuzzed with production batches of up to 1024 requests (a tail to 4096) drawn on the
GPU 256 at a time, as its record's generator draws them (vLLM's block sizes, contiguous tables
as wide as the model length needs, of small, any or near-limit block ids; positions anywhere up
to the drafter gate ``M - 2``, at its end or one short of a block start; sequence lengths that
follow the positions or pass them (M-RoPE); each request's allocation; cudagraph padding or
none; ``out_clamped_positions`` a buffer of its own or the positions buffer itself; one case in
ten a tour shape: a context past 2**24 with block ids near the int32 slot limit, or 1025 to
1088 requests), checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_ops.eagle_step_slot_mapping_metadata`) and compared on the
GPU, every element: ``seq_lens`` updated in place, and, where aliased, the clamped positions
written into the positions buffer (a case's ``out_clamped_positions`` then has no elements of
its own)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...generation.strategies import FLOAT32_EXACT, INT16_MAX, INT32_MAX, MAX_NUM_SEQS, TOUR_SHARE
from ...targetkit.block_tables import MAX_POSITION, MAX_TABLE, max_block_id, table_width
from ...targetkit.device import DeviceCase
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    chosen,
    feature_sets,
    owners,
    per_case_any,
    rows_of,
    uniform,
)
from .cases import PRODUCTION_BLOCK_SIZES
from .layout import CAPTURE_SIZES, NAME, PAD_ID
from .record import TARGET

TOUR = TOUR_SHARE
"""The share of cases that are one of the tour's shapes (as the record's bulk generator draws
them), half of them each."""
LONG_SIZES = (1024, 528, 512)
MANY_SIZES = (16, 32, 64)
def _integer(rng: np.random.Generator, lo: Any, hi: Any, k: int) -> np.ndarray:
    """``k`` draws of :meth:`~...generation.choosers.RngChooser.integer` (an end of the range one
    time in 16)."""
    lo, hi = np.broadcast_to(np.asarray(lo, dtype=np.int64), k), np.broadcast_to(np.asarray(hi, dtype=np.int64), k)
    u = rng.integers(lo, hi, endpoint=True)
    edge = (hi > lo) & (rng.random(k) < 1 / 16)
    return np.where(edge, np.where(rng.random(k) < 0.5, hi, lo), u)


POOL_SEED = 6
"""The seed of the deployments device mode draws its cases from (:func:`deployments`)."""


@functools.cache
def deployments() -> dict[str, np.ndarray]:
    """The deployments a device run's cases are drawn from: ``block_size``, ``max_model_len`` and
    the table's width ``n_blocks_per_req`` are the kernel's compile-time constants, which one
    deployment of vLLM compiles once; a case of its own triple would make Triton compile the
    kernel anew for nearly every case on a GPU. Two for each of vLLM's block sizes, drawn as the
    record's ``cases.body`` draws a case's (1-16 or 1-512 columns, a model as long as the table or
    shorter, two tokens at least), then the tour's: a long context (a model past 2**24 tokens on
    a table as wide as vLLM's) for each of :data:`LONG_SIZES`, narrow tables for 1025 to 1088
    requests for each of :data:`MANY_SIZES`. Returns ``bs``, ``nb``, ``M`` and each one's
    ``kind`` (0 ordinary, 1 long context, 2 many requests). The fuzz and bulk modes draw every
    triple; a device run meets these (each compiled once per process)."""
    rng = np.random.default_rng(POOL_SEED)
    bs = np.repeat(np.asarray(PRODUCTION_BLOCK_SIZES), 2)
    D = bs.size
    nb = _integer(rng, 1, np.where(np.arange(D) % 4 < 2, 16, 512), D)
    span = nb * bs
    M = np.where(np.arange(D) % 2 == 0, span, 1 + _integer(rng, 0, 1 << 30, D) % span)
    nb = np.where(M < 2, np.maximum(nb, -(-2 // bs)), nb)
    M = np.maximum(M, 2)
    lM = FLOAT32_EXACT + rng.integers(2048, 1 << 16, size=len(LONG_SIZES))
    mnb = rng.integers(1, 17, size=len(MANY_SIZES))
    mM = np.maximum(2, mnb * np.asarray(MANY_SIZES) - rng.integers(0, np.asarray(MANY_SIZES)))
    return {"bs": np.concatenate([bs, LONG_SIZES, MANY_SIZES]),
            "nb": np.concatenate([nb, [table_width(int(m), b) for m, b in zip(lM, LONG_SIZES, strict=True)], mnb]),
            "M": np.concatenate([M, lM, mM]),
            "kind": np.concatenate([np.zeros(D, np.int64), np.ones(len(LONG_SIZES), np.int64), np.full(len(MANY_SIZES), 2)])}


class _Batch(DeviceBatch):
    """A batch whose aliased cases write their clamped positions into ``positions``: those count
    as verified output, as the record's ``output_tokens`` counts ``out_clamped_positions``."""

    def tokens(self, k: int) -> int:
        return super().tokens(k) + (self.lengths["positions"][k] if self.host[k]["aliased"] else 0)


def _sizes(b: DeviceBatch) -> dict[str, list]:
    """The oracle's host-known sizes of each case."""
    return {"B": b.lengths["positions"], "IB": b.outputs["out_slot_mapping"][1],
            "NB": [s["n_blocks_per_req"] for s in b.scalars], "block_size": [s["block_size"] for s in b.scalars],
            "max_model_len": [s["max_model_len"] for s in b.scalars], "aliased": [h["aliased"] for h in b.host]}


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET
    oracle_name = "torch oracle (oracles/tensor_ops.py)"

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` draft steps as the record's generator draws them (``cases.body`` at the device's
        scale, the tour's shapes one case in ten): per case its deployment (one of :func:`deployments`), its requests (up to 8, to ``max_requests`` or to four times that,
        at 6:3:1, within 2**15 table elements), the
        sequence lengths' mode (following the positions, or M-RoPE's one time in three), the
        block ids' range, cudagraph padding (half the cases: ``B`` plus 1-16, or the next
        capture size) and aliasing (half); per request its position's kind (anywhere, at the
        gate, one short of a block start) and offset, its M-RoPE length and its allocation."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        tour = rng.random(k) < TOUR
        long = tour & (rng.random(k) < 0.5)
        many = tour & ~long
        body = ~tour
        top = np.asarray([8, max_requests, 4 * max_requests])[np.searchsorted([6, 9], rng.integers(0, 10, size=k), side="right")]
        # each case one of the run's deployments (the tour's their own): its block size, table
        # width and model length; an ordinary case's requests within MAX_TABLE cells of table
        dep = deployments()
        pick = [np.flatnonzero(dep["kind"] == x) for x in range(3)]
        d = np.where(long, rng.choice(pick[1], size=k), np.where(many, rng.choice(pick[2], size=k), rng.choice(pick[0], size=k)))
        bs, nb, M = dep["bs"][d], dep["nb"][d], dep["M"][d]
        B = np.where(long, rng.integers(1, 3, size=k),
                     np.where(many, rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65, size=k),
                              np.minimum(_integer(rng, 1, top, k), np.maximum(1, MAX_TABLE // nb))))
        mrope = body & (rng.integers(0, 3, size=k) == 2)
        ids = np.where(long, 0, np.where(many, 1, rng.integers(0, 3, size=k)))  # small, any, near the limit
        padded = np.where(long, rng.random(k) >= 0.7, rng.random(k) < 0.5)
        extra = np.where(long, rng.integers(1, 5, size=k), np.where(many, rng.integers(1, 17, size=k), _integer(rng, 1, 16, k)))
        capture = body & (rng.random(k) < 0.5)
        cap = np.asarray(CAPTURE_SIZES)
        nxt = np.where(B <= cap[-1], cap[np.minimum(np.searchsorted(cap, B), cap.size - 1)], B + extra)
        IB = np.where(padded, np.where(capture, nxt, B + extra), B)
        aliased = rng.random(k) < 0.5

        rows = rows_of({"b": B.tolist()}, "b", None, device)
        n = rows.n
        zero = torch.zeros(n, dtype=torch.int64, device=device)
        Mr, bsr = rows.per_row(M), rows.per_row(bs)
        # positions: the body's kinds (any, end, block) and offsets (below 2**20 or 2**40); the
        # tour's 1025 requests at 1:2.2:0.8 with offsets below 2**20; its long context's M - 2 and M - 3
        u = torch.rand((3, n), generator=gen, device=device, dtype=torch.float64)
        kind = torch.where(rows.per_row(many), torch.where(u[0] < 0.25, 1, torch.where(u[0] < 0.8, 0, 2)),
                           chosen(gen, zero, zero + 2, ends=1 / 32))
        wide = torch.where(rows.per_row(body) & (u[1] < 0.5), MAX_POSITION, 1 << 20)
        off = torch.where(rows.per_row(many), uniform(gen, zero, zero + (1 << 20) - 1), chosen(gen, zero, wide, ends=1 / 32))
        gate = (Mr - 2).clamp(min=0)
        blocks = (Mr + bsr - 1) // bsr
        pos = torch.where(kind == 1, (gate - off % 4).clamp(min=0),
                          torch.where(kind == 2, torch.minimum(gate, (off % blocks) * bsr - 1).clamp(min=0), off % (gate + 1)))
        swap = rows.per_row(rng.random(k) < 0.5) & rows.per_row(B == 2)
        pos = torch.where(rows.per_row(long), Mr - 2 - (rows.local ^ swap.long()), pos)
        k_seq = chosen(gen, zero, zero + INT32_MAX, ends=1 / 32)
        seq = torch.where(rows.per_row(mrope), pos + 1 + k_seq % (Mr - 1 - pos).clamp(min=1), pos + 1)
        nbr = rows.per_row(nb)
        allocated = torch.minimum(nbr, (pos + 1) // bsr + 1 + chosen(gen, zero, zero + 2, ends=1 / 32))
        # the tables: each case's block ids in its range (the long context's null blocks but near the
        # limit in its requests' last three columns up to the step slot's)
        cells = B * nb
        e = owners(cells, device)
        local = torch.arange(int(cells.sum()), device=device) - host_to(np.cumsum(cells) - cells, device)[e]
        nbe = host_to(nb, device)[e]
        row = host_to(np.cumsum(B) - B, device)[e] + local // nbe
        col = local % nbe
        tops = np.asarray([max_block_id(int(b)) for b in bs])
        lo = np.where(ids == 2, np.maximum(0, tops - (1 << 16) // bs), np.where(long, tops - 7, 0))
        hi = np.where(ids == 0, np.minimum(tops, 4096), tops)
        hi = np.where(long, tops, hi)
        table = uniform(gen, host_to(lo, device)[e], host_to(hi, device)[e])
        step_col = ((pos + 1) // bsr)[row]
        table = torch.where(host_to(long, device)[e] & ((col > step_col) | (col < step_col - 2)), 0, table)

        Bl, Il = B.tolist(), IB.tolist()
        cat = {"positions": pos, "block_table": table.to(torch.int32), "seq_lens": seq.to(torch.int32),
               "num_allocated_blocks": allocated.to(torch.int32)}
        lengths = {"positions": Bl, "block_table": cells.tolist(), "seq_lens": Bl, "num_allocated_blocks": Bl}
        shapes = {x: [(y,) for y in lengths[x]] for x in cat} | {"block_table": list(zip(Bl, nb.tolist(), strict=True))}
        scalars = [{"block_size": int(b), "max_model_len": int(m), "n_blocks_per_req": int(w)} for b, m, w in zip(bs, M, nb, strict=True)]
        host = [{"input_batch_size": int(i) if p else None, "aliased": bool(a),
                 "note": "tour shape " + ("long_context" if lg else "many_requests") if t else ""}
                for i, p, a, t, lg in zip(Il, padded, aliased, tour, long, strict=True)]
        outputs = {"out_clamped_positions": (torch.int64, [0 if a else b for a, b in zip(aliased, Bl, strict=True)]),
                   "out_slot_mapping": (torch.int64, Il)}
        return _Batch(cat, lengths, shapes, {}, {}, outputs, scalars, host=host, inout=("seq_lens",))

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        a = b.cat
        return tensor_ops.eagle_step_slot_mapping_metadata(positions=a["positions"], block_table=a["block_table"],
                                                           seq_lens=a["seq_lens"], pad_id=PAD_ID, **_sizes(b))

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[Any, Any]]:
        return self.oracle_batch(_Batch(
            dict(dc.inputs), {n: [t.numel()] for n, t in dc.inputs.items()}, {n: [tuple(t.shape)] for n, t in dc.inputs.items()},
            {}, {}, {n: (dt, [size]) for n, (dt, size) in dc.outputs.items()}, [dict(dc.scalars)], host=[dict(dc.host)]))

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        """Through the record's launch: an aliased case's ``out_clamped_positions`` is its
        positions buffer itself (vLLM's draft steps after the first)."""
        h = dc.host
        if h["aliased"]:
            views = dict(views) | {"out_clamped_positions": views["positions"]}
        self.record.launch(impl, views, Case(kernel=self.name, arrays={}, scalars=dict(dc.scalars),
                                             launch={"input_batch_size": h["input_batch_size"], "aliased_positions": h["aliased"]}))

    def from_case(self, case: Case, device: str) -> DeviceCase:
        """``case`` on the device with its launch (an aliased case's clamped positions land in
        its positions buffer: its ``out_clamped_positions`` has no elements of its own)."""
        dc = super().from_case(case, device)
        aliased = bool(case.launch.get("aliased_positions"))
        if aliased:
            dc.outputs["out_clamped_positions"] = (torch.int64, 0)
        dc.host = {"input_batch_size": case.launch.get("input_batch_size"), "aliased": aliased, "note": case.note}
        return dc

    def to_case(self, dc: DeviceCase) -> Case:
        """The case with its launch (padding and aliasing as drawn)."""
        h = dc.host
        return Case(kernel=self.name,
                    arrays={n: t if isinstance(t, np.ndarray) else t.cpu().numpy() for n, t in dc.inputs.items()},
                    scalars=dict(dc.scalars), launch={"input_batch_size": h["input_batch_size"], "aliased_positions": h["aliased"]},
                    note=(h.get("note") + ": " if h.get("note") else "") + "drawn on the device (eaglefuzz fuzz --mode device)")


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        z = _sizes(b)
        rows = rows_of(b.lengths, "positions", None, a["positions"].device.type)
        B, IB = np.asarray(z["B"]), np.asarray(z["IB"])
        bs_k, M_k, nb_k = (np.asarray(z[x], dtype=np.int64) for x in ("block_size", "max_model_len", "NB"))
        bs, M, nb = rows.per_row(bs_k), rows.per_row(M_k), rows.per_row(nb_k)
        pos, seq = a["positions"].long(), a["seq_lens"].long()
        p = pos + 1
        inside = p < M
        clamped = torch.where(inside, p, 0)
        raw_col = clamped // bs
        col = torch.minimum(raw_col, nb - 1)
        block = a["block_table"].long()[rows.per_row(np.cumsum(B * nb_k) - B * nb_k) + rows.local * nb + col]
        slot = block * bs + clamped % bs
        on = per_case_any(rows, {
            "last_position": p == M - 1, "block_start": inside & (p > 0) & (p % bs == 0), "later_block": inside & (col >= 1),
            "last_column": inside & (raw_col == nb - 1), "not_following": seq != pos + 1, "mrope_positions": seq > pos + 1,
            "slot_near_int32_limit": inside & (slot > INT32_MAX - (1 << 16)),
            "positions_past_2_24": inside & (clamped > FLOAT32_EXACT), "block_id_past_int16": block > INT16_MAX})
        on["seq_follows_position"] = ~on.pop("not_following")
        al = np.asarray(z["aliased"], dtype=bool)
        on |= {"separate_positions": ~al, "aliased_positions": al, "exact_launch": IB == B, "padded_launch": IB > B,
               "single_request": B == 1, "several_requests": B > 1, "many_requests": B > 64,
               "beyond_1024_requests": B > MAX_NUM_SEQS, "block_size_one": bs_k == 1,
               "odd_block_size": bs_k & (bs_k - 1) != 0, "partial_last_block": M_k % bs_k != 0}
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
