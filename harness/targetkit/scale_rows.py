"""A production-scale case of a record-checked target, checked on the device a block of rows at a
time (docs/CONTRACT.md §28-§35: Model Runner V2's verification at ``2**31`` elements and more).

The record's own check (its NumPy and Numba oracles on host copies of every array, the guarded
buffers) cannot hold a table of 8 GiB and more on the host. Here the table goes to the device in
blocks of rows straight from the case's (sparse, lazily paged) host array, after a band of
poison as long as an int32 wrap can reach (:data:`~.device.WRAP_GUARD`): a row offset that wraps
reads and writes there, the same way on every run. After the launch each block of rows is
compared on the device with a torch oracle (:mod:`eaglefuzz.oracles.tensor_ops_v2`) of the same
block as given, every element, within the contract's bounds; the guard bands must hold their
poison. A difference is confirmed by the record's NumPy and Numba oracles on the rows that
matter alone (:func:`confirm_rows`: a row-restricted case, exact since each row's outputs depend
on that row alone), against the rows the device run left, so no host copy of the whole table is
ever made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..core.case import Case
from ..core.compare import Difference, compare_arrays
from .base import Outcome
from .device import _POISON_BITS, _SENTINEL, GUARD, _storage, _wrap_guard, bounded_mismatch
from .device_draws import lazy_full, upload

ROW_BLOCK = 1 << 26
"""Elements per block of rows uploaded and compared at once (256 MiB of float32)."""


class DeviceTable:
    """Host array ``host`` (``[rows, W]``) on ``device`` after a band of poison as long as an
    int32 wrap reaches (fewer elements when the table is smaller) and :data:`GUARD` elements after
    it; uploaded a block of rows at a time (the host array is never copied whole)."""

    def __init__(self, host: np.ndarray, device: str) -> None:
        self.host = host
        self.dtype = torch.from_numpy(host[:0]).dtype
        s = _storage(self.dtype)
        self.poison = _POISON_BITS[s]
        n = host.size
        self.before = min(n, _wrap_guard())
        self.full = torch.full((self.before + n + GUARD,), self.poison, dtype=s, device=device)
        mid = self.full[self.before : self.before + n]
        self.view = (mid.view(self.dtype) if s != self.dtype else mid).view(host.shape)
        upload(host, self.view)

    def blocks(self) -> list[tuple[int, int]]:
        """The blocks of rows ``[a, b)`` of about :data:`ROW_BLOCK` elements."""
        rows, W = self.host.shape[0], max(1, int(np.prod(self.host.shape[1:])))
        step = max(1, ROW_BLOCK // W)
        return [(a, min(rows, a + step)) for a in range(0, rows, step)]

    def rows(self, a: int, b: int) -> torch.Tensor:
        """Rows ``[a, b)`` of the host array as given, on the device (of a table of
        :func:`~.device_draws.lazy_full`, only its written elements cross)."""
        return upload(self.host[a:b], torch.empty((b - a, *self.host.shape[1:]), dtype=self.dtype, device=self.view.device))

    def changed(self) -> int:
        """Elements of the table (a read-only input) that no longer hold what was given."""
        count = 0
        for a, b in self.blocks():
            got, want = self.view[a:b], self.rows(a, b)
            s = _storage(got.dtype)
            count += int((got.view(s) != want.view(s)).sum()) if s != got.dtype else int((got != want).sum())
        return count

    def guard_writes(self) -> tuple[int, int | None]:
        """Elements of the guard bands that no longer hold their poison, and the first of them
        (its index relative to the table's first element: negative before it)."""
        n = self.host.size
        before = self.full[: self.before] != self.poison
        after = self.full[self.before + n :] != self.poison
        count = int(before.sum()) + int(after.sum())
        if not count:
            return 0, None
        first = torch.nonzero(before)
        at = int(first[0, 0]) - self.before if first.numel() else n + int(torch.nonzero(after)[0, 0])
        return count, at


def mismatches(actual: torch.Tensor, expected: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """A device scalar: elements of ``actual`` not within ``bound`` of ``expected`` (bit for
    bit where the bound is 0; NaN never within a bound)."""
    return bounded_mismatch(actual, expected, bound).sum()


def confirm_rows(record: Any, small: Case, rows: list[int], actual: dict[str, np.ndarray],
                 sentinels: dict[str, int] | None = None) -> Outcome:  # fmt: skip
    """The record's NumPy and Numba oracles on ``small`` (the rows ``rows`` of a production-scale
    case alone: each output row ``k`` of ``small`` is row ``rows[k]`` there), against ``actual``:
    those rows of each output as the device run left them (an element never written holding
    ``sentinels[name]``, read as the oracles' own fill). Returns the outcome (its differences
    located in the large case's rows; the oracles' disagreements too)."""
    e = record.expectation(small)

    def locator(name: str) -> Callable[[str, int], tuple[int | None, str]]:
        W = max(1, int(np.prod(actual[name].shape[1:]))) if name in actual else 1

        def locate(array: str, index: int) -> tuple[int | None, str]:
            r, v = divmod(index, W)
            row = rows[r] if 0 <= r < len(rows) else r
            return None, f"row {row}, column {v} (the rows checked by the NumPy and Numba oracles)"

        return locate

    outcome = Outcome()
    outcome.oracle_disagreements += record._oracles_disagree(small, e, locator(""))
    names = list(e.results)
    for name, got in actual.items():
        buf = e.results[names[0]][name]
        flat = np.array(got, copy=True).reshape(-1)
        if sentinels and name in sentinels and name in e.fills:
            bits = flat.view(np.dtype(f"i{flat.itemsize}"))
            bits[bits == np.array(sentinels[name]).astype(bits.dtype)] = np.array(e.fills[name]).astype(bits.dtype)
        g = (buf.size - flat.size) // 2
        tol = e.tolerances.get(name)
        outcome.differences += compare_arrays(
            name, buf[g : buf.size - g], flat, locate=locator(name), versus=" = ".join(names) + " oracle",
            sentinel=e.fills.get(name), tolerance=None if tol is None else tol[g : tol.size - g])
    return outcome


class DeviceOutput:
    """An output ``[rows, cols]`` of ``dtype`` on ``device`` between guard bands, every element
    the sentinel until the kernel writes it."""

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype, device: str) -> None:
        s = _storage(dtype)
        self.sentinel = int(_SENTINEL[s])
        n = int(np.prod(shape))
        self.full = torch.full((GUARD + n + GUARD,), self.sentinel, dtype=s, device=device)
        mid = self.full[GUARD : GUARD + n]
        self.view = (mid.view(dtype) if s != dtype else mid).view(shape)
        self.n = n

    def guard_writes(self) -> int:
        return int((self.full[:GUARD] != self.sentinel).sum()) + int((self.full[GUARD + self.n :] != self.sentinel).sum())

    def mismatches(self, lo: int, hi: int, written: torch.Tensor, expected: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
        """Rows ``[lo, hi)``: elements ``written`` not within ``bound`` of ``expected``, and
        elements not written that do not hold the sentinel (a device scalar)."""
        act = self.view[lo:hi]
        s = _storage(act.dtype)
        bits = act.view(s) if s != act.dtype else act
        wrong = torch.where(written, bounded_mismatch(act, expected, bound), bits != self.sentinel)
        return wrong.sum()


def guard_difference(array: str, count: int, at: int, poison: int) -> Difference:
    """The finding of ``count`` guard-band elements written, the first at ``at``."""
    region = "guard band before the buffer (an int32 offset that wrapped past 2**31)" if at < 0 else "guard band past the buffer"
    return Difference(array, at, f"untouched ({poison:#x})", f"written ({count} element(s) of the guard bands)",
                      None, region, "device guard bands")


LIVE_ROWS = 17
"""Logits rows of a scale step's live request (16 drafts and the bonus row: vLLM's most)."""


def scale_request_rows(rng: np.random.Generator, first: int) -> list[int]:
    """Logits rows per request (``d_r + 1``, 2 to 17) of a production-scale verification step
    whose row ``first`` is the first an int32 row offset cannot reach: requests of 16 drafts
    up to a few rows before it, then the *live* request of :data:`LIVE_ROWS` rows, 8 to 16 of
    them past it (the last request; ``max_num_seqs x (1 + K)`` rows, as vLLM's call sites make
    them)."""
    return [*_requests_of(max(0, first - 1 - int(rng.integers(0, 9)))), LIVE_ROWS]


def _requests_of(rows: int) -> list[int]:
    """``rows`` logits rows as requests of 17 rows and one of 2 to 17 (none of one row)."""
    q, rem = divmod(rows, LIVE_ROWS)
    counts = [LIVE_ROWS] * q + ([rem] if rem else [])
    if rem == 1:  # 17 + 1 = 9 + 9, or a lone row: 2
        counts[-2:] = [9, 9] if q else [2]
    return counts


def minimal_request_rows(first: int) -> list[int]:
    """Logits rows per request of the smallest step with a drafted row past the limit: requests
    of 17 rows up to row ``first``, then one of one draft (rows ``first`` and ``first + 1``)."""
    return [*_requests_of(first), 2]


def bonus_rows(elp: np.ndarray) -> np.ndarray:
    """Whether each logits row of a step's ``expanded_local_pos`` is its request's last."""
    elp = np.asarray(elp)
    out = np.ones(elp.size, dtype=bool)
    out[:-1] = elp[1:] == 0
    return out


STATE_ARRAYS = ("temperature", "seed", "draft_logits")
"""Arrays of a verification step with a row per state row (``max_num_reqs``)."""


def splice(live: Case, counts: list[int], fills: dict[str, float] | None = None) -> Case:
    """A production-scale verification step: requests of ``counts`` logits rows (greedy, state
    rows ``0 .. F-1``, temperature 0) before ``live``'s requests (a chain kernel's case of its
    own, drawn and settled as the record draws them; its state rows shifted by ``F``). The new
    rows' and states' arrays hold ``fills[name]`` (default 0: a table's rows are zeros, never
    written on the host: their pages stay the system's zero page), the per-request arrays
    ``fills`` too; ``cu_num_logits``, ``idx_mapping`` and §17's expansion are the step's."""
    from .runner_v2 import cumulative
    from .runner_v2_verify import REQUEST_ARRAYS, ROW_ARRAYS

    fills = fills or {}
    a = live.arrays
    F, nf = len(counts), int(sum(counts))
    out: dict[str, np.ndarray] = {}
    for name, arr in a.items():
        if name == "cu_num_logits":
            out[name] = cumulative([*counts, *np.diff(arr.astype(np.int64)).tolist()])
            continue
        if name == "expanded_local_pos":
            out[name] = np.concatenate([*(np.arange(c, dtype=arr.dtype) for c in counts), arr])
            continue
        if name == "expanded_idx_mapping":
            out[name] = np.concatenate([np.repeat(np.arange(F, dtype=arr.dtype), counts), arr + F])
            continue
        if name == "idx_mapping":
            out[name] = np.concatenate([np.arange(F, dtype=arr.dtype), arr + F])
            continue
        extra = nf if name in ROW_ARRAYS else F if name in (*REQUEST_ARRAYS, *STATE_ARRAYS) else None
        if extra is None:
            out[name] = arr
            continue
        big = lazy_full((extra + arr.shape[0], *arr.shape[1:]), arr.dtype, fills.get(name, 0))
        big[extra:] = arr
        out[name] = big
    return live.replace(arrays=out)


def join_steps(first: Case, then: Case) -> Case:
    """Two small cases of one chain kernel (the same vocabulary and ``K``) as one step: ``then``'s
    requests after ``first``'s, its state rows after ``first``'s (``temperature``'s length)."""
    from .runner_v2 import cumulative
    from .runner_v2_verify import REQUEST_ARRAYS, ROW_ARRAYS

    a, b = first.arrays, then.arrays
    R = len(a["temperature"])
    out: dict[str, np.ndarray] = {}
    for name, x in a.items():
        y = b[name]
        if name == "cu_num_logits":
            out[name] = cumulative([*np.diff(x.astype(np.int64)).tolist(), *np.diff(y.astype(np.int64)).tolist()])
        elif name in ("expanded_idx_mapping", "idx_mapping"):
            out[name] = np.concatenate([x, y + R])
        elif name in (*ROW_ARRAYS, *REQUEST_ARRAYS, *STATE_ARRAYS):
            out[name] = np.concatenate([x, y])
        else:
            out[name] = x
    return first.replace(arrays=out)
