"""A case: one complete, self-contained input of one kernel or function under test.

A case holds plain NumPy arrays and Python scalars, never tensors, so it can be printed,
pasted back into a test, stored in the corpus and run on any backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .lazy import zero_sparse

Scalar = int | bool | None


@dataclass(frozen=True, eq=False)
class Case:
    """Inputs of one run of ``kernel``.

    ``arrays``: every input array, with its dtype and shape.
    ``scalars``: every scalar argument, by the kernel's parameter name (without ``_ptr``).
    ``launch``: launch parameters; ``None`` means vLLM's own choice.
    ``note``: free text kept with the case (why it exists, what it found).
    """

    kernel: str
    arrays: Mapping[str, np.ndarray]
    scalars: Mapping[str, Scalar] = field(default_factory=dict)
    launch: Mapping[str, Scalar] = field(default_factory=dict)
    note: str = ""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Case):
            return NotImplemented
        return (
            self.kernel == other.kernel
            and dict(self.scalars) == dict(other.scalars)
            and dict(self.launch) == dict(other.launch)
            and self.arrays.keys() == other.arrays.keys()
            and all(
                a.dtype == other.arrays[k].dtype
                and np.array_equal(a, other.arrays[k], equal_nan=a.dtype.kind in "fc")  # NaN where nothing is read
                for k, a in self.arrays.items()
            )
        )

    __hash__ = None  # type: ignore[assignment]

    def replace(self, **changes: Any) -> Case:
        """A copy with ``arrays``/``scalars``/``launch`` entries updated (merged, not replaced)."""
        arrays = {**self.arrays, **changes.pop("arrays", {})}
        scalars = {**self.scalars, **changes.pop("scalars", {})}
        launch = {**self.launch, **changes.pop("launch", {})}
        note = changes.pop("note", self.note)
        if changes:
            raise TypeError(f"unknown Case fields: {sorted(changes)}")
        return Case(self.kernel, arrays, scalars, launch, note)

    def to_python(self) -> str:
        """Source text that rebuilds this case (``import numpy as np`` and ``Case`` in scope)."""
        lines = [f"Case(\n    kernel={self.kernel!r},\n    arrays={{"]
        for name, arr in self.arrays.items():
            lines.append(f"        {name!r}: {_array_source(arr)},")
        lines.append("    },")
        lines.append(f"    scalars={_dict_source(self.scalars)},")
        lines.append(f"    launch={_dict_source(self.launch)},")
        if self.note:
            lines.append(f"    note={self.note!r},")
        lines.append(")")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.to_python()


NUMPY_NAMES = frozenset({"array", "zeros", "full", "empty", "arange", "tile", "repeat", "concatenate", "nan", "inf",
                         "bool_", "uint8", "int32", "int64", "float32", "float64"})
"""The only NumPy names a case's source text uses: each is in NumPy 1.26 and 2.x alike (NumPy
2's ``np.bool`` is not in 1.26, so a bool array is written with ``np.bool_``)."""


def _dtype_source(dtype: np.dtype) -> str:
    return "np.bool_" if dtype == np.bool_ else f"np.{dtype.name}"


def _value_source(v: Any) -> str:
    """A value of ``ndarray.tolist()`` as source text: a non-finite float as ``np.nan``,
    ``np.inf`` or ``-np.inf`` (``repr`` would write ``nan``, a name no reproducer has)."""
    if isinstance(v, list):
        return "[" + ", ".join(_value_source(x) for x in v) + "]"
    if isinstance(v, float) and not np.isfinite(v):
        return "np.nan" if np.isnan(v) else ("np.inf" if v > 0 else "-np.inf")
    return repr(v)


