"""The tour of ``target_dependent_ar_prepare_prefill_inputs_kernel``'s production extremes
(docs/CONTRACT.md §25.2): few programs, long rows and wide padding."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import Scale, Shape
from ...targetkit.runner_v2 import BLOCK
from .layout import Row, build


def _shape(rng: np.random.Generator, B: int, R: int, long_row: bool) -> Case:
    s = rng.permutation(R)[:B]
    rows = []
    for b, x in enumerate(s):
        nl = int(rng.integers(1, 5))
        qlen = int(rng.integers(BLOCK + 2, 4 * BLOCK)) if long_row and b == 0 else nl
        r = int(rng.integers(0, nl))
        rows.append(Row(int(x), qlen, int(rng.integers(0, 100000)), nl - r, r) if b or not long_row or rng.random() < 0.5
                    else Row(int(x), qlen, int(rng.integers(0, 100000)), 0, 0))
    T = sum(r.qlen for r in rows)
    return build(rows, rng.integers(0, 32000, size=T), rng.integers(0, 32000, size=R),
                 rng.integers(0, 32000, size=(1, R)), R)


def _long_query(rng: np.random.Generator, scale: Scale) -> Case:
    """A row of 1026-4096 tokens (a last prefill chunk and its logit, or a chunk still
    prefilling: its shifted copy spans blocks) among up to 7 decoding rows."""
    B = int(rng.integers(1, 9))
    return _shape(rng, B, B + int(rng.integers(0, 8)), True)


def _wide_padding(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs of 2048 and more, a small batch: the last program pads more than 1024
    query starts, lengths and indices."""
    B = int(rng.integers(1, 9))
    return _shape(rng, B, B + int(rng.integers(BLOCK + 1, 3 * BLOCK)), False)


SHAPES = (
    Shape("long_query", 8, _long_query),
    Shape("wide_padding", 8, _wide_padding),
)
