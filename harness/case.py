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
    if arr.size == 0:
        return f"np.zeros({arr.shape!r}, dtype=np.{arr.dtype.name})"
    return f"np.array({arr.tolist()!r}, dtype=np.{arr.dtype.name})"


def _dict_source(d: Mapping[str, Scalar]) -> str:
    return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in d.items()) + "}"
