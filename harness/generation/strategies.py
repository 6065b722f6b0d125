"""Composable Hypothesis strategies for ragged EAGLE batches and their launch parameters.

Every strategy generates in-contract values by construction (draw request lengths, then take
the cumulative sum; never filter), shrinks toward small, plain batches, and is parameterised
by a :class:`Scale` so the same strategies serve the Triton interpreter (small grids) and a
compiled GPU run (large batches).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..core.determinism import pin_generation

pin_generation()  # every draw of eaglefuzz goes through this module's strategies

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
POWERS_OF_TWO = tuple(2**k for k in range(9))  # 1 .. 256

# Production extremes (vLLM's ranges): what a default run must reach on every target.
MAX_NUM_SEQS = 1024
"""``max_num_seqs`` of a large deployment: batches of more requests are drawn (1025 and up)."""
INT16_MAX = 2**15 - 1
"""Token offsets past it come with ``max_num_batched_tokens`` of 32k and more."""
SPEC_TOKENS = 15
"""``num_speculative_tokens`` of 15 and more: rows of 16+ columns, 16+ rejected slots."""
ID16_MAX = 2**16 - 1
"""Token ids past it come with vocabularies of 256k ids (Gemma, Llama 4, ...)."""
FLOAT32_EXACT = 2**24
"""Positions and lengths past it (long-context ``max_model_len``) are not exact in float32."""


@dataclass(frozen=True)
class Scale:
    """Size limits of generated batches.

    ``max_requests``: the usual upper bound of the request count; ``request_tail``: a rare,
    larger bound (a tail to a few hundred requests); ``max_query_len``: longest request
    (more than two 256-token blocks by default); ``max_programs``: the largest grid a launch
    may have, which keeps interpreter runs affordable (a grid is never cut below what covers
    the batch with vLLM's own launch).
    """

    max_requests: int = 64
    request_tail: int = 300
    max_query_len: int = 600
    max_programs: int = 512


INTERPRETER_SCALE = Scale()
CUDA_SCALE = Scale(max_requests=64, request_tail=1024, max_query_len=1100, max_programs=1 << 20)


def int32s() -> st.SearchStrategy[int]:
    """Any int32, boundaries (0, ±1, the limits) favoured as Hypothesis does."""
    return st.integers(INT32_MIN, INT32_MAX)


INT64_NEAR_LIMITS = ((0, 1 << 20), (INT64_MIN, INT64_MAX), (INT64_MAX - 4096, INT64_MAX), (INT64_MIN, INT64_MIN + 4096))
"""int64 values: small ones, any, and ones within a few thousand of either limit (ranges of a
mixture, :func:`int64s_near_limits`)."""


def int64s_near_limits() -> st.SearchStrategy[int]:
    """int64 values: small ones, any, and ones within a few thousand of either limit."""
    return st.one_of(*(st.integers(lo, hi) for lo, hi in INT64_NEAR_LIMITS))


def int_arrays(dtype: type, size: int, elements: st.SearchStrategy[int]) -> st.SearchStrategy[np.ndarray]:
    """1-D arrays of ``dtype`` and ``size`` drawn from ``elements`` (sparse draws over a fill)."""
    return hnp.arrays(np.dtype(dtype), size, elements=elements, fill=elements)


def request_count_ranges(scale: Scale) -> tuple[tuple[int, int], ...]:
    """Request counts: a few, ``1 .. scale.max_requests``, or up to ``scale.request_tail``
    (ranges of a mixture, :func:`request_counts`)."""
    return ((1, 8), (1, scale.max_requests), (1, scale.request_tail))


def request_counts(scale: Scale) -> st.SearchStrategy[int]:
    """Request counts: mostly ``1 .. scale.max_requests``, sometimes up to ``scale.request_tail``."""
    return st.one_of(*(st.integers(lo, hi) for lo, hi in request_count_ranges(scale)))


@st.composite
def query_lengths(draw: st.DrawFn, num_requests: int, scale: Scale, min_len: int = 1) -> list[int]:
    """``num_requests`` request lengths, each at least ``min_len``.

    A batch first draws its longest allowed length from a few regimes (short decodes, a
    block's worth, several blocks) so that shrinking heads to short requests.
    """
    cap = draw(st.sampled_from(sorted({4, 16, 64, scale.max_query_len})))
    cap = max(cap, min_len)
    return draw(st.lists(st.integers(min_len, cap), min_size=num_requests, max_size=num_requests))


def query_start_loc_from(lengths: list[int]) -> np.ndarray:
    """``[0, l0, l0+l1, ...]`` as int32: the cumulative sum that vLLM's metadata holds."""
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


@dataclass(frozen=True)
class Shape:
    """A cheap-but-large batch shape that reaches production extremes.

    Under the interpreter a case costs its program instances, not its values: ``programs`` is
    about how many one case of this shape launches (for a Python function, 1), ``build(rng,
    scale)`` draws an in-contract case of the shape with NumPy. A target's shapes, cheapest
    first, make the tour of every default run (:meth:`~..targetkit.base.Target.extreme_cases`);
    its bulk generator and strategy draw them now and then too (:func:`draw_shape`).
    """

    name: str
    programs: int
    build: Callable[[np.random.Generator, Scale], Any]

    def case(self, rng: np.random.Generator, scale: Scale) -> Any:
        """A case of this shape (:attr:`build`), its note naming the shape (:func:`is_tour_case`)."""
        case = self.build(rng, scale)
        return case.replace(note=f"{TOUR_NOTE}{self.name}" + (f": {case.note}" if case.note else ""))


TOUR_NOTE = "tour shape "
"""How the note of a case built from a tour's shape (:meth:`Shape.case`) begins."""


def is_tour_case(case: Any) -> bool:
    """Whether ``case`` was built from a shape of a tour (:meth:`Shape.case`), not drawn by the
    target's generator body: a run counts the ordinary features only from the body's cases, so
    that one the tour alone reaches never reads as covered."""
    return str(getattr(case, "note", "")).startswith(TOUR_NOTE)


def affordable(shapes: Sequence[Shape], scale: Scale) -> list[Shape]:
    """The shapes whose launches fit ``scale.max_programs`` (all of them on a GPU)."""
    return [s for s in shapes if s.programs <= scale.max_programs]


SHAPE_ODDS = 32
"""A Hypothesis example is an extreme shape with odds ``len(shapes) : SHAPE_ODDS``."""


@st.composite
def draw_shape(draw: st.DrawFn, shapes: Sequence[Shape], scale: Scale) -> Any:
    """``None`` most of the time (draw an ordinary case); now and then a case of one of the
    affordable ``shapes``, built from a drawn seed. Shrinks toward ``None``: the target's own
    shrink moves, not Hypothesis, make an extreme case small."""
    fit = affordable(shapes, scale)
    k = draw(st.integers(0, SHAPE_ODDS - 1))
    if k < SHAPE_ODDS - len(fit):
        return None
    shape = fit[SHAPE_ODDS - 1 - k]
    return shape.case(np.random.default_rng(draw(st.integers(0, 2**32 - 1))), scale)


TOUR_SHARE = 0.1
"""The share of a bulk generator's cases that are one of its target's tour shapes
(:func:`random_shape`); the device modules draw their tours' shapes as often."""


def random_shape(rng: np.random.Generator, shapes: Sequence[Shape], scale: Scale, p: float = TOUR_SHARE) -> Any:
    """For bulk generators: with probability ``p`` a case of one of ``shapes`` (any cost), else ``None``."""
    if not shapes or rng.random() >= p:
        return None
    return shapes[int(rng.integers(0, len(shapes)))].case(rng, scale)


def split_total(rng: np.random.Generator, total: int, parts: int, low: int = 1) -> list[int]:
    """``parts`` random lengths, each at least ``low``, that add up to ``total``."""
    if parts * low > total:
        raise ValueError(f"cannot split {total} into {parts} parts of at least {low}")
    cuts = np.sort(rng.integers(0, total - parts * low + 1, size=parts - 1))
    return (np.diff(np.concatenate([[0], cuts, [total - parts * low]])) + low).astype(int).tolist()


def derive_seed(base: int, *key: object) -> int:
    """A seed for one test item, chunk or example: stable across runs, machines and Python's
    hash randomisation (a CRC of the base seed and the key)."""
    return zlib.crc32(":".join(map(str, (base, *key))).encode())


def next_power_of_2(n: int) -> int:
    """Smallest power of two ``>= n`` (1 for ``n <= 1``), as ``triton.next_power_of_2``."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative ints."""
    return -(-a // b)
