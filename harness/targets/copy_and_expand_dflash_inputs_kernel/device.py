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
from ...core.case import Case
from ...generation.choosers import EDGE_ODDS
from ...generation.strategies import (
    FLOAT32_EXACT,
    ID16_MAX,
    INT16_MAX,
    INT32_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    cdiv,
    next_power_of_2,
)
from ...targetkit.device import DEVICE_SCALE, DeviceCase, DeviceTarget
from ...targetkit.device_batch import DeviceBatch
from .layout import COMMON_BLOCK_SIZES, MAX_SPEC_TOKENS, NAME, ODD_BLOCK_SIZES, VOCAB
from .record import TARGET

BATCH = 256
"""Cases per batch on a GPU: a case of the record's averages some 170k tokens (a prefill cap of
8192 one time in four, up to 4096 requests), a batch some 40M (about 1.1 GiB of inputs and
outputs, 1.7 GiB in the largest of a sample; every array within
:data:`~...targetkit.device_draws.MAX_TABLE` elements by far); a batch's draw, oracle, buffers and
features a few hundred torch operations whatever its size (no loop per case on the device), so
that each case costs a couple of them."""
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
    """What the host draws of ``k`` cases: per case ``K``, the block size, the table's width
    ``W``, the columns from which a row holds ids at the int32 limit (``W``: none), M-RoPE
    positions, the mask id, the buffers' spare elements; per request (concatenated, case after
    case) its length, first position, rejected count, next-token id and its row's first block
    id and step."""

    R: np.ndarray  # noqa: N815 - the contract's names
    K: np.ndarray  # noqa: N815
    bs: np.ndarray
    W: np.ndarray  # noqa: N815
    tail: np.ndarray
    mrope: np.ndarray
    mask: np.ndarray
    spare: np.ndarray
    n: np.ndarray
    p0: np.ndarray
    rejected: np.ndarray
    next: np.ndarray
    base: np.ndarray
    step: np.ndarray

    @property
    def first(self) -> np.ndarray:
        return np.cumsum(self.R) - self.R

    @property
    def T(self) -> np.ndarray:  # noqa: N802
        return np.add.reduceat(self.n, self.first)

    @property
    def top(self) -> np.ndarray:
        """Each case's largest block id with slots within int32."""
        return (INT32_MAX - self.bs + 1) // self.bs


def _body(rng: np.random.Generator, k: int, max_requests: int | None) -> dict[str, np.ndarray]:
    """:func:`.cases.body` for ``k`` cases at once (the device scale, or a test's small one)."""
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
    case = np.repeat(np.arange(k), R)
    Mr, Qr = M[case], Q[case]
    n = _ints(rng, 1, np.maximum(1, np.minimum(cap[case], Mr - Qr)))
    end = np.maximum(Mr - Qr - n, 0)
    p0 = _ints_of(rng, [(0, end), (np.maximum(0, end - Qr - 1), end)], n.size)
    rejected = _ints(rng, 0, n - 1)
    nxt = _ints_of(rng, [(0, 1 << 15), (0, VOCAB - 1)], n.size)
    base = _ints_of(rng, [(0, 1 << 16), (0, 1 << 20)], n.size)
    step = np.asarray([1, 3])[rng.integers(0, 2, n.size)]
    mask = _ints_of(rng, [(0, 0), (0, VOCAB - 1)], k)
    spare = np.where(rng.integers(0, 2, size=k) == 1, _ints(rng, np.ones(k), 16), 0)
    return {"R": R, "K": K, "bs": bs, "W": W, "tail": W, "mrope": mrope, "mask": mask, "spare": spare, "n": n, "p0": p0,
            "rejected": rejected, "next": nxt, "base": base, "step": step}


