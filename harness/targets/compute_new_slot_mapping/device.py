"""``compute_new_slot_mapping`` on the device (docs/CONTRACT.md §7): a torch function that vLLM
runs on the GPU, fuzzed with production batches of up to 1024 requests (a tail to 4096) drawn
on the GPU 256 at a time, as its record's generator draws them (``cases.body`` at the device's
scale: small, medium or tail-sized batches, queries of up to 4, 16, 64 or 8192 tokens within
16384 tokens a case, ``N`` of 1 to 15, every block size of the record, tables of 1-16 or 1-512
columns, exact or wide, of small, any or near-limit block ids, positions in section 1's layout
up to ``M - 1``, rejected tails; one case in ten a tour shape: a context past 2**24 with ids
near the int32 slot limit, a prefill past 32767 tokens, or 1025-1088 requests), checked
against the batched torch oracle (:func:`~eaglefuzz.oracles.tensor_ops.compute_new_slot_mapping`)
and compared on the GPU. Each case is called as its record calls the function (vLLM's
``CommonAttentionMetadata``, keywords), on views of the batch's buffers or on tensors of their
own (``launch.views``); the returned tensor must be a tensor on the device, int64, of
``len(new_positions)`` elements (else the launch raises and the record's check reports it),
and is copied into the case's output buffer: every element compared, with every input (the
metadata's tensors included) and the guard bands around them. A launch also raises where the
function rebinds or changes a field of ``cad`` that is no buffer of the batch."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...generation.strategies import (
    FLOAT32_EXACT,
    INT16_MAX,
    INT32_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    TOUR_NOTE,
    TOUR_SHARE,
)
from ...targetkit.block_tables import BLOCK_SIZES, MAX_TABLE, max_block_id, table_width
from ...targetkit.device import DeviceCase
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.pyfunc import field_names
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    cumulative,
    feature_sets,
    owners,
    per_case_any,
    rows_of,
    uniform,
)
from .layout import MAX_TOKENS, NAME
from .record import ARRAYS, TARGET, metadata

TOUR = TOUR_SHARE
"""The share of cases that are one of the tour's shapes (as the record's bulk generator draws
them), a third of them each."""
SHAPES = ("long_context", "huge_offsets", "many_requests")
EDGE = 16
"""An end of a range one time in this many (an element of an array: half as often), as
:class:`~...generation.choosers.RngChooser` draws."""


def _integer(rng: np.random.Generator, lo: Any, hi: Any, k: int, edge: int = EDGE) -> np.ndarray:
    """``k`` draws of :meth:`~...generation.choosers.RngChooser.integer` (an end of the range
    one time in ``edge``; ``2 * EDGE``: an element of ``array_of``)."""
    lo, hi = np.broadcast_to(np.asarray(lo, dtype=np.int64), k), np.broadcast_to(np.asarray(hi, dtype=np.int64), k)
    u = rng.integers(lo, hi, endpoint=True)
    at_end = rng.integers(0, edge, size=k) == 0
    if edge == EDGE:
        at_end &= hi > lo
    return np.where(at_end, np.where(rng.random(k) < 0.5, hi, lo), u)


def _pick(rng: np.random.Generator, options: Any, k: int) -> np.ndarray:
    options = np.asarray(options)
    return options[rng.integers(0, len(options), size=k)]


def _fit(lengths: list[np.ndarray], N: np.ndarray, most: np.ndarray) -> list[np.ndarray]:
    """Each case's query lengths shortened, then fewer, until its tokens fit ``most``
    (:func:`~.layout.build`'s loop)."""
    out = []
    for q, n, m in zip(lengths, N.tolist(), most.tolist(), strict=True):
        while int(q.sum()) + q.size * n > m:
            q = q // 2 if q.sum() else q[: q.size // 2]
        out.append(q)
    return out


class _Batch(DeviceBatch):
    """A batch whose verified elements are counted as the record's ``output_tokens`` counts a
    case's: the result and every input (each is compared, element for element)."""

    def tokens(self, k: int) -> int:
        return self.outputs["new_slot_mapping"][1][k] + sum(self.lengths[n][k] for n in ARRAYS)


def _sizes(b: DeviceBatch) -> dict[str, list[int]]:
    """The oracle's host-known sizes of each case."""
    sc = b.scalars
    return {"R": [s[0] for s in b.shapes["block_table"]], "NB": [s[1] for s in b.shapes["block_table"]],
            "block_size": [s["block_size"] for s in sc], "num_new_tokens": [s["num_new_tokens"] for s in sc],
            "max_model_len": [s["max_model_len"] for s in sc]}


class FieldChanged(RuntimeError):
    """The function under test rebound or changed a field of ``cad`` that no buffer of the
    batch holds, or returned what is no result (a finding: the record's check reports it)."""


class _Device(StepBatchDevice):
    name = NAME
    launch_names = ("views",)
    record = TARGET
    oracle_name = "torch oracle (oracles/tensor_ops.py)"
    kinds = ("tour",)

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0, kind: str | None = None) -> DeviceBatch:
        """``k`` cases as the record's generator draws them (``cases.body`` at the device's
        scale, a tour shape one case in ten; ``kind="tour"``: every case one): per case its
        requests' query lengths (host), ``N``, block size, table width and fit, model length,
        the block ids' range, views or tensors of its own, positions near the model's end or
        anywhere; per request its rejected tail and first position, its sequence length; per
        token its old slot; per table element its block id."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        tour = rng.random(k) < TOUR if kind is None else np.ones(k, dtype=bool)
        shape = np.where(tour, rng.integers(0, 3, size=k), -1)
        lc, ho, mr = shape == 0, shape == 1, shape == 2
        body = ~tour
        # the body (cases.body): its regime's requests, a cap on their queries, N, the block size,
        # the table's width and fit, the block ids' range, views, positions near the end
        top = _pick(rng, [8] * 6 + [max_requests] * 3 + [4 * max_requests], k)
        R = _integer(rng, 1, top, k)
        cap = _pick(rng, [4, 16, 64, 8192 if max_requests >= MAX_REQUESTS else 16], k)
        N = _pick(rng, [1, 2, 3, 4, 7, 15], k)
        bs = _pick(rng, BLOCK_SIZES, k)
        nb = _integer(rng, 1, np.where(rng.random(k) < 0.5, 16, 512), k)
        exact = rng.random(k) < 0.5
        ids = rng.integers(0, 3, size=k)  # small, any, near the limit
        views = rng.random(k) < 0.5
        near = rng.random(k) < 0.5
        # the tour's (tour.py): a long context, a prefill past 32767 tokens, 1025-1088 requests
        lbs = _pick(rng, [1024, 528], k)
        lnb = np.asarray([table_width(FLOAT32_EXACT + int(x), int(b)) for x, b in zip(rng.integers(4096, 1 << 16, size=k), lbs,
                                                                                       strict=True)])
        hbs = _pick(rng, [64, 128, 256], k)
        hnb = np.asarray([table_width(int(x), int(b)) for x, b in zip(rng.integers(1 << 16, 1 << 18, size=k), hbs, strict=True)])
        R = np.where(lc, rng.integers(1, 3, size=k), np.where(ho, rng.integers(2, 5, size=k),
                                                              np.where(mr, rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65, size=k), R)))
        N = np.where(lc, rng.integers(SPEC_TOKENS, 33, size=k), np.where(ho, rng.integers(1, 5, size=k),
                                                                        np.where(mr, rng.integers(1, 4, size=k), N)))
        bs = np.where(lc, lbs, np.where(ho, hbs, np.where(mr, _pick(rng, [16, 32], k), bs)))
        nb = np.where(lc, lnb, np.where(ho, hnb, np.where(mr, rng.integers(1, 9, size=k), nb)))
        exact = np.where(lc | ho, True, np.where(mr, rng.random(k) < 0.5, exact))
        ids = np.where(lc, 0, np.where(ho, rng.integers(0, 2, size=k), np.where(mr, 1, ids)))
        near = np.where(lc, True, np.where(ho, False, near))
        # the queries (host): the body's up to its cap (an end one time in 32), the tour's 1-64
        # tokens (a prefill of 32768-36863 among them) or 1-3
        req = np.repeat(np.arange(k), R)
        lo = np.ones(req.size, dtype=np.int64)
        hi = np.where(lc | ho, 64, np.where(mr, 3, cap))[req]
        q = np.where(body[req], _integer(rng, lo, hi, req.size, 2 * EDGE), rng.integers(lo, hi, endpoint=True))
        first = np.cumsum(R) - R
        big = first + (rng.random(k) * R).astype(np.int64)
        q[big[ho]] = rng.integers(INT16_MAX + 1, INT16_MAX + 4097, size=int(ho.sum()))
        most = np.where(ho, 1 << 17, MAX_TOKENS)
        lengths = _fit(np.split(q, first[1:]), N, most)
        R = np.asarray([x.size for x in lengths], dtype=np.int64)
        table_cap = np.where(lc | ho, R * nb, MAX_TABLE)
        nb = np.maximum(1, np.minimum(nb, table_cap // np.maximum(R, 1)))
        full = nb * bs
        M = np.where(exact, full, (rng.random(k) * full).astype(np.int64) + 1)
        short = full < N + 1
        nb = np.where(short, np.minimum(table_cap // R, -(-(N + 1) // bs)), nb)
        M = np.maximum(M, N + 1)
        q = np.concatenate(lengths)
        req = np.repeat(np.arange(k), R)
        q = np.maximum(1, np.minimum(q, (M - N)[req]))
        Rl, T = R.tolist(), np.add.reduceat(q, np.cumsum(R) - R).astype(np.int64)
        L = T + R * N

        rows = rows_of({"r": Rl}, "r", None, device)
        n = rows.n
        qt = host_to(q, device)
        count = qt + rows.per_row(N)
        zero = torch.zeros(n, dtype=torch.int64, device=device)
        Mr = rows.per_row(M)
        # per request: its rejected tail (at most qlen - 1, six times in ten where qlen > 1), its
        # first position (near the model's end, or anywhere its live tokens fit), its sequence length
        u = torch.rand((2, n), generator=gen, device=device, dtype=torch.float64)
        rejected = torch.where((qt > 1) & (u[0] < 0.6), uniform(gen, zero, qt - 1), zero)
        live = count - rejected
        p0 = torch.where(rows.per_row(near), (Mr - live - uniform(gen, zero, zero + 3)).clamp(min=0),
                         uniform(gen, zero, Mr - live))
        seq = (qt + uniform(gen, zero, Mr - 1)).clamp(max=INT32_MAX)
        tok = torch.repeat_interleave(torch.arange(n, device=device), count, output_size=int(L.sum()))
        j = torch.arange(int(L.sum()), device=device) - (torch.cumsum(count, 0) - count)[tok]
        mask = j >= live[tok]
        positions = torch.where(mask, 0, p0[tok] + j)
        # the old slots (never read): any from -1 to 2**40 - 1, the prefill's plain ones
        tc = owners(T, device)
        old = uniform(gen, torch.full_like(tc, -1), torch.full_like(tc, (1 << 40) - 1))
        plain = torch.arange(int(T.sum()), device=device) - host_to(np.cumsum(T) - T, device)[tc]
        old = torch.where(host_to(ho, device)[tc], plain, old)
        # the tables: each case's block ids in its range; the long context's null blocks but in its
        # columns from (M - 256) // bs, near the limit
        cells = R * nb
        e = owners(cells, device)
        col = (torch.arange(int(cells.sum()), device=device) - host_to(np.cumsum(cells) - cells, device)[e]) \
            % host_to(nb, device)[e]
        tops = np.asarray([max_block_id(int(b)) for b in bs])
        lo = np.where(ids == 2, np.maximum(0, tops - (1 << 16) // bs), np.where(lc, tops - 7, 0))
        hi = np.where(ids == 0, np.minimum(tops, 4096), tops)
        hi = np.where(lc, tops, hi)
        table = uniform(gen, host_to(lo, device)[e], host_to(hi, device)[e])
        from_col = host_to((M - 256) // bs, device)[e]
        table = torch.where(host_to(lc, device)[e] & (col < from_col), 0, table)
        seq32 = seq.to(torch.int32)
        most_seq = torch.zeros(k, dtype=torch.int32, device=device).scatter_reduce(0, rows.cid, seq32, "amax")

        cat = {"query_start_loc": cumulative(rows, qt), "block_table": table.to(torch.int32), "seq_lens": seq32,
               "slot_mapping": old, "new_positions": positions, "is_rejected_token_mask": mask}
        lengths_of = {"query_start_loc": [r + 1 for r in Rl], "block_table": cells.tolist(), "seq_lens": Rl,
                      "slot_mapping": T.tolist(), "new_positions": L.tolist(), "is_rejected_token_mask": L.tolist()}
        shapes = {x: [(y,) for y in lengths_of[x]] for x in cat} | {"block_table": list(zip(Rl, nb.tolist(), strict=True))}
        scalars = [{"block_size": int(b), "num_new_tokens": int(x), "max_model_len": int(m)} for b, x, m in zip(bs, N, M, strict=True)]
        qsl = [np.concatenate([[0], np.cumsum(x)]).astype(np.int32) for x in np.split(q, np.cumsum(R)[:-1])]
        host = [{"views": bool(v), "qsl": s, "max_seq_len": int(m), "note": TOUR_NOTE + SHAPES[sh] if sh >= 0 else ""}
                for v, s, m, sh in zip(views, qsl, most_seq.cpu().tolist(), shape, strict=True)]
        return _Batch(cat, lengths_of, shapes, {}, {}, {"new_slot_mapping": (torch.int64, L.tolist())}, scalars, host=host)

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        a = b.cat
        return tensor_ops.compute_new_slot_mapping(
            query_start_loc=a["query_start_loc"], block_table=a["block_table"], new_positions=a["new_positions"],
            is_rejected_token_mask=a["is_rejected_token_mask"], **_sizes(b))

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        """As the record calls the function (:meth:`~.record.NewSlotMapping.invoke`, the
        metadata of :func:`~.record.metadata`): on the views, or on copies of them (tensors of
        their own, copied back after the call, so that a write into one shows in the batch's
        buffers). The result is checked as the record's check checks it (a tensor, on the
        device, int64, ``len(new_positions)`` elements: :class:`FieldChanged` otherwise) and
        copied into ``new_slot_mapping``; so is ``cad`` (its fields not rebound, its host
        fields as given)."""
        h = dc.host
        out = views["new_slot_mapping"]
        tensors = {n: views[n] if h["views"] else views[n].clone() for n in ARRAYS}
        cad = metadata(tensors.__getitem__, h["qsl"], int(h["qsl"].size) - 1, h["max_seq_len"],
                       self.record.types.CommonAttentionMetadata)
        fields = {f: getattr(cad, f) for f in field_names(cad)}
        mine = [id(t) for t in tensors.values()]  # the batch's buffers: compared there
        given = {f: v.clone() if isinstance(v, torch.Tensor) and id(v) not in mine else v for f, v in fields.items()}
        result = self.record.invoke(impl, cad, tensors, dc.scalars)
        if not h["views"]:
            for n in ARRAYS:
                views[n].copy_(tensors[n])
        for f, v in fields.items():
            now = getattr(cad, f)
            if isinstance(v, torch.Tensor):
                if now is not v:
                    raise FieldChanged(f"cad.{f} rebound")
                if given[f] is not v and not torch.equal(now, given[f]):  # a host copy (query_start_loc_cpu)
                    raise FieldChanged(f"cad.{f} changed")
            elif type(now) is not type(v) or now != v:
                raise FieldChanged(f"cad.{f} changed")
        if not isinstance(result, torch.Tensor):
            raise FieldChanged(f"the result is a {type(result).__name__}, not a tensor")
        if result.device.type != out.device.type or result.dtype != out.dtype or tuple(result.shape) != tuple(out.shape):
            raise FieldChanged(f"the result is {result.dtype} {tuple(result.shape)} on {result.device.type}, "
                               f"not {out.dtype} {tuple(out.shape)} on {out.device.type}")
        out.copy_(result)

    def alone(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> Any:
        """The function alone on the case's views, as vLLM calls it (the benchmark's kernel
        alone: the metadata made beforehand, nothing checked, the result dropped)."""
        h = dc.host
        cad = metadata(views.__getitem__, h["qsl"], int(h["qsl"].size) - 1, h["max_seq_len"],
                       self.record.types.CommonAttentionMetadata)
        return lambda: self.record.invoke(impl, cad, views, dc.scalars)

    def to_case(self, dc: DeviceCase) -> Case:
        """The case with its launch (views or tensors of their own, as drawn)."""
        h = dc.host
        return Case(kernel=self.name,
                    arrays={n: t if isinstance(t, np.ndarray) else t.cpu().numpy() for n, t in dc.inputs.items()},
                    scalars=dict(dc.scalars), launch={"views": h["views"]},
                    note=(h["note"] + ": " if h.get("note") else "") + "drawn on the device (eaglefuzz fuzz --mode device)")


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        z = _sizes(b)
        dev = a["new_positions"].device
        k = len(b)
        R, nb_k = np.asarray(z["R"], dtype=np.int64), np.asarray(z["NB"], dtype=np.int64)
        bs_k, N_k, M_k = (np.asarray(z[x], dtype=np.int64) for x in ("block_size", "num_new_tokens", "max_model_len"))
        rows = rows_of({"r": R.tolist()}, "r", None, dev.type)
        qsl = a["query_start_loc"].long()
        counts = qsl[rows.cu_at + 1] - qsl[rows.cu_at] + rows.per_row(N_k)
        owner = torch.repeat_interleave(torch.arange(rows.n, device=dev), counts, output_size=a["new_positions"].numel())
        cid = rows.cid[owner]
        bs, M, nb = (host_to(x, dev)[cid] for x in (bs_k, M_k, nb_k))
        pos = a["new_positions"].long()
        rej = a["is_rejected_token_mask"].bool()
        live = ~rej & (pos < M)
        q = torch.minimum(pos, M - 1)
        col = q // bs
        row_at = host_to(np.cumsum(R * nb_k) - R * nb_k, dev)[rows.cid] + rows.local * rows.per_row(nb_k)
        block = a["block_table"].reshape(-1).long()[row_at[owner] + col]
        slot = block * bs + q % bs
        big = torch.iinfo(torch.int64).max
        lo = torch.full((rows.n,), big, dtype=torch.int64, device=dev).scatter_reduce(0, owner[live], col[live], "amin")
        hi = torch.full((rows.n,), -1, dtype=torch.int64, device=dev).scatter_reduce(0, owner[live], col[live], "amax")
        tokens = rows_of(b.lengths, "new_positions", None, dev.type)
        on = per_case_any(tokens, {
            "rejected_tokens": rej, "last_position": live & (pos == M - 1), "block_start": live & (pos > 0) & (pos % bs == 0),
            "last_column": col == nb - 1, "slot_near_int32_limit": live & (slot > INT32_MAX - (1 << 16)),
            "positions_past_2_24": live & (pos > FLOAT32_EXACT), "block_id_past_int16": live & (slot // bs > INT16_MAX)})
        on |= per_case_any(rows, {"request_spans_blocks": hi > lo})
        views = np.asarray([h["views"] for h in b.host], dtype=bool)
        qsl_h = [h["qsl"].astype(np.int64) for h in b.host]
        on |= {"single_request": R == 1, "several_requests": R > 1, "many_requests": R > 64, "n_one": N_k == 1,
               "n_several": N_k >= 2, "vllm_layout": R > 0, "wide_table": nb_k * bs_k - M_k >= bs_k,
               "block_size_one": bs_k == 1, "odd_block_size": bs_k & (bs_k - 1) != 0,
               "beyond_1024_requests": R > MAX_NUM_SEQS, "offsets_past_32767": np.asarray([x[-1] > INT16_MAX for x in qsl_h]),
               "prefill_thousands": np.asarray([np.diff(x).max(initial=0) >= 2048 for x in qsl_h]),
               "spec_tokens_15_plus": N_k >= SPEC_TOKENS, "views": views, "own_tensors": ~views}
        return feature_sets(on, k)


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
