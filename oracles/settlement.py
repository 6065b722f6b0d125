"""What an oracle of Model Runner V2's verification kernels (docs/CONTRACT.md §28-§35) says
besides the buffers it writes: the decisions it could not settle, and the error bounds of the
floats it wrote.

Those kernels decide with ``exp``, ``log`` and ``log1p`` (libdevice or ``ex2.approx`` compiled,
NumPy under the interpreter), a division that is not correctly rounded when compiled, and sums
in an order nothing fixes. The contract (docs/CONTRACT.md, "Model Runner V2's verification": "Exactness") bounds the error of every such
value; an oracle computes the value of the contract's formula (in float64, from the inputs as
stored) and the bound, and a decision whose margin is within its bound is a :class:`Window`:
the contract accepts either outcome there, as §11's division window does. Outside a window a
decision is exact. Data only: no arithmetic lives here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Settlement", "Window"]


@dataclass(frozen=True)
class Window:
    """One decision the contract leaves to the run.

    ``kind``: ``"argmax"`` (a Gumbel or plain block argmax whose leading candidates are closer
    than their bounds), ``"accept"`` (an acceptance test whose margin is within its bound),
    ``"ratio"`` (§34: whether a residual ratio is below 1). ``key``: where it is, e.g.
    ``("row", 3, "block", 0)`` or ``("req", 1, "step", 2)``. ``options``: the outcomes the
    contract accepts (token ids, or ``(False, True)``). ``chosen``: the one the oracle wrote (the
    nominal one, the sign of the margin, unless the caller chose).
    """

    kind: str
    key: tuple[Any, ...]
    options: tuple[Any, ...]
    chosen: Any
    margin: float = float("nan")
    bound: float = float("nan")


@dataclass
class Settlement:
    """An oracle's account of one call: the windows met (in the order met) and, per float output
    buffer, the absolute bound of each element against what the oracle wrote (0 where the
    contract fixes the element or nothing was written; ``inf`` where it leaves the element to
    the run)."""

    windows: list[Window] = field(default_factory=list)
    bounds: dict[str, np.ndarray] = field(default_factory=dict)

    def settled(self) -> bool:
        """Whether every decision was settled (no window met)."""
        return not self.windows
