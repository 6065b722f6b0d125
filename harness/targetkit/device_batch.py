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
own (:class:`~.device._Big`): one comparison per buffer checks every element of every case,
guard bands, inputs and shared tables included, after the ``K`` launches.

A batch with a difference says nothing about which case made it: the engine then checks its
cases one at a time (:class:`~.device.Arenas`, the same oracle on each case alone) and confirms
the failing ones with the NumPy and Numba oracles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .device import _SENTINEL, GUARD, DeviceCase, HostArenas, _Big, _bits, _storage


@dataclass
class DeviceBatch:
    """``K`` cases drawn together.

    ``cat``: each small input, the cases' arrays concatenated (flat, on the device);
    ``lengths``: its element count per case; ``shapes``: its shape per case (a 2-D input);
    ``shared``: the large inputs (on the device), case ``k`` reading the first
    ``rows[name][k]`` rows; ``outputs``: each output's dtype and per-case element counts;
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

    def __len__(self) -> int:
        return len(self.scalars)

    def starts(self, name: str) -> list[int]:
        """Where each case's segment of the concatenated input ``name`` starts."""
        return np.concatenate([[0], np.cumsum(self.lengths[name])]).tolist()

    def tokens(self, k: int) -> int:
        """Output elements case ``k``'s check verifies."""
        return sum(sizes[k] for _, sizes in self.outputs.values())

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


