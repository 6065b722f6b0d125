"""The production tier of ``input_batch_prepare_prefill_inputs_kernel`` (docs/CONTRACT.md §14.2):
a step with prefilling rows (first, middle and last chunks of their prompts) among decoding
ones, and the drafter's lookahead (``num_lookahead`` rows)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import state_count, state_rows
from .layout import build, state


def _row(c: Chooser, W: int) -> tuple[int, int, int]:
    """``(qlen, prompt, count)`` of one row: prefilling (a chunk inside its prompt: the first,
    a middle or the last) or decoding past its prompt."""
    if c.chance(0.6):
        L = c.integer(1, W)
        count = c.choice([0, c.integer(0, L - 1)])
        qlen = c.choice([L - count, c.integer(1, L - count)])
        return qlen, L, count
    L = c.integer(1, W - 1)
    count = c.integer(L, W - 1)
    return c.integer(1, min(17, W - count)), L, count


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows (of ``max_num_reqs`` state rows), a model length of 16 to 2048 tokens, 1 to 8
    lookahead tokens."""
    B = c.integer_of(request_count_ranges(scale))
    R = state_count(c, B)
    rows = state_rows(c, B, R)
    W = c.choice([16, 64, min(2048, max(16, scale.max_query_len))])
    per = c.repeat(B, lambda c: _row(c, W))
    prefill = np.asarray(c.array(np.int64, R, 1, W))
    counts = np.asarray(c.array(np.int64, R, 0, W))
    prefill[rows] = [p[1] for p in per]
    counts[rows] = [p[2] for p in per]
    table = state(lambda n, lo, hi: c.array(np.int64, n, lo, hi), R, W)
    return build(rows, [p[0] for p in per], table, prefill, counts, c.choice([1, 1, 2, 3, 4, 8]))
