"""The production tier of ``eagle_prepare_next_token_padded_kernel`` (docs/CONTRACT.md §3.2):
in-contract cases by construction, one body for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import (
    INT32_MAX,
    INT32_MIN,
    POWERS_OF_TWO,
    Scale,
    next_power_of_2,
    request_count_ranges,
)
from .layout import MAX_SAMPLED, build


def _row(c: Chooser, S: int, stride: int, vocab: int) -> np.ndarray:
    """One request's row: ``k`` sampled ids (some at or past the vocabulary), then ``-1`` up
    to ``S``, then junk up to the row stride (never read)."""
    k = c.integer(0, S)
    head = c.array_of(np.int64, k, [(0, vocab - 1), (vocab, vocab), (vocab, INT32_MAX)])
    junk = c.array(np.int64, stride - S, 0, vocab - 1)
    return np.concatenate([head, np.full(S - k, -1, dtype=np.int64), junk])


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §3.2): rows of up to 33 sampled columns,
    a row stride at or past ``S``, vocabularies from 1 id to the int32 limit, none, some or all
    requests discarded (and buffers longer than the batch), vLLM's block and grid or larger."""
    R = c.integer_of(request_count_ranges(scale))
    S = c.integer_of([(1, 8), (1, MAX_SAMPLED)])
    stride = S + c.integer_of([(0, 0), (1, 4)])
    vocab = c.integer(1, INT32_MAX) if c.boolean() else c.choice([32000, 128256, 1, 2])
    rows = np.stack(c.repeat(R, lambda c: _row(c, S, stride, vocab)))
    extra = c.integer_of([(0, 0), (1, 8)])
    mode = c.choice(["none", "some", "all"])
    if mode == "some":
        discard = c.array(np.int8, R + extra, 0, 1).astype(bool)
    else:
        discard = np.full(R + extra, mode == "all")
    backup = c.array(np.int32, R + extra, INT32_MIN, INT32_MAX)
    block = c.optional(lambda c: c.choice([b for b in POWERS_OF_TWO if b >= next_power_of_2(S)]))
    grid = c.optional(lambda c: c.integer(R + 1, R + 8))
    return build(rows, discard, backup, vocab, S, block, grid)
