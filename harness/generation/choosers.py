"""One generator body for both drivers: a :class:`Chooser` draws from NumPy or from Hypothesis.

The targets' generators (their folders' ``cases.py`` and ``edges.py``) are written once against this interface and
run as a bulk NumPy generator (:class:`RngChooser`) and as a Hypothesis strategy
(:class:`DrawChooser`, whose draws shrink toward the plain choice: no edge, small numbers,
the first option).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..core.case import Case

T = TypeVar("T")


class Chooser(Protocol):
    def integer(self, lo: int, hi: int) -> int:
        """An int in ``[lo, hi]``."""

    def chance(self, p: float) -> bool:
        """True with probability about ``p`` (shrinks to False)."""

    def choice(self, options: Sequence[T]) -> T:
        """One of ``options`` (shrinks to the first)."""

    def array(self, dtype: Any, n: int, lo: int, hi: int) -> np.ndarray:
        """``n`` values of ``dtype`` in ``[lo, hi]``."""


class RngChooser:
    """Draws with a NumPy generator (bulk mode)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi, endpoint=True))

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, options: Sequence[T]) -> T:
        return options[int(self.rng.integers(0, len(options)))]

    def array(self, dtype: Any, n: int, lo: int, hi: int) -> np.ndarray:
        return self.rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64).astype(dtype)


class DrawChooser:
    """Draws with Hypothesis (the strategy's ``draw``)."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def chance(self, p: float) -> bool:
        return self.draw(st.integers(0, 99)) >= round(100 * (1 - p))

    def choice(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(list(options)))

    def array(self, dtype: Any, n: int, lo: int, hi: int) -> np.ndarray:
        elements = st.integers(lo, hi)
        return self.draw(hnp.arrays(np.dtype(dtype), n, elements=elements, fill=elements))


def as_strategy(body: Callable[[Chooser, Any], Case], *args: Any) -> st.SearchStrategy[Case]:
    """The Hypothesis strategy that runs ``body(chooser, *args)``."""

    @st.composite
    def cases(draw: st.DrawFn) -> Case:
        return body(DrawChooser(draw), *args)

    return cases()
