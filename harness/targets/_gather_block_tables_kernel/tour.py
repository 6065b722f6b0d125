"""The tour of ``_gather_block_tables_kernel``'s production extremes (docs/CONTRACT.md §21.2):
long contexts (rows of thousands of blocks), few programs."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import Scale, Shape
from ...targetkit.runner_v2 import BLOCK, MAX_MODEL_LEN
from .layout import build


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """A 131072-token context in blocks of 16 (8192 blocks a row): up to 3 rows of 1025 blocks
    and more (every 37th block id and the last one set), a sliding-window group beside the full
    one, a padding row or more."""
    B = int(rng.integers(1, 4))
    R = B + int(rng.integers(1, 3))
    rows = rng.permutation(R)[:B]
    W = MAX_MODEL_LEN // 16
    nb = np.stack([rng.integers(BLOCK + 1, W + 1, size=R), rng.integers(0, 65, size=R)])
    wide = np.zeros((R, W), dtype=np.int64)  # every 37th block id set, and each row's last (a compact reproducer)
    for r in range(R):
        at = np.append(np.arange(0, nb[0, r], 37), nb[0, r] - 1)
        wide[r, at] = rng.integers(1, 1 << 20, size=at.size)
    tables = [wide, rng.integers(1, 1 << 20, size=(R, 64))]
    counts = rng.integers(0, MAX_MODEL_LEN, size=R)
    return build(rows, tables, nb, counts, [0, int(rng.integers(1, 4096))], [16, 16], int(rng.integers(B + 1, R + 1)),
                 True)


SHAPES = (Shape("long_context", 10, _long_context),)
