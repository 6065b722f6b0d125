"""Batches of Model Runner V2 steps drawn on the device: the pieces a step kernel's device
module (``device.py``) draws ``K`` production cases with at once, and the class it derives from.

A step kernel's case is a batch of ``B`` rows (requests) over ``R >= B`` state rows; ``K``
cases concatenated are :class:`Rows`: each case's rows after the previous case's, each row
knowing its case and where its case's state rows and ``cu`` entries start, so that a batched
torch oracle (:mod:`eaglefuzz.oracles.tensor_steps_v2`) reads every case in one call. The
sizes (``B``, ``R``, modes per case) are drawn on the host with NumPy, the per-row values on
the device with a seeded ``torch.Generator``: the same seeds give the same batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...oracles.host_copy import host_to
from ..core.case import Case
from .device import DeviceCase, DeviceTarget
from .device_batch import DeviceBatch

MAX_REQUESTS = 1024
"""Rows of a step on a GPU: up to 1024 (vLLM's default ``max_num_seqs``), a tail to 4096."""


@dataclass
class Rows:
    """``K`` cases' rows, concatenated: per case ``B`` rows over ``R`` state rows (host arrays);
    per row (device tensors) its case ``cid``, its index in its case ``local``, and where its
    case's state arrays (``state_base``) and ``cu`` entries (``cu_at``: the row's own entry in
    the concatenated ``[B + 1]`` arrays) start."""

    B: np.ndarray
    R: np.ndarray
    cid: torch.Tensor
    local: torch.Tensor
    state_base: torch.Tensor
    cu_at: torch.Tensor

    @property
    def n(self) -> int:
        """Rows in all."""
        return int(self.B.sum())

    def per_row(self, values: np.ndarray) -> torch.Tensor:
        """A per-case host value, for each row (on the rows' device)."""
        return host_to(np.asarray(values), self.cid.device)[self.cid]


def draw_drafts(rng: np.random.Generator, k: int, least: int = 1) -> np.ndarray:
    """Each of ``k`` cases' ``K`` (``num_speculative_tokens``): ``least`` to 4 or to 16 at even
    odds, and 16 one case in 8 (the production extreme of 16 drafts, which a rare end of a
    range would leave to chance)."""
    K = np.where(rng.random(k) < 0.5, rng.integers(least, 5, size=k), rng.integers(least, 17, size=k))
    return np.where(rng.random(k) < 1 / 8, 16, K)


def rows_of(lengths: dict[str, list[int]], row_array: str, state_array: str | None, device: str) -> Rows:
    """The :class:`Rows` of a batch whose cases have ``lengths[row_array]`` rows and
    ``lengths[state_array]`` state rows (``None``: as many as rows)."""
    B = np.asarray(lengths[row_array], dtype=np.int64)
    return _rows(B, B if state_array is None else np.asarray(lengths[state_array], dtype=np.int64), device)


def _rows(B: np.ndarray, R: np.ndarray, device: str) -> Rows:
    k = len(B)
    Bt = host_to(B, device)
    cid = torch.repeat_interleave(torch.arange(k, device=device), Bt, output_size=int(B.sum()))
    first = host_to(np.cumsum(B) - B, device)
    local = torch.arange(int(B.sum()), device=device) - first[cid]
    state_base = host_to(np.cumsum(R) - R, device)[cid]
    return Rows(B, R, cid, local, state_base, torch.arange(int(B.sum()), device=device) + cid)


def draw_rows(rng: np.random.Generator, k: int, device: str, max_requests: int = MAX_REQUESTS) -> Rows:
    """``k`` cases' row counts, as the records' generators draw a step's (``B`` of a few, up to
    ``max_requests``, or up to four times that; ``R`` the rows, a few more, or up to 40 more:
    a deployment's ``max_num_seqs`` above the batch's) and their places."""
    ranges = np.array([(1, 8), (1, max_requests), (1, 4 * max_requests)])
    lo, hi = ranges[rng.integers(0, 3, size=k)].T
    B = rng.integers(lo, hi, endpoint=True)
    more = np.array([0, 4, 40])[rng.integers(0, 3, size=k)]
    R = B + rng.integers(0, more, endpoint=True)
    return _rows(B.astype(np.int64), R.astype(np.int64), device)


def state_rows(rows: Rows, gen: torch.Generator) -> torch.Tensor:
    """Each row's state row within its case (int64): per case, the first ``B`` of a random
    permutation of its ``R`` state rows (distinct)."""
    device = rows.cid.device
    R = host_to(rows.R, device)
    owner = torch.repeat_interleave(torch.arange(len(rows.R), device=device), R, output_size=int(rows.R.sum()))
    keys = owner.double() + torch.rand(owner.numel(), generator=gen, device=device, dtype=torch.float64)
    order = torch.argsort(keys)  # each case's state rows together, shuffled
    base = host_to(np.cumsum(rows.R) - rows.R, device)
    return order[base[rows.cid] + rows.local] - rows.state_base


def uniform(gen: torch.Generator, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """Per element an integer in ``[lo, hi]`` (int64 tensors, ``lo <= hi``)."""
    u = torch.rand(lo.shape, generator=gen, device=lo.device, dtype=torch.float64)
    return torch.minimum(lo + (u * (hi - lo + 1).double()).long(), hi)


def chosen(gen: torch.Generator, lo: torch.Tensor, hi: torch.Tensor, ends: float = 1 / 16) -> torch.Tensor:
    """:func:`uniform`, with an end of the range (either, at even odds) ``ends`` of the time:
    as the records' generators choose in bulk mode (``choosers.RngChooser``), so that a
    device batch meets the limits as often."""
    u = torch.rand((2, *lo.shape), generator=gen, device=lo.device)
    return torch.where(u[0] < ends, torch.where(u[1] < 0.5, lo, hi), uniform(gen, lo, hi))


def cumulative(rows: Rows, counts: torch.Tensor) -> torch.Tensor:
    """The cases' ``[B + 1]`` cumulative arrays of per-row ``counts``, concatenated (int32):
    each case's from 0."""
    total = torch.cumsum(counts.long(), 0)
    base = total - counts.long()
    first = host_to(np.cumsum(rows.B) - rows.B, counts.device)
    starts = base[first.clamp(max=max(rows.n - 1, 0))] if rows.n else base
    out = torch.zeros(rows.n + len(rows.B), dtype=torch.int64, device=counts.device)
    out[rows.cu_at + 1] = total - starts[rows.cid]
    return out.to(torch.int32)


def scheduled_counts(rng: np.random.Generator, gen: torch.Generator, rows: Rows,
                     queries: tuple[tuple[int, int], ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A step's queries and computed-token counts, as the records of §15 and §20 draw them: per
    case a range of query lengths of ``queries`` and a model of 4096 or 131072 tokens; per row
    its query (an end one time in 32); every state row's count below the model's length, a
    scheduled row's leaving room for its query. Returns each row's query length and state row,
    and the counts (int64, every case's state rows concatenated)."""
    from .runner_v2 import MAX_MODEL_LEN

    k = len(rows.B)
    lo, hi = np.asarray(queries)[rng.integers(0, len(queries), size=k)].T
    M = host_to(np.where(rng.random(k) < 0.5, 4096, MAX_MODEL_LEN), rows.cid.device)
    qlen = chosen(gen, rows.per_row(lo), rows.per_row(hi), ends=1 / 32)
    owner = owners(rows.R, rows.cid.device.type)
    counts = chosen(gen, torch.zeros_like(owner), M[owner] - 1, ends=1 / 32)
    s = state_rows(rows, gen)
    at = rows.state_base + s
    counts[at] = torch.minimum(counts[at], (M[rows.cid] - qlen).clamp(min=0))
    return qlen, s, counts


def feature_sets(on: dict[str, np.ndarray], k: int) -> list[frozenset[str]]:
    """Each of ``k`` cases' features: those whose per-case flag in ``on`` is set."""
    return [frozenset(f for f, v in on.items() if v[j]) for j in range(k)]


def owners(counts: np.ndarray, device: str) -> torch.Tensor:
    """For cases of ``counts`` elements each (a host array), each element's case."""
    return torch.repeat_interleave(torch.arange(len(counts), device=device), host_to(counts, device),
                                   output_size=int(np.sum(counts)))


def per_case_sum(rows: Rows, values: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Per case, the sum of each value over its rows (int64; one copy to the host for all)."""
    if not values:
        return {}
    stacked = torch.stack([v.to(torch.int64) for v in values.values()], 1)
    sums = torch.zeros((len(rows.B), stacked.shape[1]), dtype=torch.int64, device=stacked.device)
    sums.index_add_(0, rows.cid, stacked)
    host = sums.cpu().numpy()
    return {n: host[:, j] for j, n in enumerate(values)}


def segment_counts(flags: torch.Tensor, sizes: np.ndarray) -> torch.Tensor:
    """Per row of ``flags`` (``[m, N]``, bool) and per segment of its elements (consecutive,
    ``sizes`` elements each, a host array), how many are set (``[m, segments]``, int32): one
    running count over the rows laid end to end, read at each segment's end. No per-element
    segment index and no atomics (``index_add_`` into a few hundred cases serialises on them),
    and one flat scan (a scan along the inner axis of a few long rows runs one block a row on a
    GPU: 86 ms for a dflash batch's on an H200). The running count is int32 (half the memory);
    a difference of two stays exact modulo ``2**32``, and a segment holds far fewer elements."""
    m, n = flags.shape
    dev = flags.device
    flat = torch.cumsum(flags.reshape(-1), 0, dtype=torch.int32)
    ends = np.cumsum(np.asarray(sizes, dtype=np.int64))
    rows = torch.arange(m, device=dev)[:, None] * n
    at = rows + host_to(ends - 1, dev)
    before = torch.where(rows > 0, flat[(rows - 1).clamp(min=0)], 0)  # each row's count before it
    count = torch.where(at >= rows, flat[at.clamp(min=0)], before)  # an empty first segment: the row's start
    return torch.diff(count, dim=1, prepend=before)


def segments_any(flags: torch.Tensor, sizes: np.ndarray) -> np.ndarray:
    """Per segment of the flat bool ``flags`` (consecutive, ``sizes`` elements each, a host
    array), whether any of its elements is set (:func:`segment_counts`, one copy to the host)."""
    if not flags.numel():
        return np.zeros(len(sizes), dtype=bool)
    return segment_counts(flags.reshape(1, -1), sizes)[0].cpu().numpy() != 0


def per_case_any(rows: Rows, flags: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Per case, whether any of its rows has each flag (one copy to the host for all)."""
    return {n: v > 0 for n, v in per_case_sum(rows, flags).items()}


class StepBatchDevice(DeviceTarget):
    """A Model Runner V2 step kernel drawn and checked on the device in batches
    (:meth:`draw_batch`, :meth:`oracle_batch` and :meth:`batch_features` of the target's
    ``device.py``), launched through its record's launch (as vLLM launches it). One case alone
    is a batch of one (:meth:`draw`, :meth:`oracle`)."""

    batch = 256
    """Cases per batch on a GPU."""
    @property
    def batch_decides(self) -> frozenset[str]:  # type: ignore[override]
        """Every feature of its record: a batch knows each of its steps whole."""
        return frozenset(self.record.features)

    kinds: tuple[str, ...] = ()
    """Kinds of batch a run draws now and then (a verification step's large vocabulary), which
    :meth:`draw_batch` also draws when asked (``kind=``): a test makes them happen."""
    oracle_name = "torch oracle (oracles/tensor_steps_v2.py)"

    def draw(self, rng: np.random.Generator, gen: Any, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        seeds = (int(rng.integers(0, 2**62)), int(rng.integers(0, 2**62)))
        return self.draw_batch(seeds, device, 1, max_requests).case(0)

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[Any, Any]]:
        return self.oracle_batch(DeviceBatch(
            dict(dc.inputs), {n: [t.numel()] for n, t in dc.inputs.items()}, {n: [tuple(t.shape)] for n, t in dc.inputs.items()},
            {}, {}, {n: (dt, [k]) for n, (dt, k) in dc.outputs.items()}, [dict(dc.scalars)]))

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        """Through the record's launch; an output of more than one axis (``dc.host["shapes"]``:
        the batch's buffers hold it flat) in its shape."""
        shapes = dc.host.get("shapes") if dc.host else None
        if shapes:
            views = dict(views) | {n: views[n].view(shape) for n, shape in shapes.items()}
        self.record.launch(impl, views, Case(kernel=self.name, arrays={}, scalars=dict(dc.scalars), launch={}))