def _shape(rng: np.random.Generator, which: int) -> dict[str, np.ndarray]:
    """One case of the tour's shape ``which`` (:data:`.tour.SHAPES`: long_context, huge_offsets,
    many_requests), its sizes as the shape draws them; its rejected counts, ids and mask id as
    the tour's ``_shape_case`` does (a mask id past 65535, vLLM's launch: no spare)."""
    if which == 0:  # long_context
        bs = int(rng.choice([1056, 2112]))
        M = FLOAT32_EXACT + int(rng.integers(4096, 1 << 16))
        W = cdiv(M, bs)
        K = int(rng.integers(SPEC_TOKENS, MAX_SPEC_TOKENS + 1))
        n = rng.integers(1, 65, size=int(rng.integers(1, 3)))
        p0 = M - n - (K + 1) - rng.integers(0, 64, size=n.size)
        tail, base, step = (M - 256) // bs, np.zeros(n.size, np.int64), np.zeros(n.size, np.int64)
    elif which == 1:  # huge_offsets
        M = int(rng.integers(1 << 16, 1 << 17))
        bs = int(rng.choice([64, 128, 256]))
        W = cdiv(M, bs)
        n = rng.permutation([int(rng.integers(INT16_MAX + 1, INT16_MAX + 514)), int(rng.integers(1, 17))])
        K = int(rng.integers(1, 16))
        p0 = rng.integers(0, M - n - K)
        tail, base, step = W, rng.integers(0, 1 << 16, size=2), np.ones(2, np.int64)
    else:  # many_requests
        W = int(rng.integers(3, 7))
        M, bs = W * 16, 16
        K = int(rng.integers(31, MAX_SPEC_TOKENS + 1))
        n = rng.integers(1, 4, size=int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65)))
        p0 = rng.integers(0, M - n - K)
        tail, base, step = W, rng.integers(0, 1 << 20, size=n.size), np.ones(n.size, np.int64)
    one = np.ones(1, np.int64)
    return {"R": one * n.size, "K": one * K, "bs": one * bs, "W": one * W, "tail": one * tail, "mrope": one < 0,
            "mask": one * int(rng.integers(INT16_MAX * 2 + 2, VOCAB)), "spare": one * 0, "n": n, "p0": p0,
            "rejected": rng.integers(0, n), "next": rng.integers(0, VOCAB, size=n.size), "base": base, "step": step}


def _sizes(rng: np.random.Generator, k: int, max_requests: int | None) -> _Sizes:
    """``k`` cases: the tour's shapes (:data:`TOUR`) among ordinary ones (:func:`_body`)."""
    u = rng.random(k)
    shape = np.where(u < TOUR[0], 0, np.where(u < TOUR[0] + TOUR[1], 1, np.where(u < sum(TOUR), 2, -1)))
    body = _body(rng, k, max_requests)
    ends = np.cumsum(body["R"])  # each ordinary case's requests: ends - R to ends
    parts: dict[str, list[np.ndarray]] = {f: [] for f in body}

    def ordinary(lo: int, hi: int) -> None:  # cases lo to hi - 1, each ordinary: slices of the body's arrays
        if hi > lo:
            for f, v in body.items():
                parts[f].append(v[lo:hi] if f in _PER_CASE else v[ends[lo] - body["R"][lo] : ends[hi - 1]])

    done = 0
    for c in np.flatnonzero(shape >= 0).tolist():  # the tour's cases, drawn in order
        ordinary(done, c)
        for f, v in _shape(rng, int(shape[c])).items():
            parts[f].append(np.asarray(v))
        done = c + 1
    ordinary(done, k)
    return _Sizes(**{f: np.concatenate(v).astype(bool if f == "mrope" else np.int64) for f, v in parts.items()})