def _array_source(arr: np.ndarray) -> str:
    """Source text that rebuilds ``arr`` exactly (dtype and shape; a NaN's payload aside); a
    long array that is constant, a range, a repeated pattern (rows alike), or a few runs or
    ranges is written as such (reproducers of large findings stay readable). It uses only
    :data:`NUMPY_NAMES` of NumPy."""
    dt = _dtype_source(arr.dtype)
    if arr.size == 0:
        return f"np.zeros({arr.shape!r}, dtype={dt})"
    if arr.size >= LARGE:
        src = _large_source(arr, dt)
        if src is None and arr.size > OBJECT_MAX:  # never a literal of billions of elements
            src = _large_source(arr, dt, max_entries=UNPRINTABLE) or _unprintable(arr, dt)
        if src is not None:
            return src
    if arr.size >= COMPACT_FROM:
        flat = arr.reshape(-1)
        body = _compact_1d(flat, dt)
        if body is not None:
            src = body if arr.ndim == 1 else f"{body}.reshape({arr.shape!r})"
            if _rebuilds(src, arr):
                return src
        src = _large_source(arr, dt, max_entries=min(SPARSE_MAX, max(1, arr.size // 16)))  # mostly one value: sparse()
        if src is not None:
            return src
    return f"np.array({_value_source(arr.tolist())}, dtype={dt})"


COMPACT_FROM = 16
"""Arrays of at least this many elements are written compactly when they can be."""

LARGE = 1 << 20
"""Arrays of at least this many elements (a production-scale table: up to billions) are
written without a Python object per element: as ``np.zeros`` or ``np.full`` of their shape,
or, when few elements differ from the most common value, as :func:`sparse`."""

OBJECT_MAX = 1 << 24
"""Past this many elements an array is never looked at element by element (ranges, runs)."""

SPARSE_MAX = 4096
"""The most elements :func:`sparse` lists (more: the array is written out, as any other)."""


def sparse(shape: tuple[int, ...], fill: object, dtype: type, index: list[int], values: list[object]) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` full of ``fill`` except at the flat (row-major)
    ``index``, which hold ``values``: how a reproducer writes a large array that is mostly
    one value (``from eaglefuzz.harness.case import sparse``)."""
    out = np.full(shape, fill, dtype=dtype)
    out.reshape(-1)[np.asarray(index, dtype=np.int64)] = np.asarray(values, dtype=dtype)
    return out


def _bit_view(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8) if a.dtype == np.bool_ else a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _scalar_source(x: np.generic) -> str:
    """A scalar that NumPy rebuilds bit for bit from this text (floats by ``repr``, NaN and
    infinities through ``float()``)."""
    v = x.item()
    if isinstance(v, float) and not np.isfinite(v):
        return f"float({str(v)!r})"
    return repr(v)


UNPRINTABLE = 1 << 20
"""The most entries :func:`sparse` lists for an array past :data:`OBJECT_MAX` elements; past
that the reproducer says the array cannot be printed (replay the saved case instead)."""


def _unprintable(arr: np.ndarray, dt: str) -> str:
    """An expression that fails saying why: an array of billions of elements, most of them
    different (a scale case not minimised), is not written out."""
    why = (f"this {arr.shape} array has too many distinct elements to print "
           "(replay the saved case: eaglefuzz replay FILE)")
    return f"np.empty({arr.shape!r}, dtype={dt}) if False else (_ for _ in ()).throw(ValueError({why!r}))"


def _large_source(arr: np.ndarray, dt: str, max_entries: int = SPARSE_MAX) -> str | None:
    """An array of at least :data:`LARGE` elements as ``np.zeros``, ``np.full`` or
    :func:`sparse`, found without a Python object per element; ``None`` when it is none of them."""
    flat = arr.reshape(-1)
    bits = _bit_view(flat)
    probe = np.unique(bits[:: max(1, flat.size // 4096)], return_counts=True)
    fill_bits = probe[0][int(np.argmax(probe[1]))]
    lazy = zero_sparse(arr) if fill_bits == 0 else None  # a table of zeros with a few live rows
    where = np.flatnonzero(bits != fill_bits) if lazy is None else lazy[0]
    if where.size == flat.size:
        return None
    fill = flat[int(np.argmax(bits == fill_bits)) if lazy is None else lazy[1]]
    fill_src = _scalar_source(fill)
    exact = _bit_view(np.array([fill.item()], dtype=arr.dtype))[0] == fill_bits
    shape = arr.shape if arr.ndim > 1 else arr.size
    if exact and where.size == 0:
        return f"np.zeros({shape!r}, dtype={dt})" if fill_bits == 0 else f"np.full({shape!r}, {fill_src}, dtype={dt})"
    if exact and where.size <= max_entries:
        texts = [_scalar_source(x) for x in flat[where]]
        back = np.array([eval(t) for t in texts], dtype=arr.dtype)  # noqa: S307 - our own text
        if not np.array_equal(_bit_view(back), bits[where]):  # a NaN payload: no short text for it
            return None
        vals = ", ".join(texts)
        return f"sparse({arr.shape!r}, {fill_src}, {dt}, {where.tolist()!r}, [{vals}])"
    return None

TAIL_MAX = 4
"""The longest tail after a range written as ``np.concatenate([np.arange(...), np.array(tail)])``."""

PERIOD_MAX = 64
"""The longest repeated pattern written as ``np.tile`` (a request's tokens, a table's row)."""


def _rebuilds(src: str, arr: np.ndarray) -> bool:
    """Whether ``src`` evaluates to ``arr`` exactly (a compact form never changes a value)."""
    try:
        got = eval(src, {"np": np})  # noqa: S307 - our own text, built above
    except Exception:  # noqa: BLE001 - e.g. a range whose end lies past the dtype's limits
        return False
    return isinstance(got, np.ndarray) and got.dtype == arr.dtype and got.shape == arr.shape and _identical(got, arr)


def _alike(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element by element, whether ``a`` and ``b`` (same dtype and shape) hold the same value:
    floats bit for bit (``-0.0`` is not ``0.0``), any NaN alike (source text does not keep a
    NaN's payload)."""
    if a.dtype.kind != "f":
        return np.asarray(a == b)
    u = np.dtype(f"u{a.dtype.itemsize}")
    return (a.view(u) == b.view(u)) | (np.isnan(a) & np.isnan(b))


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` hold the same values (:func:`_alike`)."""
    return bool(np.all(_alike(a, b)))


def _range(start: int, n: int, step: int, dt: str) -> str:
    if step == 1:
        return f"np.arange({start}, {start + n}, dtype={dt})"
    return f"np.arange({start}, {start + n * step}, {step}, dtype={dt})"


def _compact_1d(a: np.ndarray, dt: str) -> str | None:
    """``a`` as ``np.full``, ``np.arange`` (any step), ``np.tile`` of a short pattern,
    ``np.repeat`` of runs or a concatenation of ranges, when that is much shorter than the
    list of its values; else ``None``."""
    n = len(a)
    if a.dtype == np.bool_ or a.dtype.kind not in "iu":
        if _identical(a, np.full_like(a, a[0])):
            return f"np.full({n}, {_value_source(a[0].item())}, dtype={dt})"
        tiled = _tiled(a, dt)
        if tiled is not None:
            return tiled
        runs = [0, *(np.flatnonzero(~_alike(a[1:], a[:-1])) + 1).tolist()]
        if len(runs) * 4 <= n:  # a table of zeros with a few entries: runs of values
            counts = [b - a_ for a_, b in zip(runs, runs[1:] + [n], strict=True)]
            return f"np.repeat(np.array({_value_source([a[i].item() for i in runs])}, dtype={dt}), {_counts_source(counts)})"
        return None
    w = a.astype(object)  # exact Python ints: no wrap-around while comparing
    if all(v == w[0] for v in w):
        return f"np.full({n}, {int(w[0])}, dtype={dt})"
    step = int(w[1] - w[0])
    if all(w[i] - w[i - 1] == step for i in range(2, n)):
        return _range(int(w[0]), n, step, dt)
    tiled = _tiled(a, dt)
    if tiled is not None:
        return tiled
    starts = [0] + [i for i in range(1, n) if w[i] != w[i - 1] + 1]
    runs = [0] + [i for i in range(1, n) if w[i] != w[i - 1]]
    if len(runs) * 4 <= n and len(runs) <= len(starts):
        vals = np.asarray([int(w[i]) for i in runs], dtype=a.dtype)
        counts = [b - a_ for a_, b in zip(runs, runs[1:] + [n], strict=True)]
        body = (_compact_1d(vals, dt) if len(vals) >= COMPACT_FROM else None) or f"np.array({vals.tolist()!r}, dtype={dt})"
        return f"np.repeat({body}, {_counts_source(counts)})"
    if len(starts) * 4 <= n:
        pieces = [_range(int(w[i]), j - i, 1, dt) for i, j in zip(starts, starts[1:] + [n], strict=True)]
        return f"np.concatenate([{', '.join(pieces)}])"
    k = next((i for i in range(2, n) if w[i] - w[i - 1] != step), n)  # a range, then a short tail
    if n - k <= TAIL_MAX and k >= 4 * (n - k):
        return f"np.concatenate([{_range(int(w[0]), k, step, dt)}, np.array({[int(x) for x in w[k:]]!r}, dtype={dt})])"
    return None


def _tiled(a: np.ndarray, dt: str) -> str | None:
    """``a`` as ``np.tile`` of its shortest repeating pattern (at most :data:`PERIOD_MAX`
    long, repeated at least twice), or as ``np.resize`` of it where the last repetition is cut
    short (requests of 17 rows, then one of 2), the pattern itself written compactly when it
    can be."""
    n = len(a)
    for p in range(1, min(PERIOD_MAX, n // 2) + 1):
        if _identical(a[p:], a[:-p]):
            part = a[:p]
            body = (_compact_1d(part, dt) if p >= COMPACT_FROM else None) or f"np.array({_value_source(part.tolist())}, dtype={dt})"
            return f"np.tile({body}, {n // p})" if n % p == 0 else f"np.resize({body}, {n})"
    return None


def _counts_source(counts: list[int]) -> str:
    """``np.repeat``'s counts: a list, or compactly where that is much shorter (a step's
    hundreds of requests of 17 rows)."""
    if len(counts) >= COMPACT_FROM:
        body = _compact_1d(np.asarray(counts, dtype=np.int64), "np.int64")
        if body is not None:
            return body
    return repr(counts)


def _dict_source(d: Mapping[str, Scalar]) -> str:
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in d.items()) + "}"
