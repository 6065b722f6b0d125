"""Exact comparison of arrays: dtype, shape, then every element, guard bands included."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from .buffers import POISONS, raw

Locator = Callable[[str, int], tuple[int | None, str]]
"""Maps ``(array, index)`` to ``(request, region)``; indices are relative to the buffer start."""


@dataclass(frozen=True)
class Difference:
    """One element (or one property) where ``actual`` is not ``expected``.

    ``index`` is relative to the start of the array the kernel was given: negative in the
    guard band before it, ``>= len`` in the guard band past it; ``None`` for a dtype or shape
    difference. ``versus`` names what ``expected`` came from (an oracle). ``sentinel`` is the
    value the output buffer was pre-filled with (``None`` for an input or a function's
    result): an ``actual`` equal to it was never written, an ``expected`` equal to it must stay
    untouched.
    """

    array: str
    index: int | None
    expected: object
    actual: object
    request: int | None
    region: str
    versus: str
    sentinel: int | None = None
    floats: str | None = None
    """The dtype (``float32``, ``float64``) of a float array, whose elements are compared by
    their bits: ``expected`` and ``actual`` are then bit patterns (integers of the width), shown
    with the float each stands for."""

    def _shown(self, value: object) -> str:
        if self.floats is None or not isinstance(value, int) or isinstance(value, bool):
            return repr(value)
        dt = np.dtype(self.floats)
        bits = np.array([value], dtype=np.dtype(f"i{dt.itemsize}"))
        return f"{str(bits.view(dt)[0])} (bits {int(bits.view(np.dtype(f'u{dt.itemsize}'))[0]):#0{2 + 2 * dt.itemsize}x})"

    def _value(self, value: object, unset: str, *, actual: bool = False) -> str:
        if self.sentinel is not None and value == self.sentinel:
            if self.floats is not None and isinstance(value, int):  # the fill's bits, as a float array holds them
                size = np.dtype(self.floats).itemsize
                bits = int(np.array([value], dtype=np.dtype(f"i{size}")).view(np.dtype(f"u{size}"))[0])
                return f"{unset} (the sentinel fill, bits {bits:#0{2 + 2 * size}x})"
            return f"{unset} (sentinel {value!r})"
        if actual and self.sentinel is not None and value in POISONS:  # an output holding an input's guard fill
            return f"{self._shown(value)} (the poison of the inputs' guard bands: read outside an input)"
        return self._shown(value)

    def describe(self) -> str:
        where = self.array if self.index is None else f"{self.array}[{self.index}]"
        req = "" if self.request is None else f" request {self.request}"
        return (
            f"{where}{req} ({self.region}): expected {self._value(self.expected, 'untouched')}, "
            f"actual {self._value(self.actual, 'never written', actual=True)}  [vs {self.versus}]"
        )

    def to_json(self) -> dict[str, object]:
        """The difference as JSON fields (what :meth:`describe` says, for machines)."""
        def plain(v: object) -> object:
            return list(v) if isinstance(v, tuple) else v

        return {
            "array": self.array, "index": self.index, "request": self.request, "region": self.region,
            "expected": plain(self.expected), "actual": plain(self.actual), "expected_from": self.versus,
            "sentinel": self.sentinel,
            "never_written": self.sentinel is not None and self.actual == self.sentinel,
        }


def compare_arrays(
    name: str,
    expected: np.ndarray,
    actual: np.ndarray,
    *,
    locate: Locator,
    versus: str,
    guard: int = 0,
    sentinel: int | None = None,
    tolerance: np.ndarray | None = None,
) -> list[Difference]:
    """Every difference between two arrays, dtype and shape first.

    ``guard``: both arrays are flat and hold that many guard elements on each side; indices
    in the report are relative to the buffer between them. ``sentinel``: the value the buffer
    was pre-filled with (an output's), named in the differences. ``tolerance``: for a float
    array, the absolute bound of each element (flat, guards included; 0: bit for bit) within
    which ``actual`` may lie from ``expected`` (a float the contract fixes only within an error
    bound: docs/CONTRACT.md, "Model Runner V2's verification"); NaN and a sentinel are never
    within it.
    """
    if expected.dtype != actual.dtype:
        return [Difference(name, None, str(expected.dtype), str(actual.dtype), None, "dtype", versus)]
    if expected.shape != actual.shape:
        return [Difference(name, None, expected.shape, actual.shape, None, "shape", versus)]
    e, a = raw(expected).reshape(-1), raw(actual).reshape(-1)
    floats = expected.dtype.name if expected.dtype.kind == "f" else None
    differ = e != a
    if tolerance is not None and expected.dtype.kind == "f" and differ.any():
        close = within(expected.reshape(-1), actual.reshape(-1), np.asarray(tolerance).reshape(-1))
        if sentinel is not None:  # a never-written element is no value near the expected one
            close &= a != sentinel
        differ &= ~close
    out = []
    for flat in np.flatnonzero(differ).tolist():
        index = flat - guard
        request, region = locate(name, index)
        out.append(Difference(name, index, e[flat].item(), a[flat].item(), request, region, versus, sentinel, floats))
    return out


def within(expected: np.ndarray, actual: np.ndarray, tolerance: np.ndarray) -> np.ndarray:
    """Where float ``actual`` lies within ``tolerance`` (> 0) of ``expected``, both finite (an
    infinity or NaN must match bit for bit)."""
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        return (tolerance > 0) & np.isfinite(d) & (d <= tolerance)


def compare_all(
    expected: Mapping[str, np.ndarray],
    actual: Mapping[str, np.ndarray],
    *,
    locate: Locator,
    versus: str,
    guards: Mapping[str, int] | None = None,
    sentinels: Mapping[str, int] | None = None,
    tolerances: Mapping[str, np.ndarray] | None = None,
) -> list[Difference]:
    """Differences over every array of ``expected`` (an array missing from ``actual`` is one).

    ``guards``: per array, the guard elements on each side of the flat arrays (default none);
    ``sentinels``: per output, the value its buffer was pre-filled with; ``tolerances``: per
    float array, each element's bound (:func:`compare_arrays`).
    """
    out: list[Difference] = []
    for name, exp in expected.items():
        if name not in actual:
            out.append(Difference(name, None, "present", "missing", None, "array", versus))
            continue
        guard = (guards or {}).get(name, 0)
        out += compare_arrays(name, exp, actual[name], locate=locate, versus=versus, guard=guard,
                              sentinel=(sentinels or {}).get(name), tolerance=(tolerances or {}).get(name))
    return out

