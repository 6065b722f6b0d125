"""``_post_update_kernel`` on the device (docs/CONTRACT.md §19): a Model Runner V2 kernel, fuzzed
with production steps of up to 1024 rows (a tail to 4096) drawn on the GPU 256 at a time
(:attr:`~...targetkit.step_batch.StepBatchDevice.batch`; each case holds its state: token histories
and the penalties' counts, some 700 MiB of inputs and outputs a batch on average), as its record's generator
draws them (the last pipeline rank's call, with the query starts and the penalties' counts, or
a non-last rank's, with or without the drafts it received, one call per batch; masked rows,
chunks still prefilling, rejections; now and then a long context of a few rows, its history
past 32767 tokens and its ids of a 151936-id vocabulary), checked against the batched torch
oracle (:func:`~eaglefuzz.oracles.tensor_steps_v2.post_update`) and compared on the GPU, every
state row's state included."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ....oracles.host_copy import host_to
from ...generation.strategies import INT16_MAX
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.placement import copy_segments
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    chosen,
    cumulative,
    draw_drafts,
    draw_rows,
    feature_sets,
    owners,
    per_case_any,
    rows_of,
    state_rows,
)
from .cases import VOCABS
from .layout import NAME
from .record import TARGET

LONG = 8
"""One case in this many is a long context of at most 4 rows: histories of 40000 tokens (half
its rows' past 32767), ids of a 151936-id vocabulary (the tour's shape)."""
LONG_VOCAB = 151936


def _sizes(b: DeviceBatch) -> dict[str, Any]:
    z: dict[str, Any] = {"B": b.lengths["idx_mapping"], "R": b.lengths["total_len"],
                         "W": [shape[1] for shape in b.shapes["all_token_ids"]],
                         "S": [shape[1] for shape in b.shapes["sampled_tokens"]]}
    if "output_bin_counts" in b.cat:
        z["V"] = [shape[1] for shape in b.shapes["output_bin_counts"]]
    if "draft_tokens" in b.cat:
        z["D"] = [shape[1] for shape in b.shapes["draft_tokens"]]
    return z


NARROW = 64
"""Histories this wide or narrower (``K + 2`` and 64) are drawn together, at the widest of them."""


def _histories(gen: torch.Generator, R: np.ndarray, W: np.ndarray, V: np.ndarray, t: torch.Tensor,  # noqa: N803
               device: str) -> torch.Tensor:
    """Every case's history ``[R[k], W[k]]``, concatenated (int32): state row ``j``'s first
    ``t[j]`` tokens ids of its case's vocabulary (``V[k]``), the rest 0. Drawn a class of widths
    at a time (one ``[rows, w]`` draw, ``w`` the class's widest: the cases of width up to
    :data:`NARROW` together, each wider width apart), each row's first ``W[k]`` cells then copied
    to its place (a segment a row)."""
    size = R * W
    out = torch.empty(int(size.sum()), dtype=torch.int32, device=device)
    narrow = W <= NARROW
    width = np.where(narrow, W[narrow].max() if narrow.any() else 0, W)  # each case's class
    for w in np.unique(width):
        ks = np.flatnonzero(width == w)
        case = owners(R[ks], device)  # each row's case among these
        first = host_to(np.stack([np.cumsum(R)[ks] - R[ks], np.cumsum(R[ks]) - R[ks], V[ks],
                                  np.cumsum(size)[ks] - size[ks], W[ks]]), device)
        state_base, class_base, vocab, place, wk = first[:, case]
        local = torch.arange(case.numel(), device=device) - class_base  # each row's index in its case
        ids = (torch.rand((case.numel(), int(w)), generator=gen, device=device, dtype=torch.float64)
               * vocab[:, None]).to(torch.int32)
        ids.masked_fill_(torch.arange(int(w), device=device) >= t[state_base + local, None], 0)
        table = torch.cat([torch.arange(case.numel(), device=device) * int(w), place + local * wk, wk])
        copy_segments(out, ids.reshape(-1), table, int(W[ks].max()))
    return out


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps of one call (the last rank's seven in ten; else drafts received seven in
        ten): per case ``K`` (16 one case in 8), a history width (``K + 2``, 64 or 512), a
        vocabulary of the record's (the penalties' counts within 2**20 elements), masked rows
        (three cases in ten, a row in ten of those), the extra query (none or up to 40); per
        row its logits (1 to ``K + 1``), chunked (one in four: nothing sampled) or ``n`` sampled
        and the rest rejected; every state row's history length (room for its sampled tokens),
        history, count (at least its rejected) and penalties' counts (0-3)."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        last = bool(rng.random() < 0.7)
        with_drafts = not last and bool(rng.random() < 0.7)
        rows = draw_rows(rng, k, device, max_requests)
        long = rng.random(k) < 1 / LONG
        B = np.where(long, np.minimum(rows.B, rng.integers(1, 5, size=k)), rows.B)
        R = np.where(long, B + rng.integers(0, 3, size=k), rows.R - rows.B + B)
        rows = rows_of({"b": B.tolist(), "r": R.tolist()}, "b", "r", device)
        K = draw_drafts(rng, k)
        S = K + 1
        W = np.where(long, 40000, np.asarray([0, 64, 512])[rng.integers(0, 3, size=k)])
        W = np.where(W == 0, K + 2, W)
        small = np.asarray(VOCABS)[rng.integers(0, len(VOCABS), size=k)]
        V = np.where(long, LONG_VOCAB, np.where(R * 32000 <= 1 << 20, small, np.minimum(small, 1000)))
        n = rows.n
        zero = torch.zeros(n, dtype=torch.int64, device=device)
        one = zero + 1
        masked = rows.per_row(rng.random(k) < 0.3) & (torch.randint(0, 10, (n,), generator=gen, device=device) == 0)
        s = torch.where(masked, -1, state_rows(rows, gen))
        real = s >= 0
        nl = chosen(gen, one, torch.minimum(rows.per_row(K + 1), rows.per_row(W)), ends=1 / 32)
        chunked = torch.randint(0, 4, (n,), generator=gen, device=device) == 0
        ns = torch.where(chunked, 0, chosen(gen, one, nl))
        nr = torch.where(chunked, 0, nl - ns)
        qlen = nl + chosen(gen, zero, rows.per_row(np.where(rng.random(k) < 0.5, 0, 40)), ends=1 / 32)
        state = owners(R, device)
        Ws, Vs = host_to(W, device), host_to(V, device)
        t = chosen(gen, torch.zeros_like(state), Ws[state] - 1, ends=1 / 32)
        at = (rows.state_base + s)[real]
        room = (Ws[rows.cid] - ns)[real]
        coin = torch.rand(n, generator=gen, device=device)[real] < 0.5
        deep = rows.per_row(long)[real] & coin & (room > INT16_MAX)
        t[at] = torch.where(deep, chosen(gen, torch.full_like(room, INT16_MAX + 1), room.clamp(min=INT16_MAX + 1)),
                            torch.minimum(t[at], room))
        history = _histories(gen, R, W, V, t, device)
        counts = chosen(gen, torch.zeros_like(state), torch.full_like(state, 100000))
        counts[at] = torch.maximum(counts[at], nr[real])
        per_sampled = owners(B * S, device)
        sampled = (torch.rand(per_sampled.numel(), generator=gen, device=device, dtype=torch.float64)
                   * Vs[per_sampled]).long()
        Bl, Rl = B.tolist(), R.tolist()
        cat = {"idx_mapping": s, "num_computed_tokens": counts.to(torch.int32), "sampled_tokens": sampled,
               "num_sampled": ns.to(torch.int32), "num_rejected": nr.to(torch.int32),
               "all_token_ids": history, "total_len": t.to(torch.int32)}
        lengths = {"idx_mapping": Bl, "num_computed_tokens": Rl, "sampled_tokens": (B * S).tolist(), "num_sampled": Bl,
                   "num_rejected": Bl, "all_token_ids": (R * W).tolist(), "total_len": Rl}
        shapes = {"sampled_tokens": [(b, int(x)) for b, x in zip(Bl, S, strict=True)],
                  "all_token_ids": [(r, int(w)) for r, w in zip(Rl, W, strict=True)]}
        outputs = {"last_sampled_tokens": (torch.int64, Rl)}
        host = [{"last_sampled_tokens": (r, 1)} for r in Rl]
        inout = ("num_computed_tokens", "all_token_ids", "total_len")
        if last:
            cat["query_start_loc"] = cumulative(rows, qlen)
            lengths["query_start_loc"] = [b + 1 for b in Bl]
            cat["output_bin_counts"] = torch.randint(0, 4, (int(np.sum(R * V)),), generator=gen, device=device,
                                                     dtype=torch.int32)
            lengths["output_bin_counts"] = (R * V).tolist()
            shapes["output_bin_counts"] = [(r, int(v)) for r, v in zip(Rl, V, strict=True)]
            inout += ("output_bin_counts",)
        if with_drafts:
            per_draft = owners(B * K, device)
            cat["draft_tokens"] = (torch.rand(per_draft.numel(), generator=gen, device=device, dtype=torch.float64)
                                   * Vs[per_draft]).long()
            lengths["draft_tokens"] = (B * K).tolist()
            shapes["draft_tokens"] = [(b, int(x)) for b, x in zip(Bl, K, strict=True)]
            outputs["draft_tokens_out"] = (torch.int64, (R * K).tolist())
            host = [h | {"draft_tokens_out": (r, int(x))} for h, r, x in zip(host, Rl, K, strict=True)]
        shapes = {x: [(y,) for y in lengths[x]] for x in cat} | shapes
        scalars = [{"num_reqs": b, "num_draft_tokens": int(x) if with_drafts else 0} for b, x in zip(Bl, K, strict=True)]
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, scalars, host=[{"shapes": h} for h in host], inout=inout)

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        return tensor_steps_v2.post_update(**b.cat, **_sizes(b))


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        z = _sizes(b)
        dev = a["idx_mapping"].device.type
        rows = rows_of(b.lengths, "idx_mapping", "total_len", dev)
        s = a["idx_mapping"]
        real = s >= 0
        ns, nr = a["num_sampled"].long(), a["num_rejected"].long()
        t = a["total_len"].long()[rows.state_base + s.clamp(min=0)]
        n = torch.where(real, ns.clamp(min=0), 0)
        last = "output_bin_counts" in a
        S = np.asarray(z["S"], dtype=np.int64)
        r = torch.repeat_interleave(torch.arange(rows.n, device=dev), n)
        i = torch.arange(r.numel(), device=dev) - (torch.cumsum(n, 0) - n)[r]
        token = a["sampled_tokens"].reshape(-1).long()[rows.per_row(np.cumsum(rows.B * S) - rows.B * S)[r]
                                                        + rows.local[r] * rows.per_row(S)[r] + i]
        key = (rows.state_base + s)[r] * (1 << 20) + token
        order = torch.sort(key).values
        twice = torch.zeros(rows.n, dtype=torch.bool, device=dev)
        if order.numel() > 1:
            dup = order[1:] == order[:-1]
            twice[r[torch.sort(key).indices[1:][dup]]] = True
        big = torch.zeros(rows.n, dtype=torch.bool, device=dev)
        big[r[token > INT16_MAX]] = True
        on = per_case_any(rows, {"masked_row": ~real, "chunked_row": real & (ns <= 0), "rejected": real & (nr > 0),
                                 "history_past_32767": real & (t + n > INT16_MAX), "twice": twice, "big": big})
        twice_any, big_any = on.pop("twice"), on.pop("big")
        counted = np.full(len(b), last)
        on |= {"last_rank": counted, "pipeline_rank": ~counted, "pipeline_drafts": np.full(len(b), "draft_tokens" in a),
               "token_counted_twice": twice_any & counted, "ids_past_32767": big_any & counted,
               "several_rows": rows.B > 1, "many_requests": rows.B > 64}
        real_count = torch.zeros(len(b), dtype=torch.int64, device=dev).index_add_(0, rows.cid, real.long()).cpu().numpy()
        on["untouched_state_rows"] = rows.R > real_count
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
