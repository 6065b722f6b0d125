"""The production tier of ``_gather_block_tables_kernel`` (docs/CONTRACT.md §21.2): every step's
gather of the batch's block-table rows, one to three KV-cache groups (full attention, sliding
windows), the rows past the batch zeroed for CUDA graphs."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import state_count, state_rows
from .layout import build


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows of ``max_num_reqs``, up to 3 groups of block size 1 to 64 and tables of up to
    64 blocks a row, sliding windows now and then (``MASK_SLIDING_WINDOW`` with a reach per
    window group), grid rows up to ``max_num_reqs``."""
    B = c.integer_of(request_count_ranges(scale))
    R = state_count(c, B)
    rows = state_rows(c, B, R)
    G = c.integer(1, 3)
    sizes = [c.choice([16, 1, 4, 32, 64]) for _ in range(G)]
    widths = [c.integer(1, c.choice([4, 64])) for _ in range(G)]
    tables = [c.array(np.int64, R * w, 0, 1 << 20).reshape(R, w) for w in widths]
    nb = np.stack([c.array(np.int64, R, 0, w) for w in widths])
    mask = c.chance(0.5)
    reach = [c.choice([0, c.integer(1, 2000)]) if mask else 0 for _ in range(G)]
    counts = c.array(np.int64, R, 0, 4096) if mask else c.array(np.int64, R, 0, 100)
    return build(rows, tables, nb, counts, reach, sizes, c.integer(B, R), mask)
