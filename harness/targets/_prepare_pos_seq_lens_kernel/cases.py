"""The production tier of ``_prepare_pos_seq_lens_kernel`` (docs/CONTRACT.md §15.2): every step's
batch (decodes, drafts, prefill chunks) over a state of ``max_num_reqs`` rows."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import MAX_MODEL_LEN, lengths, state_count, state_rows
from .layout import build


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows of distinct state rows, decodes, drafts and chunks of up to 2048 tokens, every
    count and chunk inside ``max_model_len`` (4096 or 131072)."""
    B = c.integer_of(request_count_ranges(scale))
    R = state_count(c, B)
    rows = state_rows(c, B, R)
    qlens = lengths(c, B, [(1, 1), (1, 17), (1, min(scale.max_query_len, 2048))])
    M = c.choice([4096, MAX_MODEL_LEN])
    counts = np.asarray(c.array(np.int64, R, 0, M - 1))
    counts[rows] = np.minimum(counts[rows], np.maximum(M - np.asarray(qlens), 0))
    return build(rows, qlens, counts)
