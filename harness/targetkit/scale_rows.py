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
from .device import _POISON_BITS, GUARD, _storage, _wrap_guard

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
        for a, b in self.blocks():
            self.view[a:b].copy_(self.rows(a, b))

    def blocks(self) -> list[tuple[int, int]]:
        """The blocks of rows ``[a, b)`` of about :data:`ROW_BLOCK` elements."""
        rows, W = self.host.shape[0], max(1, int(np.prod(self.host.shape[1:])))
        step = max(1, ROW_BLOCK // W)
        return [(a, min(rows, a + step)) for a in range(0, rows, step)]

    def rows(self, a: int, b: int) -> torch.Tensor:
        """Rows ``[a, b)`` of the host array as given, on the device."""
        return torch.from_numpy(np.ascontiguousarray(self.host[a:b])).to(self.view.device)

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
    s = _storage(actual.dtype)
    exact = actual.view(s) != expected.to(actual.dtype).view(s) if s != actual.dtype else actual != expected
    near = (actual.to(torch.float64) - expected.to(torch.float64)).abs() <= bound
    return torch.where(bound > 0, ~near, exact).sum()


def confirm_rows(record: Any, case: Case, rows: list[int], actual: np.ndarray, array: str,
                 restrict: Callable[[Case, list[int]], Case]) -> Outcome:  # fmt: skip
    """The record's NumPy and Numba oracles on ``case``'s rows ``rows`` alone (``restrict``
    makes that case), against ``actual``: those rows of ``array`` as the device run left them.
    Returns the outcome (its differences located in ``case``'s rows; the oracles' disagreements
    too)."""
    small = restrict(case, rows)
    e = record.expectation(small)
    W = int(np.prod(case.arrays[array].shape[1:]))

    def locate(name: str, index: int) -> tuple[int | None, str]:
        r, v = divmod(index, W)
        return None, f"row {rows[r]}, column {v} (the rows checked by the NumPy and Numba oracles)"

    outcome = Outcome()
    outcome.oracle_disagreements += record._oracles_disagree(small, e, lambda n, i: locate(n, i))
    names = list(e.results)
    buf = e.results[names[0]][array]
    g = (buf.size - actual.size) // 2
    tol = e.tolerances.get(array)
    outcome.differences += compare_arrays(
        array, buf[g : buf.size - g], actual.reshape(-1), locate=locate, versus=" = ".join(names) + " oracle",
        tolerance=None if tol is None else tol[g : tol.size - g])
    return outcome


def guard_difference(array: str, count: int, at: int, poison: int) -> Difference:
    """The finding of ``count`` guard-band elements written, the first at ``at``."""
    region = "guard band before the buffer (an int32 offset that wrapped past 2**31)" if at < 0 else "guard band past the buffer"
    return Difference(array, at, f"untouched ({poison:#x})", f"written ({count} element(s) of the guard bands)",
                      None, region, "device guard bands")
