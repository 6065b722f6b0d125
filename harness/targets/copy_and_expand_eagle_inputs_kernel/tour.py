"""The tour of ``copy_and_expand_eagle_inputs_kernel``'s production extremes (docs/CONTRACT.md §1.2):
cheap-but-large shapes, cheapest first, that every default run checks.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    FLOAT32_EXACT,
    INT16_MAX,
    INT32_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    Scale,
    Shape,
)
from .layout import MAX_MODEL_LEN, build, positions_from_starts


def _shape_case(
    rng: np.random.Generator,
    lengths: list[int],
    rejected: list[int],
    *,
    shift: bool,
    P: int,
    p0: np.ndarray,
) -> Case:
    """A case of the given request layout with random vocabulary ids (nearly all past 65535)
    and consecutive positions from ``p0``, launched as vLLM launches it."""
    T, R = int(sum(lengths)), len(lengths)
    return build(
        lengths,
        rejected,
        shift=shift,
        P=P,
        token_ids=rng.integers(0, INT32_MAX, size=T, endpoint=True, dtype=np.int32),
        positions=positions_from_starts(p0.astype(np.int64), lengths),
        next_ids=rng.integers(0, INT32_MAX, size=R, endpoint=True, dtype=np.int32),
        padding_id=0,
        parallel_id=int(rng.integers(0, 1 << 18)),
        launch={"block_size_tokens": None, "num_blocks": None},
    )


def _wide(rng: np.random.Generator, scale: Scale) -> Case:
    """num_speculative_tokens of 15-32 with parallel drafting (P = K): a few requests of 17-48
    tokens, one with 16+ rejected tokens, positions in the tens of millions."""
    R = int(rng.integers(2, 7))
    lengths = rng.integers(17, 49, size=R).tolist()
    rejected = [int(rng.integers(0, n)) for n in lengths]
    many = int(rng.integers(0, R))
    rejected[many] = int(rng.integers(16, lengths[many]))
    p0 = rng.integers(FLOAT32_EXACT, MAX_MODEL_LEN - 100, size=R)
    return _shape_case(rng, lengths, rejected, shift=bool(rng.integers(0, 2)), P=int(rng.integers(SPEC_TOKENS, 33)), p0=p0)


def _long_prefill(rng: np.random.Generator, scale: Scale) -> Case:
    """A prefill of 2050-6000 tokens beside a few short requests, positions up to
    ``max_model_len`` (2**31)."""
    R = int(rng.integers(1, 4))
    lengths = rng.integers(1, 64, size=R).tolist()
    lengths[int(rng.integers(0, R))] = int(rng.integers(2050, 6001))
    rejected = [int(rng.integers(0, min(n, 8))) for n in lengths]
    shift = bool(rng.integers(0, 2))
    p0 = MAX_MODEL_LEN - 6100 - rng.integers(0, 8192, size=R)
    return _shape_case(rng, lengths, rejected, shift=shift, P=int(rng.integers(2 if shift else 1, 5)), p0=p0)


def _huge_offsets(rng: np.random.Generator, scale: Scale) -> Case:
    """32k+ tokens in one block per request: 130-180 requests of up to 256 slots, the last
    ones starting past token 32767."""
    shift = bool(rng.integers(0, 2))
    P = int(rng.integers(2 if shift else 1, 5))
    top = 256 - P + int(shift)
    lengths: list[int] = []
    while sum(lengths) <= INT16_MAX + 2 * top:
        lengths.append(int(rng.integers(top // 2, top + 1)))
    rejected = [int(rng.integers(0, min(n, 16))) for n in lengths]
    return _shape_case(rng, lengths, rejected, shift=shift, P=P, p0=rng.integers(0, 1 << 20, size=len(lengths)))


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1100 requests of 1-2 tokens with P = 32-40 (r * P past 32767)."""
    R = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 77))
    lengths = rng.integers(1, 3, size=R).tolist()
    rejected = [int(rng.integers(0, n)) for n in lengths]
    P = int(rng.integers(32, 41))
    p0 = rng.integers(0, 1 << 24, size=R)
    return _shape_case(rng, lengths, rejected, shift=bool(rng.integers(0, 2)), P=P, p0=p0)


SHAPES = (
    Shape("wide", 8, _wide),
    Shape("long_prefill", 72, _long_prefill),
    Shape("huge_offsets", 180, _huge_offsets),
    Shape("many_requests", MAX_NUM_SEQS + 76, _many_requests),
)
