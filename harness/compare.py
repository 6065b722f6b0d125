"""Exact comparison of arrays: dtype, shape, then every element, guard bands included."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from .buffers import GUARD, raw

Locator = Callable[[str, int], tuple[int | None, str]]
"""Maps ``(array, index)`` to ``(request, region)``; indices are relative to the buffer start."""


@dataclass(frozen=True)
class Difference:
    """One element (or one property) where ``actual`` is not ``expected``.

    ``index`` is relative to the start of the array the kernel was given: negative in the
    guard band before it, ``>= len`` in the guard band past it; ``None`` for a dtype or shape
    difference. ``versus`` names what ``expected`` came from (an oracle).
    """

    array: str
    index: int | None
    expected: object
    actual: object
    request: int | None
    region: str
    versus: str

    def describe(self) -> str:
        where = self.array if self.index is None else f"{self.array}[{self.index}]"
        req = "" if self.request is None else f" request {self.request}"
        return (
            f"{where}{req} ({self.region}): expected {self.expected!r}, "
            f"actual {self.actual!r}  [vs {self.versus}]"
        )


def compare_arrays(
    name: str,
    expected: np.ndarray,
    actual: np.ndarray,
    *,
    locate: Locator,
    versus: str,
    guarded: bool = True,
) -> list[Difference]:
    """Every difference between two arrays, dtype and shape first.

    With ``guarded``, both arrays are flat and include ``GUARD`` elements on each side.
    """
    if expected.dtype != actual.dtype:
        return [Difference(name, None, str(expected.dtype), str(actual.dtype), None, "dtype", versus)]
    if expected.shape != actual.shape:
        return [Difference(name, None, expected.shape, actual.shape, None, "shape", versus)]
    e, a = raw(expected).reshape(-1), raw(actual).reshape(-1)
    offset = GUARD if guarded else 0
    out = []
    for flat in np.flatnonzero(e != a).tolist():
        index = flat - offset
        request, region = locate(name, index)
        out.append(Difference(name, index, e[flat].item(), a[flat].item(), request, region, versus))
    return out


def compare_all(
    expected: Mapping[str, np.ndarray],
    actual: Mapping[str, np.ndarray],
    *,
    locate: Locator,
    versus: str,
    guarded: bool = True,
) -> list[Difference]:
    """Differences over every array of ``expected`` (an array missing from ``actual`` is one)."""
    out: list[Difference] = []
    for name, exp in expected.items():
        if name not in actual:
            out.append(Difference(name, None, "present", "missing", None, "array", versus))
            continue
        out += compare_arrays(name, exp, actual[name], locate=locate, versus=versus, guarded=guarded)
    return out
