"""``update_num_computed_tokens_for_batch_change`` on the device (docs/CONTRACT.md §8): a torch
function (``torch.compile``'d) that vLLM runs on the GPU, fuzzed with production batches of up
to 1024 requests (a tail to 4096) drawn on the GPU 256 at a time, as its record's generator
draws them (``cases.body`` at the device's scale: eager or compiled, every compiled size >= 2;
a small, medium or tail-sized batch; a previous batch as large, smaller or larger; buffers
exact or up to 64 rows longer; requests mapped to previous rows in order or shuffled, some of
them new; 1 to 7 drafts, valid counts of the rejection sampler's rows, counts small or long;
one case in ten a tour shape: 15 to 31 drafts with a corrected count past 2**24, or 1025-1088
requests), checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_ops.update_num_computed_tokens_for_batch_change`) and compared
on the GPU, every element of every argument and the guard bands around them:
``num_computed_tokens`` and ``num_accepted_tokens`` updated in place
(:attr:`~...targetkit.device_batch.DeviceBatch.inout`), the others unchanged. Each case runs
as its record runs it (:meth:`~.record.BatchChange.invoke`, its mode); a compiled case on
arguments of a storage each (as vLLM's buffers are: a batch's arguments share one buffer per
dtype, which would compile the function for aliased inputs instead), copied with the guard
bands around them out of the batch's buffers and back after the call."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...generation.strategies import FLOAT32_EXACT, MAX_NUM_SEQS, SPEC_TOKENS, TOUR_NOTE, TOUR_SHARE
from ...targetkit.device import GUARD, DeviceCase
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    feature_sets,
    owners,
    per_case_any,
    rows_of,
    state_rows,
    uniform,
)
from .layout import ARRAYS, INOUT, MAX_COUNT, MODES, NAME
from .record import TARGET

TOUR = TOUR_SHARE
"""The share of cases that are one of the tour's shapes (as the record's bulk generator draws
them), half of them each."""
SHAPES = ("long_context", "many_requests")
EDGE = 16
"""An end of a range one time in this many, as :class:`~...generation.choosers.RngChooser` draws."""


def _integer(rng: np.random.Generator, lo: Any, hi: Any, k: int) -> np.ndarray:
    """``k`` draws of :meth:`~...generation.choosers.RngChooser.integer` (an end of the range
    one time in 16)."""
    lo, hi = np.broadcast_to(np.asarray(lo, dtype=np.int64), k), np.broadcast_to(np.asarray(hi, dtype=np.int64), k)
    u = rng.integers(lo, hi, endpoint=True)
    edge = (hi > lo) & (rng.integers(0, EDGE, size=k) == 0)
    return np.where(edge, np.where(rng.random(k) < 0.5, hi, lo), u)


def _pick(rng: np.random.Generator, options: Any, k: int) -> np.ndarray:
    options = np.asarray(options)
    return options[rng.integers(0, len(options), size=k)]


class _Batch(DeviceBatch):
    """A batch whose verified elements are counted as the record's ``output_tokens`` counts a
    case's: every argument (each is compared, element for element)."""

    def tokens(self, k: int) -> int:
        return sum(self.lengths[n][k] for n in ARRAYS)


def _sizes(b: DeviceBatch) -> dict[str, list[int]]:
    """The oracle's host-known sizes of each case: requests, previous batch, buffer rows."""
    return {"n": b.lengths["prev_positions"], "P": b.lengths["valid_sampled_token_count"],
            "Mx": b.lengths["num_computed_tokens"]}