_PER_CASE = ("R", "K", "bs", "W", "tail", "mrope", "mask", "spare")
"""The fields of :func:`_body` with one value per case (the others: one per request)."""


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
        """``k`` cases (:func:`_sizes`): their sizes, first positions, rejected counts, ids and
        rows' first ids on the host (``seeds[1]``, all cases at once); on the device an M-RoPE
        case's position steps (0 or 1, a request's first 0) and the block ids at the int32
        limit of a long context's last columns. Each input the cases' arrays concatenated, the
        block tables ``[R, W]`` each; the variant (``num_rejected_tokens`` or none) the batch's."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        has = bool(rng.integers(0, 2))
        z = _sizes(rng, k, max_requests)
        R, T, W = z.R, z.T, z.W
        case = np.repeat(np.arange(k), R)
        nr, nt, cells = int(R.sum()), int(T.sum()), int((R * W).sum())
        host = torch.from_numpy(np.stack([z.n, z.p0, z.mrope[case], np.cumsum(z.n) - z.n, W[case], z.tail[case],
                                          z.base, z.step, z.top[case]])).to(device)
        n, p0, mrope, start, Wr, tail, base, step, top = host
        r = torch.repeat_interleave(torch.arange(nr, device=device), n, output_size=nt)
        steps = torch.where(mrope[r] > 0, torch.randint(0, 2, (nt,), generator=gen, device=device), 1)
        steps[start] = 0
        cs = torch.cumsum(steps, 0)
        positions = p0[r] + cs - cs[start][r]
        rc = torch.repeat_interleave(torch.arange(nr, device=device), Wr, output_size=cells)
        col = torch.arange(cells, device=device) - (torch.cumsum(Wr, 0) - Wr)[rc]
        limit = top[rc] - torch.randint(0, 8, (cells,), generator=gen, device=device)
        table = torch.where(col < tail[rc], torch.minimum(base[rc] + step[rc] * col, top[rc]), limit)
        within = np.cumsum(z.n) - np.repeat(np.cumsum(z.n)[z.first] - z.n[z.first], R)  # each case's cumsum from 0
        qsl = np.insert(within, z.first, 0)  # each case's [R + 1] query_start_loc, concatenated
        small = torch.from_numpy(np.concatenate([z.next, z.rejected, qsl]).astype(np.int32)).to(device)
        cat = {"next_token_ids": small[:nr], "target_positions": positions, "block_table": table.to(torch.int32),
               "query_start_loc": small[2 * nr :]}
        lengths = {"next_token_ids": R.tolist(), "target_positions": T.tolist(), "block_table": (R * W).tolist(),
                   "query_start_loc": (R + 1).tolist()}
        if has:
            cat["num_rejected_tokens"] = small[nr : 2 * nr]
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
        mql = np.maximum.reduceat(z.n, z.first)
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, scalars, {"sizes": z},
                           host=[{"max_query_len": int(m)} for m in mql])

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        per_case = {n: [sc[n] for sc in b.scalars] for n in ("parallel_drafting_token_id", "block_size",
                                                              "num_speculative_tokens", "total_input_tokens")}
        R = b.lengths["next_token_ids"]
        spare = [c - t for c, t in zip(b.outputs["out_context_positions"][1], per_case["total_input_tokens"], strict=True)]
        return tensor_ops.copy_and_expand_dflash_inputs(
            **{n: t for n, t in b.cat.items()}, **per_case, requests=R,
            widths=[shape[1] for shape in b.shapes["block_table"]], spare=spare)

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
        requests, the tokens and the writes (one copy back), what its positions and slots
        decide: M-RoPE repeats, a query crossing a KV block, positions past ``2**24``, block ids
        past 32767, slots near the int32 limit."""
        z: _Sizes = b.extra["sizes"]
        k = len(b)
        has = bool(b.scalars[0]["has_num_rejected"]) if k else False
        R, K, bs, W, T = z.R, z.K, z.bs, z.W, z.T
        Q = K + 1
        first, last = z.first, z.first + R - 1
        qlen, rej = z.n, z.rejected if has else np.zeros_like(z.n)
        case = np.repeat(np.arange(k), R)

        def any_of(x: np.ndarray) -> np.ndarray:
            return np.add.reduceat(x.astype(np.int64), first) > 0

        mql = np.maximum.reduceat(qlen, first)
        block = np.minimum(256, [next_power_of_2(int(x)) for x in mql + Q])
        on = {
            "has_num_rejected_off": np.full(k, not has), "has_num_rejected_on": np.full(k, has),
            "some_rejected": any_of(rej > 0), "all_but_one_rejected": any_of((qlen > 1) & (rej == qlen - 1)),
            "last_request_rejected": rej[last] > 0, "no_spec_tokens": K == 0, "one_spec_token": K == 1,
            "many_spec_tokens": K >= 8, "query_len_16": Q == 16, "one_token_request": any_of(qlen == 1),
            "several_requests": R > 1, "many_requests": R > 64, "long_request": mql > 512,
            "multi_block_request": any_of(qlen + Q[case] > block[case]),
            "query_straddles_blocks": any_of(qlen // block[case] != (qlen + Q[case] - 1) // block[case]),
            "vllm_launch": np.full(k, True), "kv_block_size_1": bs == 1, "kv_block_size_odd": (bs & (bs - 1)) != 0,
            "stride_1": W == 1, "stride_multiple_of_16": W % 16 == 0,
            "total_tokens_specialised": (T == 1) | (T % 16 == 0), "spare_buffers": z.spare > 0,
            "beyond_1024_requests": R > MAX_NUM_SEQS, "offsets_past_32767": T > INT16_MAX,
            "query_slots_past_32767": R * Q > INT16_MAX, "prefill_thousands": mql >= 2048,
            "spec_tokens_15_plus": K >= SPEC_TOKENS,
            "ids_past_65535": any_of((z.next > ID16_MAX) & (z.next <= 1 << 18)) | ((z.mask > ID16_MAX) & (z.mask <= 1 << 18)),
        }
        if writes is None or not k:
            return [frozenset(f for f, v in on.items() if v[c]) for c in range(k)]
        dev = b.cat["target_positions"].device
        pos = b.cat["target_positions"]
        tcase = torch.repeat_interleave(torch.arange(k, device=dev), torch.from_numpy(T).to(dev), output_size=pos.numel())
        tstart = torch.from_numpy(np.cumsum(z.n) - z.n).to(dev)
        repeat = torch.zeros(pos.numel(), dtype=torch.bool, device=dev)
        repeat[1:] = pos[1:] == pos[:-1]
        repeat[tstart] = False
        bs_t, W_t = torch.from_numpy(bs).to(dev), torch.from_numpy(W).to(dev)
        past = (pos > FLOAT32_EXACT) & (torch.div(pos, bs_t[tcase], rounding_mode="floor") <= W_t[tcase] - 1)
        qpos = writes["out_query_positions"][1]  # each request's Q query positions, request after request
        qcase = torch.from_numpy(np.repeat(np.arange(k), R * Q)).to(dev)
        qj = torch.arange(qpos.numel(), device=dev) - torch.from_numpy(np.repeat(np.cumsum(R * Q) - R * Q, R * Q)).to(dev)
        qk = torch.remainder(qj, torch.from_numpy(Q).to(dev)[qcase])
        crosses = (qk > 0) & (torch.div(qpos, bs_t[qcase], rounding_mode="floor")
                              != torch.div(qpos - qk, bs_t[qcase], rounding_mode="floor"))
        flags = torch.zeros((k, 5), dtype=torch.int64, device=dev)
        flags[:, 0].index_add_(0, tcase, repeat.long())
        flags[:, 1].index_add_(0, tcase, past.long())
        flags[:, 2].index_add_(0, qcase, crosses.long())
        for name, cases in (("out_context_slot_mapping", tcase), ("out_query_slot_mapping", qcase)):
            slots = writes[name][1]
            bsl = bs_t[cases]
            flags[:, 3].index_add_(0, cases, (torch.div(slots, bsl, rounding_mode="floor") > INT16_MAX).long())
            flags[:, 4].index_add_(0, cases, ((slots > INT32_MAX - (1 << 16)) & (slots <= INT32_MAX)).long())
        got = (flags > 0).cpu().numpy()
        for j, f in enumerate(("mrope_positions", "positions_past_2_24", "query_crosses_kv_block", "block_id_past_int16",
                               "slot_near_int32_limit")):
            on[f] = got[:, j]
        return [frozenset(f for f, v in on.items() if v[c]) for c in range(k)]


DEVICE = CopyAndExpandDflashDevice()
"""This target's device mode (``--mode device``)."""