class BatchArenas:
    """Every case of ``batch`` in guarded buffers, pre-filled for ``writes`` (each output's flat
    indices in the concatenation of the cases' outputs); :attr:`views` per case."""

    def __init__(self, batch: DeviceBatch, writes: dict[str, tuple[torch.Tensor, torch.Tensor]], device: str,
                 bigs: dict[str, _Big] | None = None) -> None:
        """``bigs``: guarded buffers of shared inputs from an earlier batch that left them
        intact, used again where they hold the same tensor."""
        K = len(batch)
        bigs = bigs or {}
        self.big = {n: bigs[n] if n in bigs and bigs[n].tensor is t else _Big(t, device) for n, t in batch.shared.items()}
        dtypes = {n: t.dtype for n, t in batch.cat.items()} | {n: dt for n, (dt, _) in batch.outputs.items()}
        sizes = {n: batch.lengths[n] for n in batch.cat} | {n: s for n, (_, s) in batch.outputs.items()}
        # per storage dtype, each name's arrays case after case, each after a guard band and
        # padded to 16 bytes (so that every array starts 16-byte aligned, as _layout's do)
        self.offset: dict[str, np.ndarray] = {}
        cursor: dict[torch.dtype, int] = {}
        for n, dt in dtypes.items():
            st = _storage(dt)
            u = max(1, 16 // torch.empty(0, dtype=st).element_size())
            sz = np.asarray(sizes[n], dtype=np.int64)
            span = GUARD + -(-sz // u) * u
            self.offset[n] = cursor.get(st, 0) + GUARD + np.cumsum(span) - span
            cursor[st] = int(self.offset[n][-1] + span[-1] - GUARD)
        self.full = {s: torch.full((size + GUARD,), _SENTINEL[s], dtype=s, device=device) for s, size in cursor.items()}
        # each array's concatenated coordinate -> its place in its buffer: a shift per case
        self.shift: dict[str, torch.Tensor] = {}
        self.bounds: dict[str, torch.Tensor] = {}
        for n in dtypes:
            start = np.concatenate([[0], np.cumsum(sizes[n])])
            self.bounds[n] = torch.from_numpy(start[1:-1].astype(np.int64)).to(device)
            self.shift[n] = torch.from_numpy(self.offset[n] - start[:-1]).to(device)
        for n, t in batch.cat.items():
            buf = self.full[_storage(dtypes[n])]
            buf[self._place(n, torch.arange(t.numel(), device=device))] = _bits(t.reshape(-1), dtypes[n]) if dtypes[n] != torch.bool else t.reshape(-1).to(torch.uint8)
        placed = {}
        for n, (index, value) in writes.items():
            s, dt = _storage(dtypes[n]), dtypes[n]
            placed[n] = self._place(n, index)
            if dt != torch.bool:
                self.full[s][placed[n]] = _bits(value, dt) ^ 1
        self.expected = {s: b.clone() for s, b in self.full.items()}
        for n, (_, value) in writes.items():
            dt = dtypes[n]
            self.expected[_storage(dt)][placed[n]] = value.to(torch.uint8) if dt == torch.bool else _bits(value, dt)
        per_name = {}
        for n, dt in dtypes.items():  # every case's view of n at once (torch.split: one call)
            o, sz = self.offset[n], np.asarray(sizes[n], dtype=np.int64)
            base = self.full[_storage(dt)][int(o[0]) : int(o[-1] + sz[-1])]
            base = base.view(dt) if dt != _storage(dt) else base
            gaps = np.concatenate([[0], o[1:] - o[:-1] - sz[:-1]])
            two_d = n in batch.shapes and len(batch.shapes[n][0]) > 1  # [n, 1]
            per_name[n] = torch.split_with_sizes(base.view(-1, 1) if two_d else base, np.stack([gaps, sz], 1).reshape(-1).tolist())[1::2]
        shared = {n: b.view.view(batch.shared[n].shape) for n, b in self.big.items()}
        self.views: list[dict[str, torch.Tensor]] = [
            {n: v[k] for n, v in per_name.items()} | {n: t[: batch.rows[n][k]] for n, t in shared.items()} for k in range(K)]

    def _place(self, name: str, index: torch.Tensor) -> torch.Tensor:
        """Buffer positions of ``name``'s elements at concatenated coordinates ``index``."""
        k = torch.searchsorted(self.bounds[name], index, right=True)
        return index + self.shift[name][k]

    def mismatch(self) -> torch.Tensor:
        """A device scalar: the number of elements, over every buffer, that are not as expected."""
        return (sum((self.full[s] != self.expected[s]).sum() for s in self.full)
                + sum(b.mismatch() for b in self.big.values()))


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
    """``K`` cases of a target checked on the host (:class:`~.device.HostArenas`) in one set
    of buffers: every array of every case between guard bands in one buffer per storage dtype,
    pre-filled as :class:`~.device.HostArenas` pre-fills a case's (sentinels; written elements
    their expected value with the lowest bit flipped). One copy to the device per dtype, the
    ``K`` launches, one copy back and one comparison of every element (guard bands, inputs)
    check all ``K`` cases. ``cases[k]`` keeps case ``k`` (its inputs as drawn) for a report;
    ``features[k]`` its coverage features where the maker of the batch gave them."""

    def __init__(self, cases: list[DeviceCase], writes: list[dict[str, tuple[np.ndarray, np.ndarray]]]) -> None:
        self.cases = cases
        self.features: list[frozenset[str]] = []
        merged = DeviceCase({f"{k}/{n}": a for k, dc in enumerate(cases) for n, a in dc.inputs.items()},
                            {f"{k}/{n}": o for k, dc in enumerate(cases) for n, o in dc.outputs.items()}, {})
        self.arenas = HostArenas(merged, {f"{k}/{n}": w for k, ws in enumerate(writes) for n, w in ws.items()})

    def __len__(self) -> int:
        return len(self.cases)

    def upload(self, device: str) -> list[dict[str, torch.Tensor]]:
        """The buffers on ``device`` (one copy per dtype) and each case's views of its arrays
        (made with one split per buffer, not a slice per array)."""
        a = self.arenas
        a.on_device = {s: torch.from_numpy(b).to(device, non_blocking=True) for s, b in a.full.items()}
        views: dict[str, torch.Tensor] = {}
        for s, buf in a.on_device.items():
            names = sorted((n for n, dt in a.dtypes.items() if _storage(dt) == s), key=a.offset.__getitem__)
            if not names:
                continue
            ends = [a.offset[n] + a.sizes[n] for n in names]
            gaps = [a.offset[names[0]]] + [a.offset[n] - e for n, e in zip(names[1:], ends[:-1], strict=True)]
            sizes = [x for g, n in zip(gaps, names, strict=True) for x in (g, a.sizes[n])]
            pieces = torch.split_with_sizes(buf[: ends[-1]], sizes)[1::2]
            for n, v in zip(names, pieces, strict=True):
                dt = a.dtypes[n]
                v = v.view(dt) if dt != s else v
                views[n] = v.view(a.shapes[n]) if n in a.shapes else v
        return [{n: views[f"{k}/{n}"] for n in (*dc.inputs, *dc.outputs)} for k, dc in enumerate(self.cases)]

    def download(self) -> None:
        """The buffers as the launches left them, back on the host (waits for the device)."""
        self.arenas.download()

    def mismatch(self) -> int:
        """The number of elements, over every buffer of every case, that are not as expected."""
        return self.arenas.mismatch()
