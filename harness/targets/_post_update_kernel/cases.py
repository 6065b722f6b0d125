"""The production tier of ``_post_update_kernel`` (docs/CONTRACT.md §19.2): after a step, rows
that sampled (accepted drafts and a bonus, or a rejection), rows still prefilling (nothing
sampled), rows a pipeline rank masks out (``-1``); the last rank's penalties counts, or a
non-last rank's drafts; the sampled path without ``query_start_loc``."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import state_count, state_rows
from .layout import State, build

VOCABS = (64, 1000, 32000)


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows of ``K`` up to 16 drafts: each a masked row now and then, else a chunk still
    prefilling or a row that verified ``d + 1`` logits and kept ``n`` of them; a history of up
    to 512 tokens per state row. The last pipeline rank's call (``query_start_loc`` and the
    penalties' counts over a vocabulary of up to 32000 ids), or a non-last rank's (neither: its
    counts moved on by the query already, the rejected come off now; the drafts it received)."""
    B = c.integer_of(request_count_ranges(scale))
    R = state_count(c, B)
    rows = state_rows(c, B, R)
    K = c.integer_of([(1, 4), (1, 16)])
    last_rank = c.chance(0.7)
    if c.chance(0.3):
        rows = np.where(c.array(np.int64, B, 0, 9) == 0, -1, rows)
    W = c.choice([K + 2, 64, 512])
    nl = c.array(np.int64, B, 1, min(K + 1, W))
    chunked = c.array(np.int64, B, 0, 3) == 0
    ns = np.where(chunked, 0, [c.integer(1, int(n)) for n in nl])
    nr = np.where(chunked, 0, nl - ns)
    qlens = nl + np.asarray(c.array(np.int64, B, 0, c.choice([0, 40])))
    V = c.choice(VOCABS) if R * 32000 <= 1 << 20 else c.choice(VOCABS[:2])
    sampled = c.array(np.int64, B * (K + 1), 0, V - 1).reshape(B, K + 1)
    real = rows >= 0
    t = np.asarray(c.array(np.int64, R, 0, W - 1))
    t[rows[real]] = np.minimum(t[rows[real]], W - ns[real])
    history = np.where(np.arange(W)[None, :] < t[:, None], c.array(np.int64, R * W, 0, V - 1).reshape(R, W), 0)
    counts = np.asarray(c.array(np.int64, R, 0, 100000))
    counts[rows[real]] = np.maximum(counts[rows[real]], nr[real])  # a non-last rank's count already has the query
    bins = c.array(np.int64, R * V, 0, 3).reshape(R, V) if last_rank else None
    drafts = None if last_rank or c.chance(0.3) else c.array(np.int64, B * K, 0, V - 1).reshape(B, K)
    return build(rows, qlens if last_rank else None, sampled, ns, nr, State(counts, t, history, bins), drafts)
