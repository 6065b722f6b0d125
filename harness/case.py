"""A case: one complete, self-contained input of one kernel or function under test.

A case holds plain NumPy arrays and Python scalars, never tensors, so it can be printed,
pasted back into a test, stored in the corpus and run on any backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
                a.dtype == other.arrays[k].dtype and np.array_equal(a, other.arrays[k])
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


def _array_source(arr: np.ndarray) -> str:
    """Source text that rebuilds ``arr`` exactly (dtype and shape); a long array that is
    constant, a range, or a few runs or ranges is written as such (reproducers of large
    findings stay readable)."""
    dt = f"np.{arr.dtype.name}"
    if arr.size == 0:
        return f"np.zeros({arr.shape!r}, dtype={dt})"
    if arr.size >= COMPACT_FROM:
        flat = arr.reshape(-1)
        body = _compact_1d(flat, dt)
        if body is not None:
            return body if arr.ndim == 1 else f"{body}.reshape({arr.shape!r})"
    return f"np.array({arr.tolist()!r}, dtype={dt})"


COMPACT_FROM = 16
"""Arrays of at least this many elements are written compactly when they can be."""


def _compact_1d(a: np.ndarray, dt: str) -> str | None:
    """``a`` as ``np.full``, ``np.arange``, ``np.repeat`` of runs or a concatenation of ranges,
    when that is much shorter than the list of its values; else ``None``."""
    n = len(a)
    if a.dtype == np.bool_ or a.dtype.kind not in "iu":
        values = a.tolist()
        if all(v == values[0] for v in values):
            return f"np.full({n}, {values[0]!r}, dtype={dt})"
        return None
    w = a.astype(object)  # exact Python ints: no wrap-around while comparing
    if all(v == w[0] for v in w):
        return f"np.full({n}, {int(w[0])}, dtype={dt})"
    starts = [0] + [i for i in range(1, n) if w[i] != w[i - 1] + 1]
    if len(starts) == 1:
        return f"np.arange({int(w[0])}, {int(w[0]) + n}, dtype={dt})"
    runs = [0] + [i for i in range(1, n) if w[i] != w[i - 1]]
    if len(runs) * 4 <= n and len(runs) <= len(starts):
        vals = [int(w[i]) for i in runs]
        counts = [b - a_ for a_, b in zip(runs, runs[1:] + [n], strict=True)]
        return f"np.repeat(np.array({vals!r}, dtype={dt}), {counts!r})"
    if len(starts) * 4 <= n:
        pieces = [f"np.arange({int(w[i])}, {int(w[i]) + (j - i)}, dtype={dt})"
                  for i, j in zip(starts, starts[1:] + [n], strict=True)]
        return f"np.concatenate([{', '.join(pieces)}])"
    return None


def _dict_source(d: Mapping[str, Scalar]) -> str:
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in d.items()) + "}"
