"""The production tier of ``target_dependent_ar_prepare_prefill_inputs_kernel`` (docs/CONTRACT.md
§25.2): the drafter's first pass after a target step of decoding rows (drafts verified, some
rejected) and rows still prefilling in chunks (nothing sampled)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import state_count, state_rows
from .layout import Row, build


def _row(c: Chooser, s: int, K: int, long: int) -> Row:
    """A row still prefilling (a chunk, nothing sampled) or one past its prompt (``d + 1``
    logits verified, up to ``d`` rejected; its query is its logits, or a last chunk ending in
    them)."""
    count = c.integer_of([(0, 64), (0, 100000)])
    if c.chance(0.3):
        return Row(s, c.integer(1, long), count, 0, 0)
    nl = c.integer(1, K + 1)
    qlen = c.choice([nl, c.integer(nl, max(nl, long))])
    rejected = c.integer(0, nl - 1)
    return Row(s, qlen, count, nl - rejected, rejected)


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows of distinct state rows among ``max_num_reqs``, ``K`` up to 16 drafts, chunks
    up to 2048 tokens, token ids of a 32000-id vocabulary."""
    B = c.integer_of(request_count_ranges(scale))
    R = state_count(c, B)
    s = state_rows(c, B, R)
    K = c.integer_of([(1, 4), (1, 16)])
    long = c.choice([8, min(2048, scale.max_query_len)])
    rows = [_row(c, int(x), K, long) for x in s]
    T = sum(r.qlen for r in rows)
    ids = c.array(np.int64, T, 0, 31999)
    last = c.array(np.int64, R, 0, 31999)
    nxt = c.array(np.int64, c.integer(1, 4) * R, 0, 31999).reshape(-1, R)
    return build(rows, ids, last, nxt, R)
