"""``copy_and_expand_dflash_inputs_kernel`` on the device (docs/CONTRACT.md §9): a V1 Triton
kernel, fuzzed with production batches of up to 1024 requests (a tail to 4096) drawn on the GPU
256 at a time, as its record's generator draws them at the device scale (:mod:`.cases`: ``K``
of 0 to 32, vLLM's block sizes and the hybrid models' multiples of 16, tables as wide as the
model length needs, of distinct block ids within int32, positions consecutive or M-RoPE-like
that leave the queries inside the table, some ending at its last slot, rejected counts, ids of a
256k vocabulary, persistent buffers up to 16 elements longer), and one case in four the tour's
shapes (:mod:`.tour`: a model past ``2**24`` tokens with block ids at the int32 limit, a prefill
past 32767 tokens, more than 1024 requests of ``K`` = 31-32); the variant (with or without
``num_rejected_tokens``) one per batch. Checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_ops.copy_and_expand_dflash_inputs`) and compared on the GPU,
every element of every output and guard band."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...generation.choosers import EDGE_ODDS
from ...generation.strategies import (
    FLOAT32_EXACT,
    ID16_MAX,
    INT16_MAX,
    INT32_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    next_power_of_2,
)
from ...targetkit.device import DEVICE_SCALE, DeviceCase, DeviceTarget
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.fused import CONTEXT, piece_on
from ...targetkit.step_batch import chosen, segment_counts
from .layout import COMMON_BLOCK_SIZES, MAX_SPEC_TOKENS, NAME, ODD_BLOCK_SIZES, VOCAB
from .record import TARGET

BATCH = 256
"""Cases per batch on a GPU: a case of the record's averages some 170k tokens (a prefill cap of
8192 one time in four, up to 4096 requests), a batch some 40M (about 1.1 GiB of inputs and
outputs, 1.7 GiB in the largest of a sample; every array within
:data:`~...targetkit.device_draws.MAX_TABLE` elements by far; its check about 5 GiB of the GPU at
its peak, 8 GiB in the largest of a sample on an H200); a batch's draw, oracle, buffers and
features a few hundred torch operations whatever its size (no loop per case or per request on
the host: each request's draws are the device's), so that each case costs about three of them
(one the view of its block table)."""
TOUR = (1 / 16, 1 / 8, 1 / 16)
"""The share of the cases that are each of the tour's shapes (long_context, huge_offsets,
many_requests): one in four in all, so that a short run meets each (the record's generator draws
one in ten)."""
HYBRID = tuple(b for b in ODD_BLOCK_SIZES if b % 16 == 0)


def _ints(rng: np.random.Generator, lo: Any, hi: Any) -> np.ndarray:
    """Per element an integer in ``[lo, hi]`` as :class:`~...generation.choosers.RngChooser`
    draws one: an end of the range (either) one time in :data:`EDGE_ODDS`."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64))
    v = rng.integers(lo, hi, endpoint=True)
    edge = (hi > lo) & (rng.integers(0, EDGE_ODDS, size=lo.shape) == 0)
    return np.where(edge, np.where(rng.integers(0, 2, size=lo.shape) == 1, hi, lo), v)


def _ints_of(rng: np.random.Generator, ranges: list[tuple[Any, Any]], n: int) -> np.ndarray:
    """``RngChooser.integer_of`` for ``n`` draws (a range's ends may be arrays of ``n``)."""
    which = rng.integers(0, len(ranges), size=n)
    lo = np.choose(which, [np.broadcast_to(np.asarray(a, dtype=np.int64), n) for a, _ in ranges])
    hi = np.choose(which, [np.broadcast_to(np.asarray(b, dtype=np.int64), n) for _, b in ranges])
    return _ints(rng, lo, hi)


@dataclass
class _Sizes:
    """What the host knows of ``k`` cases: per case its requests ``R``, ``K``, the block size,
    the table's width ``W``, the columns from which a row holds ids at the int32 limit (``W``:
    none), M-RoPE positions, the mask id, the buffers' spare elements, and (once the device has
    drawn the requests, :func:`_requests`) its tokens ``T`` and its longest request ``mql``."""

    R: np.ndarray  # noqa: N815 - the contract's names
    K: np.ndarray  # noqa: N815
    bs: np.ndarray
    W: np.ndarray  # noqa: N815
    tail: np.ndarray
    mrope: np.ndarray
    mask: np.ndarray
    spare: np.ndarray
    M: np.ndarray  # noqa: N815
    cap: np.ndarray
    T: np.ndarray = None  # noqa: N815
    mql: np.ndarray = None

    @property
    def first(self) -> np.ndarray:
        return np.cumsum(self.R) - self.R

    @property
    def top(self) -> np.ndarray:
        """Each case's largest block id with slots within int32."""
        return (INT32_MAX - self.bs + 1) // self.bs


