"""One generator body for both drivers: a :class:`Chooser` draws from NumPy or from Hypothesis.

A target's generators (its folder's ``cases.py`` and ``edges.py``) are written once against this
interface and run as a bulk NumPy generator (:class:`RngChooser`) and as a Hypothesis strategy
(:class:`DrawChooser`, :func:`as_strategy`). Each method of :class:`DrawChooser` is one
Hypothesis strategy (the method says which), so a body draws what a strategy written with
those strategies would, and shrinks as it would: toward the first option, the low end of a
range, fewer of an optional, the plain branch of a chance. :class:`RngChooser` draws each
choice uniformly (a mixture of ranges: a range, then a value in it), the tail of a chance with
its probability.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..core.case import Case
from .strategies import Scale, Shape, draw_shape, random_shape

T = TypeVar("T")
Ranges = Sequence[tuple[int, int]]
"""Inclusive integer ranges ``(lo, hi)``: a mixture, as ``st.one_of`` of ``st.integers``."""


class Chooser(Protocol):
    def integer(self, lo: int, hi: int) -> int:
        """An int in ``[lo, hi]`` (``st.integers(lo, hi)``)."""

    def integer_of(self, ranges: Ranges) -> int:
        """An int from one of ``ranges`` (``st.one_of`` of their ``st.integers``)."""

    def boolean(self) -> bool:
        """True or False (``st.booleans()``, shrinks to False)."""

    def chance(self, p: float) -> bool:
        """True with probability about ``p`` (shrinks to False)."""

    def choice(self, options: Sequence[T]) -> T:
        """One of ``options`` (``st.sampled_from``, shrinks to the first)."""

    def array(self, dtype: Any, n: int, lo: int, hi: int) -> np.ndarray:
        """``n`` values of ``dtype`` in ``[lo, hi]`` (``hnp.arrays`` of ``st.integers``)."""

    def array_of(self, dtype: Any, n: int, ranges: Ranges) -> np.ndarray:
        """``n`` values of ``dtype``, each from one of ``ranges``."""

    def repeat(self, n: int, body: Callable[[Chooser], T]) -> list[T]:
        """``n`` results of ``body`` (``st.lists`` of its strategy: shrinking drops one with all
        of its draws)."""

    def optional(self, body: Callable[[Chooser], T]) -> T | None:
        """``None`` or a result of ``body`` (``st.none() | ...``, shrinks to ``None``)."""

    def shape(self, shapes: Sequence[Shape], scale: Scale) -> Case | None:
        """Now and then a case of one of the shapes of a target's tour, else ``None``."""


EDGE_ODDS = 16
""":class:`RngChooser` gives an end of a range one time in this many (an element of an array:
half as often), as Hypothesis favours the boundaries: a bulk run meets the limits too."""


class RngChooser:
    """Draws with a NumPy generator (bulk mode)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        if hi > lo and self.rng.integers(0, EDGE_ODDS) == 0:
            return hi if self.rng.integers(0, 2) else lo
        return int(self.rng.integers(lo, hi, endpoint=True))

    def integer_of(self, ranges: Ranges) -> int:
        return self.integer(*ranges[int(self.rng.integers(0, len(ranges)))])

    def boolean(self) -> bool:
        return bool(self.rng.integers(0, 2))

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, options: Sequence[T]) -> T:
        return options[int(self.rng.integers(0, len(options)))]

    def array(self, dtype: Any, n: int, lo: int, hi: int) -> np.ndarray:
        return self.array_of(dtype, n, [(lo, hi)])

    def array_of(self, dtype: Any, n: int, ranges: Ranges) -> np.ndarray:
        which = self.rng.integers(0, len(ranges), size=n)
        edge = self.rng.integers(0, 2 * EDGE_ODDS, size=n) == 0
        high = self.rng.integers(0, 2, size=n).astype(bool)
        out = np.empty(n, dtype=np.int64)
        for k, (lo, hi) in enumerate(ranges):
            hit = which == k
            out[hit] = self.rng.integers(lo, hi, size=int(hit.sum()), endpoint=True, dtype=np.int64)
            out[hit & edge] = np.where(high[hit & edge], hi, lo)
        return out.astype(dtype)

    def repeat(self, n: int, body: Callable[[Chooser], T]) -> list[T]:
        return [body(self) for _ in range(n)]

    def optional(self, body: Callable[[Chooser], T]) -> T | None:
        return None if self.boolean() else body(self)

    def shape(self, shapes: Sequence[Shape], scale: Scale) -> Case | None:
        return random_shape(self.rng, shapes, scale)


class DrawChooser:
    """Draws with Hypothesis (the strategy's ``draw``)."""

    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def integer_of(self, ranges: Ranges) -> int:
        return self.draw(_mixture(ranges))

    def boolean(self) -> bool:
        return self.draw(st.booleans())

    def chance(self, p: float) -> bool:
        return self.draw(st.integers(0, 99)) >= round(100 * (1 - p))

    def choice(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(list(options)))

    def array(self, dtype: Any, n: int, lo: int, hi: int) -> np.ndarray:
        elements = st.integers(lo, hi)
        return self.draw(hnp.arrays(np.dtype(dtype), n, elements=elements, fill=elements))

    def array_of(self, dtype: Any, n: int, ranges: Ranges) -> np.ndarray:
        elements = _mixture(ranges)
        return self.draw(hnp.arrays(np.dtype(dtype), n, elements=elements, fill=elements))

    def repeat(self, n: int, body: Callable[[Chooser], T]) -> list[T]:
        return self.draw(st.lists(as_strategy(body), min_size=n, max_size=n))

    def optional(self, body: Callable[[Chooser], T]) -> T | None:
        return self.draw(st.none() | as_strategy(body))

    def shape(self, shapes: Sequence[Shape], scale: Scale) -> Case | None:
        return self.draw(draw_shape(shapes, scale))


def _mixture(ranges: Ranges) -> st.SearchStrategy[int]:
    parts = [st.integers(lo, hi) for lo, hi in ranges]
    return parts[0] if len(parts) == 1 else st.one_of(*parts)


def as_strategy(body: Callable[..., T], *args: Any) -> st.SearchStrategy[T]:
    """The Hypothesis strategy that runs ``body(chooser, *args)``."""

    @st.composite
    def draws(draw: st.DrawFn) -> T:
        return body(DrawChooser(draw), *args)

    return draws()
