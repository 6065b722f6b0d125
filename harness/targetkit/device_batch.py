"""Many device cases per verification: one draw, one oracle, one set of buffers and one
comparison for ``K`` cases, the implementation launched once per case.

A :class:`DeviceBatch` is ``K`` cases whose small inputs are drawn together (each input of
every case one segment of one concatenated tensor) and whose large inputs (probability tables)
are shared: case ``k`` reads the first rows of each. The target's batched oracle
(:meth:`~.device.DeviceTarget.oracle_batch`) gives the writes of all ``K`` cases at once, each
output's flat indices in the concatenation of the cases' outputs. :class:`BatchArenas` lays
every case's arrays out as :class:`~.device.Arenas` does, each between guard bands in one
buffer per storage dtype, pre-filled the same way (sentinels; written elements hold their
expected value with the lowest bit flipped), and a shared input in a poisoned buffer of its
own (:class:`~.device._Big`; one the kernel updates in place, the cases' writes to it at
distinct elements in its own flat coordinates, checked against them): after the ``K``
launches, every element of every case, guard bands, inputs and shared tables included, is
checked: the inputs the kernel leaves alone and the outputs written by a mask against their
sources, segment by segment (no expected copy of them), the other outputs against an expected
copy of their part of the buffer.

A batch with a difference says nothing about which case made it: the engine then checks its
cases one at a time (:class:`~.device.Arenas`, the same oracle on each case alone) and confirms
the failing ones with the NumPy and Numba oracles.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ...oracles.host_copy import host_to
from .device import (
    _NUMPY_OF,
    _SENTINEL,
    _TORCH,
    GUARD,
    DeviceCase,
    _Big,
    _bits,
    _storage,
    bounded_mismatch,
    indexed,
    is_mask,
    lead,
    prefill,
    written_parts,
)
from .placement import check_segments, copy_segments, place_masked, place_writes, positions


@dataclass
class DeviceBatch:
    """``K`` cases drawn together.

    ``cat``: each small input, the cases' arrays concatenated (flat, on the device);
    ``lengths``: its element count per case; ``shapes``: its shape per case (a 2-D input);
    ``shared``: the large inputs (on the device), case ``k`` reading the first
    ``rows[name][k]`` rows; ``outputs``: each output's dtype and per-case element counts (an
    input the kernel updates in place is an input; the oracle's writes to it are its elements
    that change, which the buffers hold as drawn before the launch);
    ``scalars``: per case. ``extra``: what the target's batched oracle needs besides
    (host-known sizes, per-token table rows); ``host``: per case, what its launch needs
    known on the host (:attr:`~.device.DeviceCase.host`), if anything."""

    cat: dict[str, torch.Tensor]
    lengths: dict[str, list[int]]
    shapes: dict[str, list[tuple[int, ...]]]
    shared: dict[str, torch.Tensor]
    rows: dict[str, list[int]]
    outputs: dict[str, tuple[torch.dtype, list[int]]]
    scalars: list[dict]
    extra: dict = field(default_factory=dict)
    host: list[dict] = field(default_factory=list)
    inout: tuple[str, ...] = ()
    """The inputs the kernel updates in place (their elements count as verified output, as the
    record's ``output_tokens`` counts them)."""
    counted: list[int] | None = None
    """Per case, output elements its check verifies besides its outputs and ``inout`` inputs
    (a shared table the kernel updates in place: the elements the case writes)."""

    def __len__(self) -> int:
        return len(self.scalars)

    _starts: dict[str, list[int]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def starts(self, name: str) -> list[int]:
        """Where each case's segment of the concatenated input ``name`` starts (and, last, its
        end)."""
        if name not in self._starts:
            self._starts[name] = np.concatenate([[0], np.cumsum(self.lengths[name])]).tolist()
        return self._starts[name]

    def input_sizes(self) -> np.ndarray:
        """Per case, the elements of its inputs (:meth:`case`'s ``inputs``: its segments of
        ``cat`` and its rows of the shared tables), from the host-known sizes alone."""
        total = np.zeros(len(self), dtype=np.int64)
        for n in self.cat:
            total += np.asarray(self.lengths[n], dtype=np.int64)
        for n, t in self.shared.items():
            total += np.asarray(self.rows[n], dtype=np.int64) * math.prod(t.shape[1:])
        return total

    def tokens(self, k: int) -> int:
        """Output elements case ``k``'s check verifies (an input updated in place included)."""
        return (sum(sizes[k] for _, sizes in self.outputs.values()) + sum(self.lengths[n][k] for n in self.inout)
                + (self.counted[k] if self.counted else 0))

    def case(self, k: int, inputs: dict[str, torch.Tensor] | None = None,
             shared: dict[str, torch.Tensor] | None = None) -> DeviceCase:
        """Case ``k`` alone, its inputs views of ``inputs`` and ``shared`` (by default the
        batch's own tensors; a staged host copy of them for a report)."""
        inputs = self.cat if inputs is None else inputs
        shared = self.shared if shared is None else shared
        arrays = {}
        for n, t in inputs.items():
            s = self.starts(n)
            arrays[n] = t.reshape(-1)[s[k] : s[k + 1]].view(self.shapes[n][k])
        for n, t in shared.items():
            arrays[n] = t[: self.rows[n][k]]
        return DeviceCase(arrays, {n: (dt, sizes[k]) for n, (dt, sizes) in self.outputs.items()}, dict(self.scalars[k]),
                          dict(self.host[k]) if self.host else {})

    def launch_case(self, k: int) -> DeviceCase:
        """What case ``k``'s launch needs besides its views: its scalars and host-known sizes."""
        return DeviceCase({}, {}, self.scalars[k], self.host[k] if self.host else {})


def cases_of(b: DeviceBatch, idx: np.ndarray) -> DeviceBatch:
    """Cases ``idx`` of ``b`` (in that order, a case any number of times) as a batch of their
    own: their segments of every concatenated array copied (one gather a name, by rows of the
    width its cases' shapes share), their lengths, shapes, scalars, host entries and outputs;
    the shared tables and their rows as ``b``'s; no ``extra``."""
    idx = np.asarray(idx, dtype=np.int64)
    cat: dict[str, torch.Tensor] = {}
    for n, t in b.cat.items():
        ln = np.asarray(b.lengths[n], dtype=np.int64)
        shapes = b.shapes.get(n)
        last = {sh[-1] for sh in shapes} if shapes and all(len(sh) > 1 for sh in shapes) else set()
        w = max(last.pop(), 1) if len(last) == 1 else 1
        w = 1 if np.any(ln % w) else w
        rows, first = ln // w, (np.cumsum(ln) - ln) // w
        take = rows[idx]
        at = np.repeat(first[idx] - (np.cumsum(take) - take), take) + np.arange(int(take.sum()), dtype=np.int64)
        got = t.reshape(-1, w).index_select(0, host_to(at, t.device))
        cat[n] = got.reshape(-1, *t.shape[1:]) if t.dim() > 1 else got.reshape(-1)
    pick = idx.tolist()
    return DeviceBatch(cat, {n: [v[i] for i in pick] for n, v in b.lengths.items() if n in b.cat},
                       {n: [v[i] for i in pick] for n, v in b.shapes.items()}, dict(b.shared),
                       {n: [v[i] for i in pick] for n, v in b.rows.items()},
                       {n: (dt, [sizes[i] for i in pick]) for n, (dt, sizes) in b.outputs.items()},
                       [dict(b.scalars[i]) for i in pick], host=[dict(b.host[i]) for i in pick] if b.host else [],
                       inout=b.inout)


def laid_out(arrays: dict[str, tuple[torch.Tensor, list[tuple[int, ...]]]], order: tuple[str, ...]
             ) -> tuple[dict[str, torch.Tensor], dict[str, list[int]], dict[str, list[tuple[int, ...]]]]:  # fmt: skip
    """A batch's ``cat``, ``lengths`` and ``shapes`` of ``arrays`` (name -> (the cases' arrays
    concatenated, each case's shape)), in ``order`` (the kernel's signature's)."""
    cat, lengths, shapes = {}, {}, {}
    for x in order:
        if x in arrays:
            cat[x], shapes[x] = arrays[x]
            lengths[x] = [int(math.prod(sh)) for sh in shapes[x]]
    return cat, lengths, shapes


class BatchArenas:
    """Every case of ``batch`` in guarded buffers, pre-filled for ``writes`` (each output's flat
    indices in the concatenation of the cases' outputs); :attr:`views` per case."""

    def __init__(self, batch: DeviceBatch, writes: dict[str, tuple[torch.Tensor, ...]], device: str,
                 bigs: dict[str, _Big] | None = None) -> None:
        """``writes``: per array ``(flat index, value)`` or ``(flat index, value, bound)``
        (:func:`~.device.written_parts`: the index a mask over the concatenation, or flat
        indices into it); ``bigs``: guarded buffers of shared inputs from an earlier batch that left them
        intact, used again where they hold the same tensor."""
        K = len(batch)
        bigs = bigs or {}
        self.big = {n: bigs[n] if n in bigs and bigs[n].tensor is t and n not in writes else _Big(t, device, writes.get(n))
                    for n, t in batch.shared.items()}
        writes = {n: w for n, w in writes.items() if n not in batch.shared}  # a shared table's: its buffer checks them
        dtypes = {n: t.dtype for n, t in batch.cat.items()} | {n: dt for n, (dt, _) in batch.outputs.items()}
        sizes = {n: batch.lengths[n] for n in batch.cat} | {n: s for n, (_, s) in batch.outputs.items()}
        # per storage dtype, each name's arrays case after case, each after a guard band and
        # padded to 16 bytes (so that every array starts 16-byte aligned, as _layout's do); a
        # name whose cases are arrays [R, *rest] of a few shapes rest (not all [R, 1]): its
        # cases of each rest together, each starting at a multiple of prod(rest) too (their
        # views then made by one split a rest, not a view a case), where that adds no more than
        # a guard band a case or an eighth of the name's elements
        self.offset: dict[str, np.ndarray] = {}
        self._span: dict[str, tuple[int, int]] = {}  # each name's part of its buffer: its arrays and the bands before them
        self.rests: dict[str, list[tuple[int, ...]]] = {}
        self._groups: dict[str, dict[tuple[int, ...], np.ndarray]] = {}
        cursor: dict[torch.dtype, int] = {}
        leads: dict[torch.dtype, int] = {}
        for n, dt in dtypes.items():
            leads[_storage(dt)] = max([leads.get(_storage(dt), 0), *sizes[n]])
        for n, dt in dtypes.items():
            st = _storage(dt)
            u = max(1, 16 // torch.empty(0, dtype=st).element_size())
            sz = np.asarray(sizes[n], dtype=np.int64)
            if st not in cursor:  # the buffer's first array: after a band as long as its largest (device.lead)
                cursor[st] = -(-(lead(leads[st]) - GUARD) // u) * u
                self._span[n] = (0, 0)
            else:
                self._span[n] = (cursor[st], 0)
            rests = [tuple(sh[1:]) for sh in batch.shapes.get(n, [])]
            kinds = Counter(rests)
            pad = sum(math.lcm(u, math.prod(r)) * c for r, c in kinds.items())  # the most the alignment adds
            if (K and all(kinds) and any(r != (1,) for r in kinds) and 3 * len(kinds) < K  # a split, a view, a slice
                    and pad <= max(K * GUARD, int(sz.sum()) // 8)):
                self.rests[n] = rests
            groups = ([(np.arange(K), u)] if n not in self.rests else
                      [(self._of(n, r), math.lcm(u, math.prod(r))) for r in sorted(set(self.rests[n]))])
            self.offset[n] = np.zeros(K, dtype=np.int64)
            for at, a in groups:
                padded = -(-sz[at] // a) * a
                span = -(-GUARD // a) * a + padded
                first = -(-(cursor[st] + GUARD) // a) * a
                self.offset[n][at] = first + np.cumsum(span) - span
                cursor[st] = int(self.offset[n][at[-1]] + padded[-1])
            self._span[n] = (self._span[n][0], cursor[st])
        ended: set[torch.dtype] = set()
        for n, dt in reversed(dtypes.items()):  # the last name of a buffer: up to its end (the band after it)
            if _storage(dt) not in ended:
                ended.add(_storage(dt))
                self._span[n] = (self._span[n][0], cursor[_storage(dt)] + GUARD)
        self.full = {s: torch.full((size + GUARD,), _SENTINEL[s], dtype=s, device=device) for s, size in cursor.items()}
        # each array's concatenated coordinate -> its place in its buffer: a shift per case
        starts = {n: np.concatenate([[0], np.cumsum(sizes[n], dtype=np.int64)]) for n in dtypes}
        # and the segments (where each case starts in cat and in its buffer, its length) of
        # each input and of each exact output written by a mask: one copy
        masked = [n for n, w in writes.items() if is_mask(w[0]) and len(w) < 3 and n not in batch.cat]
        segments = {n: (starts[n][:-1], self.offset[n], np.asarray(sizes[n], dtype=np.int64)) for n in [*batch.cat, *masked]}
        # an input the kernel leaves alone and an exact output written by a mask are checked
        # against their sources, segment by segment, each segment with the band before it
        # (placement.check_segments); the other names against an expected copy of their part
        checked = [n for n in segments if n not in writes or n in masked]
        parts = [np.concatenate([starts[n][1:-1], self.offset[n] - starts[n][:-1]]) for n in dtypes]
        parts += [np.concatenate(segments[n]) for n in segments]
        spans = {n: self._check_table(n, *segments[n]) for n in checked}  # (table, longest span)
        parts += [table for table, _ in spans.values()]
        both = host_to(np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64), device)
        self.shift: dict[str, torch.Tensor] = {}
        self.bounds: dict[str, torch.Tensor] = {}
        at = 0
        for n in dtypes:
            self.bounds[n], self.shift[n] = both[at : at + 2 * K - 1].split([K - 1, K]) if K else (both[:0], both[:0])
            at += 2 * K - 1 if K else 0
        sources: dict[str, torch.Tensor] = {}
        for n, t in batch.cat.items():  # each case's segment of cat copied to its place, no index an element
            sources[n] = t.reshape(-1).view(torch.uint8) if dtypes[n] == torch.bool else _bits(t.reshape(-1), dtypes[n])
            copy_segments(self.full[_storage(dtypes[n])], sources[n], both[at : at + 3 * K], max(sizes[n], default=0))
            at += 3 * K
        tables = {n: both[at + 3 * K * i : at + 3 * K * (i + 1)] for i, n in enumerate(masked)}
        at += 3 * K * len(masked)
        check_tables = {n: both[at + 4 * (K + 1) * i : at + 4 * (K + 1) * (i + 1)] for i, n in enumerate(checked)}
        masks: dict[str, torch.Tensor] = {}  # a masked output's mask (its values in sources)
        # the expected contents of the other names' parts (the inputs as placed; then the writes)
        self.expected = {s: torch.empty_like(b) for s, b in self.full.items()}
        self._compared: dict[torch.dtype, list[tuple[int, int]]] = {}
        for n, dt in dtypes.items():
            if n not in checked:
                lo, hi = self._span[n]
                runs = self._compared.setdefault(_storage(dt), [])
                if runs and runs[-1][1] == lo:
                    runs[-1] = (runs[-1][0], hi)
                else:
                    runs.append((lo, hi))
        for s, runs in self._compared.items():
            for lo, hi in runs:
                self.expected[s][lo:hi] = self.full[s][lo:hi]
        self.loose: dict[torch.dtype, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}
        for n, w in writes.items():
            index, value, bound = written_parts(w) if n in tables else indexed(w)
            s, dt = _storage(dtypes[n]), dtypes[n]
            bits = value.to(torch.uint8) if dt == torch.bool else _bits(value, dt)
            prefilled = dt != torch.bool and n not in batch.cat  # an input updated in place holds what the kernel reads
            if n in tables:  # a mask over the concatenation: its written elements' pre-fill, segment by segment
                masks[n], sources[n] = index.reshape(-1), bits.broadcast_to(index.shape).reshape(-1).contiguous()
                if prefilled:
                    place_masked(None, self.full[s], masks[n], sources[n], tables[n], max(sizes[n], default=0))
                continue
            if bound is None:  # expected and pre-filled bits in one pass (a value per index, as torch broadcasts it)
                place_writes(self.expected[s], self.full[s] if prefilled else None, index.reshape(-1).contiguous(),
                             bits.broadcast_to(index.shape).reshape(-1).contiguous(), self.bounds[n], self.shift[n])
                continue
            placed = self._place(n, index)
            self.loose.setdefault(s, []).append((placed, value.to(dt), bound))
            self.expected[s][placed] = bits
            if prefilled:
                self.full[s][placed] = prefill(bits, bound, s)
        self._checks = [(_storage(dtypes[n]), n, sources[n], masks.get(n), check_tables[n], spans[n][1])
                        for n in checked]  # (storage, name, source, mask, table, longest span)
        per_name = {}
        for n, dt in dtypes.items():  # every case's view of n at once (torch.split: one call, one a width)
            sz = np.asarray(sizes[n], dtype=np.int64)
            two_d = n in batch.shapes and len(batch.shapes[n][0]) > 1  # [n, 1]
            if n in self.rests:
                views: list[Any] = [None] * K
                for r in set(self.rests[n]):
                    at = self._of(n, r)
                    for k, piece in zip(at, self._split(n, dt, at, sz[at], r), strict=True):
                        views[k] = piece
                per_name[n] = views
            elif two_d and any(sh[1:] != (1,) for sh in batch.shapes[n]):  # each case's view of its own shape
                flat = self._split(n, dt, np.arange(K), sz, ())
                per_name[n] = [v.view(sh) for v, sh in zip(flat, batch.shapes[n], strict=True)]
            else:
                per_name[n] = self._split(n, dt, np.arange(K), sz, (1,) if two_d else ())
        shared = {n: b.view.view(batch.shared[n].shape) for n, b in self.big.items()}
        heads = {(n, r): t[:r] for n, t in shared.items() for r in set(batch.rows[n])}  # a view a row count
        self.views: list[dict[str, torch.Tensor]] = [
            {n: v[k] for n, v in per_name.items()} | {n: heads[n, batch.rows[n][k]] for n in shared} for k in range(K)]

    def _check_table(self, name: str, starts: np.ndarray, places: np.ndarray,
                     lengths: np.ndarray) -> tuple[np.ndarray, int]:
        """:func:`~.placement.check_segments`'s table of ``name``'s part of its buffer (its
        cases' segments in buffer order, each with the band before it, and one empty segment
        last for the band after them: the part's end) and its longest span."""
        order = np.argsort(places, kind="stable")
        lo, hi = self._span[name]
        src = np.append(starts[order], 0)
        dst = np.append(places[order], hi)
        n = np.append(lengths[order], 0)
        band = np.concatenate([[lo], dst[:-1] + n[:-1]])
        return np.concatenate([src, dst, n, band]).astype(np.int64), int((dst + n - band).max())

    def expected_buffers(self) -> dict[torch.dtype, torch.Tensor]:
        """Every buffer's expected contents after the launches, whole (the comparison itself
        keeps only the parts it cannot check against the sources: :meth:`mismatch`); for tests
        and for reading a difference."""
        out = {s: b.clone() for s, b in self.expected.items()}
        for s, _, src, mask, table, _ in self._checks:
            starts, places, lengths, bands = table.view(4, -1).cpu()
            out[s][int(bands.min()) : int((places + lengths).max())] = _SENTINEL[s]
            three = torch.cat([starts, places, lengths]).to(table.device)
            if mask is None:
                copy_segments(out[s], src, three, int(lengths.max()), launch=False)
            else:
                place_masked(out[s], None, mask, src, three, int(lengths.max()), launch=False)
        return out

    def _of(self, name: str, rest: tuple[int, ...]) -> np.ndarray:
        """The cases of ``name`` whose arrays are ``[R, *rest]``, in order (every rest's found
        in one pass over the cases, the first time one is asked)."""
        if name not in self._groups:
            groups: dict[tuple[int, ...], list[int]] = {}
            for k, r in enumerate(self.rests[name]):
                groups.setdefault(r, []).append(k)
            self._groups[name] = {r: np.asarray(ks, dtype=np.int64) for r, ks in groups.items()}
        return self._groups[name][rest]

    def _split(self, name: str, dt: torch.dtype, at: np.ndarray, sz: np.ndarray,
               rest: tuple[int, ...]) -> list[torch.Tensor]:
        """The views of ``name``'s cases ``at`` (in buffer order, ``sz`` elements each, each
        starting at a multiple of ``prod(rest)``), ``[sz / prod(rest), *rest]`` each (``rest``
        ``()``: 1-D), made by one split of their span of the buffer."""
        if not len(at):
            return []
        o = self.offset[name][at]
        base = self.full[_storage(dt)][int(o[0]) : int(o[-1] + sz[-1])]
        base = base.view(dt) if dt != _storage(dt) else base
        gaps = np.concatenate([[0], o[1:] - o[:-1] - sz[:-1]])
        rows = np.stack([gaps, sz], 1).reshape(-1) // math.prod(rest)
        return list(torch.split_with_sizes(base.view(-1, *rest) if rest else base, rows.tolist())[1::2])

    def _place(self, name: str, index: torch.Tensor) -> torch.Tensor:
        """Buffer positions of ``name``'s elements at concatenated coordinates ``index``."""
        return positions(index, self.bounds[name], self.shift[name])

    def mismatch(self) -> torch.Tensor:
        """A device scalar: the number of elements, over every buffer, that are not as expected
        (a bounded element: not within its bound of its expected value): the parts of the
        inputs the kernel leaves alone and of the outputs written by a mask against their
        sources (no expected copy: :func:`~.placement.check_segments`), the other parts against
        their expected copy."""
        device = next(iter(self.full.values())).device if self.full else torch.device("cpu")
        total = torch.zeros(1, dtype=torch.int64, device=device)
        for s, _, src, mask, table, longest in self._checks:
            check_segments(self.full[s], src, mask, table, longest, _SENTINEL[s], total)
        for s, runs in self._compared.items():
            for lo, hi in runs:
                total += (self.full[s][lo:hi] != self.expected[s][lo:hi]).sum()
        for s, loose in self.loose.items():  # a bounded element counts where it is not within its bound
            for place, value, bound in loose:
                got = self.full[s][place]
                total += bounded_mismatch(got.view(value.dtype), value, bound).sum() - (got != self.expected[s][place]).sum()
        return total[0] + sum(b.mismatch() for b in self.big.values())


def epoch_of(i: int, full: int) -> tuple[int, float]:
    """Batch ``i``'s table epoch and the share of a full epoch's table rows it draws: epochs
    of 1, 1, 2, 2, 4, 4, ... batches, then ``full`` each, every epoch's tables sized by its
    length (the first ``2 * log2(full)`` epochs together draw as many rows as two full ones).
    A run of a few seconds (a hundred batches) thus meets a dozen vocabularies, not one or two."""
    e, start, length = 0, 0, 1
    while length < full:
        for _ in range(2):
            if i < start + length:
                return e, length / full
            start, e = start + length, e + 1
        length *= 2
    return e + (i - start) // full, 1.0


def step_features(d: np.ndarray, B: np.ndarray, L: list[int], V: int, decided: dict[str, bool],  # noqa: N803
                  more: dict[str, np.ndarray] | None = None) -> list[frozenset[str]]:
    """Each step's features that its sizes decide, as the rejection sampler's records'
    ``features_of`` define them (``d``: the steps' draft counts concatenated, ``B`` their
    request counts, ``L`` their ``max_spec_len``), plus the batch-wide ``decided`` ones and
    ``more`` (a feature's value per step). Vectorised over the steps: no loop per step but
    the one that gathers each distinct combination's set."""
    from ..generation.strategies import MAX_NUM_SEQS
    from .device_draws import MAX_VOCAB

    B = np.asarray(B, dtype=np.int64)
    first = np.cumsum(B) - B
    some = B > 0
    at = np.minimum(first, max(d.size - 1, 0))
    longest = np.where(some, np.maximum.reduceat(d, at) if d.size else 0, 0)
    least = np.where(some, np.minimum.reduceat(d, at) if d.size else 0, 0)
    cols = {"wider_rows": np.asarray(L) > longest, "ragged": longest > least, "several_requests": B > 1,
            "many_requests": B > 64, "beyond_1024_requests": B > MAX_NUM_SEQS, "sixteen_drafts": longest >= 16,
            "vocab_262144": np.full(B.size, V >= MAX_VOCAB)} | (more or {})
    names = [n for n, on in decided.items() if on]
    keys = np.stack([np.asarray(c, dtype=bool) for c in cols.values()], 1) if cols else np.zeros((B.size, 0), bool)
    sets: dict[bytes, frozenset[str]] = {}
    out = []
    for row in keys:
        k = row.tobytes()
        if k not in sets:
            sets[k] = frozenset(names + [n for n, on in zip(cols, row, strict=True) if on])
        out.append(sets[k])
    return out


STEP_FEATURES = frozenset({"wider_rows", "ragged", "several_requests", "many_requests", "beyond_1024_requests",
                           "sixteen_drafts", "vocab_262144"})
"""The features :func:`step_features` decides from a step's sizes."""



class HostBatchArenas:
    """``K`` cases of a target checked on the host (:class:`~.device.HostArenas`) in one
    buffer: every array of every case between guard bands, pre-filled as
    :class:`~.device.HostArenas` pre-fills a case's (sentinels; written elements their expected
    value with the lowest bit flipped), one region per storage dtype, followed by the expected
    contents of the same regions. One host-to-device copy (through pinned memory on a GPU), the
    ``K`` launches and one comparison on the device of the launched half against the expected
    half (bytes as 64-bit words: bit for bit) check all ``K`` cases, guard bands and inputs
    included; only a batch with a difference is copied back, to count its elements on the host.

    Made by the producers (:mod:`~..checking.device_mode.producers`) and sent to the launching
    process as that buffer and its layout: the cases' inputs travel once, inside the expected
    half, and :meth:`case` rebuilds case ``k`` (its inputs as drawn, bit for bit) only when a
    report or a cross-check asks for it. :attr:`launch_cases` holds what a launch needs (each
    case's scalars and outputs, no inputs); ``features[k]``: case ``k``'s coverage features
    where the maker of the batch gave them."""

    def __init__(self, cases: list[DeviceCase], writes: list[dict[str, tuple[np.ndarray, np.ndarray]]]) -> None:
        self._cases: dict[int, DeviceCase] = dict(enumerate(cases))
        self.features: list[frozenset[str]] = []
        self.launch_cases = [DeviceCase({}, dc.outputs, dc.scalars, dc.host) for dc in cases]
        self.input_elements = [sum(int(a.size) for a in dc.inputs.values()) for dc in cases]
        # each case's arrays as HostArenas lays them out: inputs, then outputs (an output of an
        # input's name replaces it), per storage dtype case after case, each after a guard band
        # and 16-byte aligned (Triton specialises a launch on its pointers' alignment)
        entries = []  # (case, name, dtype, elements, shape of a 2-D input or None)
        for k, dc in enumerate(cases):
            spec = {n: (_TORCH[a.dtype], a.size, a.shape if a.ndim > 1 else None) for n, a in dc.inputs.items()}
            spec |= {n: (dt, size, None) for n, (dt, size) in dc.outputs.items()}
            entries += [(k, n, dt, size, shape) for n, (dt, size, shape) in spec.items()]
        cursor: dict[torch.dtype, int] = {}
        offset = []
        for _, _, dt, size, _ in entries:
            s = _storage(dt)
            u = 16 // _ITEMSIZE[s]
            offset.append(-(-(cursor.get(s, 0) + GUARD) // u) * u)
            cursor[s] = offset[-1] + size
        self._regions: dict[torch.dtype, tuple[int, int]] = {}  # storage dtype: (byte start, elements)
        start = 0
        for s, used in cursor.items():
            u = 16 // _ITEMSIZE[s]
            self._regions[s] = (start, -(-(used + GUARD) // u) * u)
            start += self._regions[s][1] * _ITEMSIZE[s]
        self.full_bytes = start
        self.host = np.empty(2 * start, dtype=np.uint8)
        full, expected = self._host_regions(0), self._host_regions(start)
        for s, r in full.items():
            r[:] = _SENTINEL[s]
        place = {(k, n): (o, dt, size) for (k, n, dt, size, _), o in zip(entries, offset, strict=True)}
        self._inputs: list[list[tuple[str, str, tuple[int, ...], torch.dtype, int]]] = []
        for k, dc in enumerate(cases):
            self._inputs.append([])
            for n, a in dc.inputs.items():
                o, dt, size = place[k, n]
                full[_storage(dt)][o : o + size] = _bits(a.reshape(-1), dt)
                self._inputs[k].append((n, a.dtype.str, a.shape, _storage(dt), o))
        self.host[start:] = self.host[:start]
        for k, ws in enumerate(writes):
            for n, (index, value) in ws.items():
                o, dt, size = place[k, n]
                bits = _bits(value, dt)
                expected[_storage(dt)][o : o + size][index] = bits
                if dt != torch.bool and n not in cases[k].inputs:  # an input updated in place: the kernel reads it
                    full[_storage(dt)][o : o + size][index] = bits ^ 1
        # the views: per dtype, one split of its storage region into [gap, array, gap, array, ...]
        self._groups: list[tuple[torch.dtype, int, int, list[int], list[tuple[int, str, tuple[int, ...] | None]]]] = []
        for dt in dict.fromkeys(e[2] for e in entries):
            s = _storage(dt)
            sizes, keys, end = [], [], 0
            for (k, n, d, size, shape), o in zip(entries, offset, strict=True):
                if d == dt:
                    sizes += [o - end, size]
                    keys.append((k, n, shape))
                    end = o + size
            self._groups.append((dt, self._regions[s][0], end, sizes, keys))
        self.dev: torch.Tensor | None = None
        self._copied = False  # whether dev is a copy of host (on a GPU), not host itself
        self._release: Any = None

    def __len__(self) -> int:
        return len(self.launch_cases)

    def __getstate__(self) -> dict:
        # the cases' inputs travel inside the expected half of the buffer, not a second time;
        # the buffer as bytes (pickled at memory speed under protocol 4, which multiprocessing
        # uses: a NumPy array is pickled five times slower), or not at all where it was put in
        # a slot the receiving process maps (:meth:`put_in`)
        state = {k: v for k, v in self.__dict__.items() if k not in ("_cases", "dev", "_copied", "_release")}
        state["host"] = None if self.slot is not None else self.host.tobytes()
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.host is not None:
            self.host = np.frombuffer(self.host, dtype=np.uint8)  # read-only: copied before a write
        self._cases, self.dev, self._copied, self._release = {}, None, False, None

    slot: str | None = None
    """The file (a shared-memory slot) the buffer was written to by :meth:`put_in`; the
    receiving process maps it (:meth:`take_from`) instead of unpickling the buffer."""

    def put_in(self, path: str, capacity: int) -> bool:
        """The buffer written at the start of the file ``path`` (of ``capacity`` bytes), to
        travel without it; ``False`` where it does not fit or cannot be written (a full
        file system: then it travels pickled)."""
        if self.host.nbytes > capacity:
            return False
        try:
            fd = os.open(path, os.O_WRONLY)
            try:
                written = os.pwrite(fd, memoryview(self.host), 0)
            finally:
                os.close(fd)
        except OSError:
            return False
        if written != self.host.nbytes:
            return False
        self.slot = path
        return True

    def take_from(self, mapping: Any, release: Any) -> None:
        """The buffer as :meth:`put_in` wrote it, read in place from ``mapping`` (that file,
        mapped); ``release()`` hands the slot back once the batch is done with
        (:meth:`release`)."""
        self.host = np.frombuffer(mapping, dtype=np.uint8, count=2 * self.full_bytes)
        self._release = release

    def release(self) -> None:
        """The batch is done with: its slot (if any) may take another batch. Nothing of the
        batch is read after this (:meth:`case` copies what a report keeps)."""
        if self._release is not None:
            self._release()
            self._release, self.host, self._cases = None, None, {}

    def _writable(self) -> np.ndarray:
        if not self.host.flags.writeable:
            self.host = self.host.copy()
        return self.host

    def _host_regions(self, at: int) -> dict[torch.dtype, np.ndarray]:
        return {s: self.host[at + b : at + b + n * _ITEMSIZE[s]].view(_NUMPY_OF[s]) for s, (b, n) in self._regions.items()}

    def case(self, k: int) -> DeviceCase:
        """Case ``k`` as drawn (its inputs copied out of the expected half, bit for bit)."""
        if k not in self._cases:
            expected = self._host_regions(self.full_bytes)
            inputs = {n: expected[s][o : o + int(np.prod(shape))].view(np.dtype(dtype)).reshape(shape).copy()
                      for n, dtype, shape, s, o in self._inputs[k]}
            lc = self.launch_cases[k]
            self._cases[k] = DeviceCase(inputs, lc.outputs, lc.scalars, lc.host)
        return self._cases[k]

    @property
    def cases(self) -> list[DeviceCase]:
        """Every case as drawn (:meth:`case`)."""
        return [self.case(k) for k in range(len(self))]

    @property
    def tokens(self) -> int:
        """Output elements the batch's check verifies."""
        return sum(dc.tokens for dc in self.launch_cases)

    def upload(self, device: str) -> list[dict[str, torch.Tensor]]:
        """The buffer on ``device`` (one copy: through pinned memory to a GPU; the host buffer
        itself on the CPU) and each case's views of its arrays there (one split per dtype)."""
        if torch.device(device).type == "cpu":  # the launches write into the host buffer itself
            self.dev, self._copied = torch.from_numpy(self._writable()), False
        else:
            self.dev, self._copied = _staged_copy(self.host, device), True
        return self.views_of(self.dev)

    def views_of(self, buf: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        """Each case's views of its arrays in ``buf`` (bytes laid out as the launched half, or
        as the expected half: the same layout), made with one split per dtype."""
        views: list[dict[str, torch.Tensor]] = [{} for _ in range(len(self))]
        for dt, start, end, sizes, keys in self._groups:
            region = buf[start : start + end * _ITEMSIZE[_storage(dt)]].view(dt)
            for (k, n, shape), piece in zip(keys, torch.split_with_sizes(region, sizes)[1::2], strict=True):
                views[k][n] = piece if shape is None else piece.view(shape)
        return views

    def download(self) -> None:
        """The launched half as the launches left it, back on the host (waits for the device)."""
        if self.dev is not None and self._copied:
            self._writable()[: self.full_bytes] = self.dev[: self.full_bytes].cpu().numpy()

    def mismatch(self) -> int:
        """The number of elements, over every array and guard band of every case, that are not
        as expected. Uploaded to a GPU: compared there first (one scalar read), the buffer
        copied back only where something differs."""
        if self.dev is not None and self._copied:
            words = self.dev.view(torch.int64)
            if not bool((words[: self.full_bytes // 8] != words[self.full_bytes // 8 :]).any()):
                return 0
            self.download()
        full, expected = self._host_regions(0), self._host_regions(self.full_bytes)
        return sum(int(np.count_nonzero(full[s] != expected[s])) for s in full)


    def inputs(self, k: int) -> dict[str, np.ndarray]:
        """Case ``k``'s inputs as the expected half holds them (what :meth:`case` copies out, as
        views of the buffer: read them only; an input the launch changes holds what it must
        end up holding)."""
        if getattr(self, "_expected", None) is None:  # made where it is asked for: never pickled
            self._expected = self._host_regions(self.full_bytes)
        expected = self._expected
        return {n: expected[s][o : o + math.prod(shape)].view(dtype).reshape(shape) for n, dtype, shape, s, o in self._inputs[k]}

    def _arrays(self, storage: torch.dtype) -> list[tuple[int, int, int, str, torch.dtype]]:
        """The arrays in ``storage``'s region, in order: ``(offset, elements, case, name, dtype)``."""
        out = []
        for dt, _, _, sizes, keys in self._groups:
            if _storage(dt) != storage:
                continue
            at = 0
            for (k, n, _), gap, size in zip(keys, sizes[0::2], sizes[1::2], strict=True):
                out.append((at + gap, size, k, n, dt))
                at += gap + size
        return sorted(out)

    def array(self, k: int, n: str, expected: bool = False) -> np.ndarray:
        """Case ``k``'s array ``n`` as the launched half holds it on the host (flat, in its
        dtype; after :meth:`download`: as the launches left it), or as the expected half does."""
        if getattr(self, "_where", None) is None:  # made where it is asked for: never pickled
            self._where = {(kk, nn): (s, o, size, dt) for s in self._regions for o, size, kk, nn, dt in self._arrays(s)}
        s, o, size, dt = self._where[k, n]
        v = self._host_regions(self.full_bytes if expected else 0)[s][o : o + size]
        return v.view(np.bool_) if dt == torch.bool else v.view(_NUMPY_OF[dt])

    def differing(self) -> dict[tuple[int, str], np.ndarray]:
        """Per array ``(case, name)``, its elements the launched half (on the host: after
        :meth:`download`) holds not as expected, as indices from its first element (negative:
        in the guard band before it; its size or more: after it). An element of the guard band
        between two arrays is named for both (a write past the end of one, or before the start
        of the next)."""
        out: dict[tuple[int, str], list[np.ndarray]] = {}
        full, expected = self._host_regions(0), self._host_regions(self.full_bytes)
        for s in full:
            bad = np.flatnonzero(full[s] != expected[s])
            if not bad.size:
                continue
            arrays = self._arrays(s)
            starts = np.array([a[0] for a in arrays])
            ends = starts + np.array([a[1] for a in arrays])
            at = np.searchsorted(starts, bad, side="right") - 1  # the last array starting at or before
            inside = (at >= 0) & (bad < ends[np.maximum(at, 0)])
            for i in np.unique(np.concatenate([at[at >= 0], at[~inside] + 1])).tolist():
                if i < len(arrays):
                    mine = (at == i) | ((at == i - 1) & ~inside)
                    out.setdefault((arrays[i][2], arrays[i][3]), []).append(bad[mine] - starts[i])
        return {key: np.concatenate(v) for key, v in out.items()}


_ITEMSIZE = {torch.int32: 4, torch.int64: 8, torch.uint8: 1}


class _Staging:
    """The launching process's pinned host buffer that a host batch is copied through (one
    asynchronous copy to the GPU; the next batch waits for it before reusing the buffer)."""

    buf: torch.Tensor | None = None
    done: torch.cuda.Event | None = None


def _staged_copy(host: np.ndarray, device: str) -> torch.Tensor:
    """``host`` (bytes) on ``device``, copied through :class:`_Staging`'s pinned buffer."""
    n = host.nbytes
    if _Staging.done is not None:
        _Staging.done.synchronize()
    if _Staging.buf is None or _Staging.buf.numel() < n:
        _Staging.buf = torch.empty(max(n, 2 * (0 if _Staging.buf is None else _Staging.buf.numel()), 1 << 20),
                                   dtype=torch.uint8, pin_memory=True)
    staged = _Staging.buf[:n]
    staged.numpy()[:] = host
    out = torch.empty(n, dtype=torch.uint8, device=device)
    out.copy_(staged, non_blocking=True)
    _Staging.done = torch.cuda.Event()
    _Staging.done.record(torch.cuda.current_stream(out.device))
    return out