def _own(view: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``view`` (of a batch's buffer) with the :data:`~...targetkit.device.GUARD` elements on
    either side of it, as a region of that buffer, a copy of the region in a storage of its
    own, and the view's place in the copy."""
    region = torch.as_strided(view, (GUARD + view.numel() + GUARD,), (1,), view.storage_offset() - GUARD)
    copy = region.clone()
    return region, copy, copy[GUARD : GUARD + view.numel()]


class _Device(StepBatchDevice):
    name = NAME
    launch_names = ("mode",)
    record = TARGET
    oracle_name = "torch oracle (oracles/tensor_ops.py)"
    kinds = ("tour",)

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0, kind: str | None = None) -> DeviceBatch:
        """``k`` cases as the record's generator draws them (``cases.body`` at the device's
        scale, a tour shape one case in ten; ``kind="tour"``: every case one): per case its
        mode, requests ``n``, previous batch ``P``, buffer rows, order, share of new requests,
        values' range, ``K`` and whether its accepted counts are all 1; per request its
        previous row (a random permutation's, or its own) and whether it is new; per buffer row
        its drafts and count; per previous row its valid count; per request its CPU count and
        accepted count; a long context's first request with all ``K`` drafts, ``K + 1`` valid
        tokens and a count past 2**24."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        tour = rng.random(k) < TOUR if kind is None else np.ones(k, dtype=bool)
        shape = np.where(tour, rng.integers(0, 2, size=k), -1)
        lc, mr = shape == 0, shape == 1
        # the body (cases.body)
        compiled = rng.random(k) < 0.5
        low = np.where(compiled, 2, 1)
        top = np.maximum(low, _pick(rng, [8] * 6 + [max_requests] * 3 + [4 * max_requests], k))
        n = _integer(rng, low, top, k)
        how = rng.integers(0, 3, size=k)  # same, smaller, larger
        P = np.where(how == 0, n, np.where(how == 1, _integer(rng, low, np.maximum(low, n), k), n + _integer(rng, 1, 8, k)))
        extra = np.where(rng.random(k) < 0.5, 0, _integer(rng, 1, 64, k))
        shuffled = rng.random(k) < 0.5
        new_share = _pick(rng, [0.0, 0.2, 0.5, 1.0], k)
        long = rng.random(k) < 0.5
        K = rng.integers(1, 8, size=k)
        # the tour's (tour.py)
        ln = rng.integers(2, 17, size=k)
        mn = rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65, size=k)
        n = np.where(lc, ln, np.where(mr, mn, n))
        P = np.where(lc, ln + rng.integers(0, 5, size=k), np.where(mr, mn + rng.integers(-16, 17, size=k), P))
        compiled = np.where(tour, rng.random(k) < 0.5, compiled)
        extra = np.where(lc, rng.integers(0, 9, size=k), np.where(mr, rng.integers(0, 65, size=k), extra))
        shuffled = np.where(lc, True, np.where(mr, rng.random(k) >= 0.4, shuffled))
        new_share = np.where(lc, 0.2, np.where(mr, _pick(rng, [0.0, 0.2, 0.5], k), new_share))
        long = np.where(lc, True, np.where(mr, rng.random(k) < 0.5, long))
        K = np.where(lc, rng.integers(SPEC_TOKENS, 32, size=k), np.where(mr, rng.integers(1, SPEC_TOKENS + 1, size=k), K))
        ones = rng.random(k) < 0.7
        S = np.maximum(n, P)
        Mx = S + extra

        # per request: its previous row (the first n of a permutation of max(n, P) rows, or its
        # own), -1 past the previous batch and for a new request
        rows = rows_of({"n": n.tolist(), "s": S.tolist()}, "n", "s", device)
        m = rows.n
        r = torch.where(rows.per_row(shuffled), state_rows(rows, gen), rows.local)
        prev = torch.where(r < rows.per_row(P), r, -1)
        prev = torch.where(torch.rand(m, generator=gen, device=device) < rows.per_row(new_share), -1, prev)
        # per buffer row: its drafts (0 to K, 0 one time in 5) and count; per previous row its valid count
        em = owners(Mx, device)
        zm = torch.zeros_like(em)
        Km = host_to(K, device)[em]
        drafts = torch.where(torch.rand(em.numel(), generator=gen, device=device) < 0.2, 0, uniform(gen, zm, Km))
        longm = host_to(long, device)[em]
        computed = torch.where(longm, uniform(gen, zm, MAX_COUNT - Km - 1), uniform(gen, zm, zm + 4096))
        ep = owners(P, device)
        jp = torch.arange(ep.numel(), device=device) - host_to(np.cumsum(P) - P, device)[ep]
        m_base = host_to(np.cumsum(Mx) - Mx, device)
        d = drafts[m_base[ep] + jp]
        zp = torch.zeros_like(ep)
        valid = torch.where(d > 0, uniform(gen, zp + 1, d + 1), uniform(gen, zp, zp + 1))
        # per request: its CPU count and accepted count (all 1 seven times in ten)
        zr = torch.zeros(m, dtype=torch.int64, device=device)
        cpu = torch.where(rows.per_row(long), uniform(gen, zr, zr + MAX_COUNT), uniform(gen, zr, zr + 4096))
        accepted = torch.where(rows.per_row(ones), 1, uniform(gen, zr + 1, rows.per_row(K) + 1))
        if lc.any():  # a long context's first request: a previous row (the first free one if new), all K drafts accepted
            p_base = host_to(np.cumsum(P) - P, device)
            used = torch.zeros(ep.numel(), dtype=torch.bool, device=device)
            used[(p_base[rows.cid] + prev)[prev >= 0]] = True
            free = torch.full((k,), 1 << 40, dtype=torch.int64, device=device).scatter_reduce(
                0, ep, torch.where(used, 1 << 40, jp), "amin")
            first = host_to((np.cumsum(n) - n)[lc], device)
            cases = host_to(np.flatnonzero(lc), device)
            prev[first] = torch.where(prev[first] < 0, free[cases], prev[first])
            g = prev[first]
            computed[m_base[cases] + g] = computed[m_base[cases] + g].clamp(min=FLOAT32_EXACT + 1)
            drafts[m_base[cases] + g] = host_to(K[lc], device)
            valid[p_base[cases] + g] = host_to(K[lc] + 1, device)

        i32 = torch.int32
        cat = {"num_computed_tokens": computed.to(i32), "num_accepted_tokens": accepted.to(i32), "prev_positions": prev,
               "valid_sampled_token_count": valid.to(i32), "prev_num_draft_tokens": drafts.to(i32),
               "cpu_num_computed_tokens": cpu.to(i32)}
        nl, Pl, Ml = n.tolist(), P.tolist(), Mx.tolist()
        lengths = {"num_computed_tokens": Ml, "num_accepted_tokens": nl, "prev_positions": nl,
                   "valid_sampled_token_count": Pl, "prev_num_draft_tokens": Ml, "cpu_num_computed_tokens": nl}
        shapes = {x: [(y,) for y in lengths[x]] for x in cat}
        host = [{"mode": MODES[int(c)], "note": TOUR_NOTE + SHAPES[sh] if sh >= 0 else ""}
                for c, sh in zip(compiled, shape, strict=True)]
        return _Batch(cat, lengths, shapes, {}, {}, {}, [{} for _ in range(k)], host=host, inout=INOUT)

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        return tensor_ops.update_num_computed_tokens_for_batch_change(**{x: b.cat[x] for x in ARRAYS}, **_sizes(b))

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        """As the record runs the function (:meth:`~.record.BatchChange.invoke`) in the case's
        mode: eager on the views; compiled on copies of them in storages of their own, with the
        guard bands around them (copied back after the call: a write anywhere in them shows
        in the batch's buffers)."""
        mode = dc.host["mode"]
        if mode == "eager":
            self.record.invoke(impl, views, mode)
            return
        own = {x: _own(views[x]) for x in ARRAYS}
        self.record.invoke(impl, {x: v for x, (_, _, v) in own.items()}, mode)
        for region, copy, _ in own.values():
            region.copy_(copy)

    def alone(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> Any:
        """The function alone on the case's arguments, in its mode (the benchmark's kernel
        alone: a compiled case's storages of their own made beforehand, nothing copied back)."""
        mode = dc.host["mode"]
        args = views if mode == "eager" else {x: _own(views[x])[2] for x in ARRAYS}
        return lambda: self.record.invoke(impl, args, mode)

    def to_case(self, dc: DeviceCase) -> Case:
        """The case with its launch (its mode, as drawn)."""
        h = dc.host
        return Case(kernel=self.name,
                    arrays={x: t if isinstance(t, np.ndarray) else t.cpu().numpy() for x, t in dc.inputs.items()},
                    launch={"mode": h["mode"]},
                    note=(h["note"] + ": " if h.get("note") else "") + "drawn on the device (eaglefuzz fuzz --mode device)")


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        z = _sizes(b)
        n, P, Mx = (np.asarray(z[x], dtype=np.int64) for x in ("n", "P", "Mx"))
        dev = a["prev_positions"].device
        rows = rows_of(b.lengths, "prev_positions", None, dev.type)
        prev = a["prev_positions"].long()
        g = prev.clamp(min=0)
        at_m = rows.per_row(np.cumsum(Mx) - Mx) + g
        drafts = a["prev_num_draft_tokens"].long()[at_m]
        corrected = a["num_computed_tokens"].long()[at_m] + a["valid_sampled_token_count"].long()[rows.per_row(np.cumsum(P) - P) + g]
        part = (prev >= 0) & (drafts > 0)
        moved = part & (prev != rows.local)
        on = per_case_any(rows, {"new_request": prev < 0, "with_drafts": part, "without_drafts": (prev >= 0) & ~part,
                                 "reordered": moved, "overwritten_source": moved & (prev < rows.per_row(n)),
                                 "counts_past_2_24": part & (corrected > FLOAT32_EXACT),
                                 "spec_tokens_15_plus": part & (drafts >= SPEC_TOKENS)})
        compiled = np.asarray([h["mode"] == "compiled" for h in b.host], dtype=bool)
        on |= {"eager": ~compiled, "compiled": compiled, "single_request": n == 1, "several_requests": n > 1,
               "many_requests": n > 64, "smaller_previous_batch": P < n, "larger_previous_batch": P > n,
               "exact_buffers": Mx == n, "longer_buffers": Mx > n, "beyond_1024_requests": n > MAX_NUM_SEQS}
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
