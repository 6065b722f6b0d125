"""The production tier of ``_post_update_num_computed_tokens_kernel`` (docs/CONTRACT.md §20.2):
a pooling model's step, in-contract by construction, one body for both drivers."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import MAX_MODEL_LEN, lengths, state_count, state_rows
from .layout import build


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` scheduled rows of distinct state rows (of ``max_num_reqs`` up to ``B + 40``),
    decodes, chunks and whole prompts, every count and its chunk inside ``max_model_len``
    (a few thousand, or 131072)."""
    B = c.integer_of(request_count_ranges(scale))
    R = state_count(c, B)
    rows = state_rows(c, B, R)
    qlens = lengths(c, B, [(1, 1), (1, 16), (1, min(scale.max_query_len, 2048))])
    M = c.choice([4096, MAX_MODEL_LEN])
    counts = np.asarray(c.array(np.int64, R, 0, M - 1))
    room = M - np.asarray(qlens, dtype=np.int64)
    counts[rows] = np.minimum(counts[rows], np.maximum(room, 0))
    return build(rows, qlens, counts)