def _body(rng: np.random.Generator, k: int, max_requests: int | None) -> dict[str, np.ndarray]:
    """:func:`.cases.body`'s draws of each case for ``k`` cases at once (the device scale, or a
    test's small one); its requests' own draws are the device's (:func:`_requests`)."""
    scale = DEVICE_SCALE if max_requests is None else None
    K = _ints_of(rng, [(1, 16), (0, 0), (15, 15), (0, MAX_SPEC_TOKENS)], k)
    Q = K + 1
    bs = np.where(rng.random(k) < 0.7, np.asarray(COMMON_BLOCK_SIZES)[rng.integers(0, len(COMMON_BLOCK_SIZES), k)],
                  np.asarray(HYBRID)[rng.integers(0, len(HYBRID), k)])
    kind = rng.integers(0, 3, size=k)
    width = np.choose(kind, [_ints(rng, np.ones(k), 8), np.asarray([1, 16, 32])[rng.integers(0, 3, k)],
                             _ints(rng, np.ones(k), 64)])
    W = np.maximum(width, -(-(Q + 2) // bs))
    M = W * bs - _ints(rng, 0, np.minimum(bs - 1, W * bs - Q - 2))
    mrope = rng.integers(0, 3, size=k) == 2
    hi, tail, most = (scale.max_requests, scale.request_tail, scale.max_query_len) if scale else (max_requests,) * 2 + (16,)
    R = _ints_of(rng, [(1, 8), (1, hi), (1, tail)], k)
    caps = np.asarray(sorted({4, 16, 64, most}))
    cap = caps[rng.integers(0, len(caps), k)]
    mask = _ints_of(rng, [(0, 0), (0, VOCAB - 1)], k)
    spare = np.where(rng.integers(0, 2, size=k) == 1, _ints(rng, np.ones(k), 16), 0)
    return {"R": R, "K": K, "bs": bs, "W": W, "tail": W.copy(), "mrope": mrope, "mask": mask, "spare": spare, "M": M, "cap": cap}


REQUEST_FIELDS = ("n", "p0", "rejected", "next", "base", "step")
"""A request's own draws (:func:`.cases._request`): its length, first position, rejected count,
next-token id, and its row's first block id and step."""


def _tour(rng: np.random.Generator, shape: np.ndarray, z: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The cases of the tour's shapes (``shape[c]``: :data:`.tour.SHAPES`' long_context,
    huge_offsets, many_requests; -1 an ordinary case), each shape's cases drawn together, their
    sizes as the shape draws them and their rejected counts, ids and mask id as the tour's
    ``_shape_case`` does (a mask id past 65535, vLLM's launch: no spare), written into ``z``.
    Returns their requests' places among all the cases' requests and their
    :data:`REQUEST_FIELDS` (``[6, ...]``), case after case."""
    cases, requests = [np.zeros(0, np.int64)], [np.zeros((len(REQUEST_FIELDS), 0), np.int64)]
    for which in range(3):
        c = np.flatnonzero(shape == which)
        m = c.size
        if not m:
            continue
        if which == 0:  # long_context
            bs = rng.choice([1056, 2112], size=m)
            M = FLOAT32_EXACT + rng.integers(4096, 1 << 16, size=m)
            W = -(-M // bs)
            K = rng.integers(SPEC_TOKENS, MAX_SPEC_TOKENS + 1, size=m)
            R = rng.integers(1, 3, size=m)
            rq = np.repeat(np.arange(m), R)
            n = rng.integers(1, 65, size=rq.size)
            p0 = M[rq] - n - (K[rq] + 1) - rng.integers(0, 64, size=rq.size)
            tail, base, step = (M - 256) // bs, np.zeros(rq.size, np.int64), np.zeros(rq.size, np.int64)
        elif which == 1:  # huge_offsets: a prefill past 32767 tokens and a short request, in either order
            M = rng.integers(1 << 16, 1 << 17, size=m)
            bs = rng.choice([64, 128, 256], size=m)
            W = -(-M // bs)
            R = np.full(m, 2)
            rq = np.repeat(np.arange(m), 2)
            pair = np.stack([rng.integers(INT16_MAX + 1, INT16_MAX + 514, size=m), rng.integers(1, 17, size=m)], 1)
            n = np.where(rng.random((m, 1)) < 0.5, pair, pair[:, ::-1]).reshape(-1)
            K = rng.integers(1, 16, size=m)
            p0 = rng.integers(0, M[rq] - n - K[rq])
            tail, base, step = W, rng.integers(0, 1 << 16, size=rq.size), np.ones(rq.size, np.int64)
        else:  # many_requests
            W = rng.integers(3, 7, size=m)
            M, bs = W * 16, np.full(m, 16)
            K = rng.integers(31, MAX_SPEC_TOKENS + 1, size=m)
            R = rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65, size=m)
            rq = np.repeat(np.arange(m), R)
            n = rng.integers(1, 4, size=rq.size)
            p0 = rng.integers(0, M[rq] - n - K[rq])
            tail, base, step = W, rng.integers(0, 1 << 20, size=rq.size), np.ones(rq.size, np.int64)
        fields = {"R": R, "K": K, "bs": bs, "W": W, "tail": tail, "mrope": False, "spare": 0, "M": M, "cap": 1,
                  "mask": rng.integers(INT16_MAX * 2 + 2, VOCAB, size=m)}
        for f, v in fields.items():
            z[f][c] = v
        cases.append(c[rq])
        requests.append(np.stack([n, p0, rng.integers(0, n), rng.integers(0, VOCAB, size=n.size), base, step]))
    order = np.argsort(np.concatenate(cases), kind="stable")  # case after case, each case's requests in order
    tc = np.flatnonzero(shape >= 0)
    first, Rt = np.cumsum(z["R"]) - z["R"], z["R"][tc]
    at = np.repeat(first[tc] - np.cumsum(Rt) + Rt, Rt) + np.arange(int(Rt.sum()))
    return at, np.concatenate(requests, 1)[:, order].astype(np.int64)


def _sizes(rng: np.random.Generator, k: int, max_requests: int | None) -> tuple[_Sizes, np.ndarray, np.ndarray]:
    """``k`` cases: the tour's shapes (:data:`TOUR`, :func:`_tour`) among ordinary ones
    (:func:`_body`). Returns their sizes, and the tour's requests (their places among all the
    cases' requests, and their :data:`REQUEST_FIELDS`, ``[6, ...]``)."""
    u = rng.random(k)
    shape = np.where(u < TOUR[0], 0, np.where(u < TOUR[0] + TOUR[1], 1, np.where(u < sum(TOUR), 2, -1)))
    z = _body(rng, k, max_requests)
    at, tour = _tour(rng, shape, z)
    return _Sizes(**{f: v.astype(bool if f == "mrope" else np.int64) for f, v in z.items()}), at, tour


def _requests(gen: torch.Generator, z: _Sizes, tour_at: np.ndarray, tour: np.ndarray, device: str) -> torch.Tensor:
    """Every request's own draws (:data:`REQUEST_FIELDS`, ``[6, requests]``, int64), drawn on the
    device as :func:`.cases._request` draws them (each integer an end of its range one time in
    :data:`EDGE_ODDS`, as ``RngChooser`` does: :func:`~...targetkit.step_batch.chosen`); the
    tour's requests as the host drew them (``tour`` at ``tour_at``)."""
    k, nr = len(z.R), int(z.R.sum())
    per_case = host_to(np.stack([z.cap, z.M - z.K - 1, z.K + 1]), device)  # one copy
    rc = torch.repeat_interleave(torch.arange(k, device=device), host_to(z.R, device), output_size=nr)
    cap, room, Q = per_case[:, rc].unbind()
    one = torch.ones(nr, dtype=torch.int64, device=device)
    n = chosen(gen, one, torch.clamp(torch.minimum(cap, room), min=1), ends=1 / EDGE_ODDS)
    end = (room - n).clamp(min=0)
    which = torch.randint(0, 2, (3, nr), generator=gen, device=device) == 1  # the ranges of p0, next, base
    zero = torch.zeros(nr, dtype=torch.int64, device=device)
    lo = torch.stack([torch.where(which[0], (end - Q - 1).clamp(min=0), 0), zero, zero, zero])
    hi = torch.stack([end, n - 1, torch.where(which[1], VOCAB - 1, 1 << 15), torch.where(which[2], 1 << 20, 1 << 16)])
    p0, rejected, nxt, base = chosen(gen, lo, hi, ends=1 / EDGE_ODDS).unbind()
    step = 1 + 2 * torch.randint(0, 2, (nr,), generator=gen, device=device)
    out = torch.stack([n, p0, rejected, nxt, base, step])
    if tour_at.size:
        out[:, host_to(tour_at, device)] = host_to(tour, device)
    return out


class CopyAndExpandDflashDevice(DeviceTarget):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET
    batch = BATCH

    def draw(self, rng: np.random.Generator, gen: Any, device: str, max_requests: int | None = None) -> DeviceCase:
        seeds = (int(rng.integers(0, 2**62)), int(rng.integers(0, 2**62)))
        return (self.draw_batch(seeds, device, 1) if max_requests is None
                else self.draw_batch(seeds, device, 1, max_requests)).case(0)

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int | None = None,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` cases (:func:`_sizes`): their sizes on the host (``seeds[1]``, all cases at
        once; the tour's requests too); on the device every other request's length, first
        position, rejected count, ids and row's first id and step (:func:`_requests`; the cases'
        tokens and longest requests read back, the batch's one wait), an M-RoPE case's position
        steps (0 or 1, a request's first 0) and the block ids at the int32 limit of a long
        context's last columns. Each input the cases' arrays concatenated, the block tables
        ``[R, W]`` each; the variant (``num_rejected_tokens`` or none) the batch's."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        has = bool(rng.integers(0, 2))
        z, tour_at, tour = _sizes(rng, k, max_requests)
        R, W = z.R, z.W
        nr, cells = int(R.sum()), int((R * W).sum())
        n, p0, rejected, nxt, base, step = _requests(gen, z, tour_at, tour, device).unbind()
        per_case = host_to(np.stack([z.mrope, W, z.tail, z.top, np.cumsum(R) - R]), device)  # one copy
        rc = torch.repeat_interleave(torch.arange(k, device=device), host_to(R, device), output_size=nr)
        mrope, Wr, tail, top, first = per_case[:, rc].unbind()
        cn = torch.cumsum(n, 0)
        within = cn - (cn - n)[first]  # each request's end within its case
        counts = torch.zeros((2, k), dtype=torch.int64, device=device)
        counts[0].index_add_(0, rc, n)
        counts[1].scatter_reduce_(0, rc, n, "amax")
        z.T, z.mql = counts.cpu().numpy()  # the cases' tokens and longest requests: the batch's one wait
        T, nt = z.T, int(z.T.sum())
        start = cn - n
        r = torch.repeat_interleave(torch.arange(nr, device=device), n, output_size=nt)
        steps = torch.where(mrope[r] > 0, torch.randint(0, 2, (nt,), generator=gen, device=device), 1)
        steps[start] = 0
        cs = torch.cumsum(steps, 0)
        positions = p0[r] + cs - cs[start][r]
        rw = torch.repeat_interleave(torch.arange(nr, device=device), Wr, output_size=cells)
        col = torch.arange(cells, device=device) - (torch.cumsum(Wr, 0) - Wr)[rw]
        limit = top[rw] - torch.randint(0, 8, (cells,), generator=gen, device=device)
        table = torch.where(col < tail[rw], torch.minimum(base[rw] + step[rw] * col, top[rw]), limit)
        qsl = torch.zeros(nr + k, dtype=torch.int32, device=device)  # each case's [R + 1] entries, from 0
        qsl[torch.arange(1, nr + 1, device=device) + rc] = within.to(torch.int32)
        cat = {"next_token_ids": nxt.to(torch.int32), "target_positions": positions, "block_table": table.to(torch.int32),
               "query_start_loc": qsl}
        lengths = {"next_token_ids": R.tolist(), "target_positions": T.tolist(), "block_table": (R * W).tolist(),
                   "query_start_loc": (R + 1).tolist()}
        if has:
            cat["num_rejected_tokens"] = rejected.to(torch.int32)
            lengths["num_rejected_tokens"] = R.tolist()
        shapes = {x: [(v,) for v in lengths[x]] for x in cat} | {"block_table": list(zip(R.tolist(), W.tolist(), strict=True))}
        Q = z.K + 1
        query, context = (R * Q + z.spare).tolist(), (T + z.spare).tolist()
        # the token indices before the query ids in the int32 buffer: a write past a case's R*K
        # (up to R*Q) lands in the guarded buffer, never past its end
        outputs = {"out_token_indices": (torch.int32, (R * z.K).tolist()), "out_input_ids": (torch.int32, query),
                   "out_context_positions": (torch.int64, context), "out_query_positions": (torch.int64, query),
                   "out_context_slot_mapping": (torch.int64, context), "out_query_slot_mapping": (torch.int64, query)}
        scalars = [{"parallel_drafting_token_id": int(m), "block_size": int(b), "num_query_per_req": int(q),
                    "num_speculative_tokens": int(kk), "total_input_tokens": int(t), "has_num_rejected": has}
                   for m, b, q, kk, t in zip(z.mask, z.bs, Q, z.K, T, strict=True)]
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, scalars, {"sizes": z, "request_case": rc},
                           host=[{"max_query_len": int(m)} for m in z.mql])

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        per_case = {n: [sc[n] for sc in b.scalars] for n in ("parallel_drafting_token_id", "block_size",
                                                              "num_speculative_tokens", "total_input_tokens")}
        R = b.lengths["next_token_ids"]
        spare = [c - t for c, t in zip(b.outputs["out_context_positions"][1], per_case["total_input_tokens"], strict=True)]
        return tensor_ops.copy_and_expand_dflash_inputs(
            **{n: t for n, t in b.cat.items()}, **per_case, requests=R,
            widths=[shape[1] for shape in b.shapes["block_table"]], spare=spare,
            context=piece_on(CONTEXT, b.cat["query_start_loc"].device))

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return self.oracle_batch(DeviceBatch(
            dict(dc.inputs), {n: [t.numel()] for n, t in dc.inputs.items()}, {n: [tuple(t.shape)] for n, t in dc.inputs.items()},
            {}, {}, {n: (dt, [size]) for n, (dt, size) in dc.outputs.items()}, [dict(dc.scalars)]))

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        """As vLLM launches it (:func:`~....kernels.launchers.launch_copy_and_expand_dflash_inputs`)."""
        from ....kernels.launchers import launch_copy_and_expand_dflash_inputs

        s = dc.scalars
        mql = dc.host.get("max_query_len") if dc.host else None
        if mql is None:  # a case made from a plain one: its longest request read back
            mql = int(torch.diff(views["query_start_loc"].long()).max())
        launch_copy_and_expand_dflash_inputs(
            impl, **{n: v for n, v in views.items() if n != "num_rejected_tokens"},
            num_rejected_tokens=views.get("num_rejected_tokens") if s["has_num_rejected"] else None,
            parallel_drafting_token_id=s["parallel_drafting_token_id"], block_size=s["block_size"],
            num_speculative_tokens=s["num_speculative_tokens"], total_input_tokens=s["total_input_tokens"],
            max_query_len=mql)

    def to_case(self, dc: DeviceCase) -> Case:
        """The plain case, its persistent buffers' spare elements its ``buffer_spare``."""
        case = super().to_case(dc)
        spare = dc.outputs["out_context_positions"][1] - int(dc.scalars["total_input_tokens"])
        return case.replace(launch=dict(case.launch) | {"buffer_spare": spare or None})

    batch_decides = frozenset(TARGET.features)

    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """From each case's sizes (the host's) and, on the device in one reduction over the
        requests and (``writes``) the tokens and the writes (one copy back), what its requests
        decide (rejected counts, lengths against the kernel's block, next-token ids) and what its
        positions and slots decide: M-RoPE repeats, a query crossing a KV block, positions past
        ``2**24``, block ids past 32767, slots near the int32 limit."""
        z: _Sizes = b.extra["sizes"]
        k = len(b)
        has = bool(b.scalars[0]["has_num_rejected"]) if k else False
        R, K, bs, W, T, mql = z.R, z.K, z.bs, z.W, z.T, z.mql
        Q = K + 1
        block = np.minimum(256, [next_power_of_2(int(x)) for x in mql + Q])
        on = {
            "has_num_rejected_off": np.full(k, not has), "has_num_rejected_on": np.full(k, has),
            "no_spec_tokens": K == 0, "one_spec_token": K == 1, "many_spec_tokens": K >= 8, "query_len_16": Q == 16,
            "several_requests": R > 1, "many_requests": R > 64, "long_request": mql > 512,
            "vllm_launch": np.full(k, True), "kv_block_size_1": bs == 1, "kv_block_size_odd": (bs & (bs - 1)) != 0,
            "stride_1": W == 1, "stride_multiple_of_16": W % 16 == 0,
            "total_tokens_specialised": (T == 1) | (T % 16 == 0), "spare_buffers": z.spare > 0,
            "beyond_1024_requests": R > MAX_NUM_SEQS, "offsets_past_32767": T > INT16_MAX,
            "query_slots_past_32767": R * Q > INT16_MAX, "prefill_thousands": mql >= 2048,
            "spec_tokens_15_plus": K >= SPEC_TOKENS,
        }
        if not k:
            return []
        dev = b.cat["query_start_loc"].device
        nr = int(R.sum())
        per_case = host_to(np.stack([Q, block, bs, W, np.cumsum(R) - 1]), dev)  # one copy
        rc = b.extra.get("request_case")
        if rc is None:
            rc = torch.repeat_interleave(torch.arange(k, device=dev), host_to(R, dev), output_size=nr)
        Qr, blk = per_case[:2, rc].unbind()
        qsl = b.cat["query_start_loc"].long()
        at = torch.arange(nr, device=dev) + rc
        qlen = qsl[at + 1] - qsl[at]
        rej = b.cat["num_rejected_tokens"].long() if has else torch.zeros_like(qlen)
        nxt = b.cat["next_token_ids"].long()
        names = ["some_rejected", "all_but_one_rejected", "one_token_request", "multi_block_request",
                 "query_straddles_blocks", "ids_past_65535", "last_request_rejected"]
        per_request = torch.stack([rej > 0, (qlen > 1) & (rej == qlen - 1), qlen == 1, qlen + Qr > blk,
                                   qlen // blk != (qlen + Qr - 1) // blk, (nxt > ID16_MAX) & (nxt <= 1 << 18)], 1)
        if writes is not None:
            names += ["mrope_positions", "positions_past_2_24", "query_crosses_kv_block", "block_id_past_int16",
                      "slot_near_int32_limit"]
        flags = torch.zeros((k, len(names)), dtype=torch.int64, device=dev)
        flags[:, :6].index_add_(0, rc, per_request.long())
        flags[:, 6] = rej[per_case[4]]  # each case's last request's rejected count
        if writes is not None:  # per token and per query slot, summed over each case's (contiguous) elements
            pos, ctx = b.cat["target_positions"], writes["out_context_slot_mapping"][1]
            bs_t, W_t = torch.repeat_interleave(per_case[2:4], host_to(T, dev), dim=1, output_size=pos.numel())
            repeat = torch.zeros(pos.numel(), dtype=torch.bool, device=dev)
            repeat[1:] = pos[1:] == pos[:-1]
            repeat[torch.cumsum(qlen, 0) - qlen] = False  # each request's first token
            per_token = torch.stack([repeat, (pos > FLOAT32_EXACT) & (torch.div(pos, bs_t, rounding_mode="floor") <= W_t - 1),
                                     torch.div(ctx, bs_t, rounding_mode="floor") > INT16_MAX,
                                     (ctx > INT32_MAX - (1 << 16)) & (ctx <= INT32_MAX)])
            qpos, qslots = writes["out_query_positions"][1], writes["out_query_slot_mapping"][1]  # request after request
            qstart, bs_q = torch.repeat_interleave(torch.stack([torch.cumsum(Qr, 0) - Qr, per_case[2, rc]]), Qr, dim=1,
                                                   output_size=qpos.numel())
            qk = torch.arange(qpos.numel(), device=dev) - qstart  # each query slot's index in its request
            per_slot = torch.stack([(qk > 0) & (torch.div(qpos, bs_q, rounding_mode="floor")
                                                != torch.div(qpos - qk, bs_q, rounding_mode="floor")),
                                    torch.div(qslots, bs_q, rounding_mode="floor") > INT16_MAX,
                                    (qslots > INT32_MAX - (1 << 16)) & (qslots <= INT32_MAX)])
            t, s = segment_counts(per_token, T), segment_counts(per_slot, R * Q)
            flags[:, 7:] = torch.stack([t[0], t[1], s[0], t[2] + s[1], t[3] + s[2]], 1)
        got = (flags > 0).cpu().numpy()
        for j, f in enumerate(names):
            on[f] = got[:, j]
        on["ids_past_65535"] |= (z.mask > ID16_MAX) & (z.mask <= 1 << 18)
        return [frozenset(f for f, v in on.items() if v[c]) for c in range(k)]


DEVICE = CopyAndExpandDflashDevice()
"""This target's device mode (``--mode device``)."""
