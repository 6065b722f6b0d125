"""The production tier of ``_gumbel_sample_kernel`` (docs/CONTRACT.md §29.2): the target's
sampling of processed logits (top-k/top-p masks: ``-inf``), or the drafter's of raw logits with
its logits cache (padded rows ``-1``, a column per step or per token), greedy and random rows,
both noise paths, seeds over the whole int64 range; re-keyed off every window."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import INT64_MAX, INT64_MIN, Scale, request_count_ranges
from ...targetkit.runner_v2_verify import MAX_K, RE_KEY, VOCABS
from .layout import MODES, build, windows

TEMPERATURES = (0.0, 1.0, 0.6, 1.4, 0.2)


def clear_windows(case: Case, attempts: int = 8) -> Case:
    """``case`` with the seed of every state row whose draw meets a window re-keyed (a new
    request's noise), until none does (production meets none: docs/CONTRACT.md §29.4)."""
    for k in range(1, attempts + 1):
        met = windows(case)
        if not met:
            return case
        rows = case.arrays["expanded_idx_mapping"][[int(w.key[1]) for w in met]]
        seeds = case.arrays["seeds"].copy()
        rows = rows[rows >= 0]
        seeds[rows] = (seeds[rows].view(np.uint64) ^ (RE_KEY * np.uint64(k))).view(np.int64)
        case = case.replace(arrays={"seeds": seeds})
    return case


def draw(c: Chooser, T: int, V: int, mode: str, max_pos: int = 5000) -> Case:  # noqa: N803
    """``T`` rows of ``V`` logits in ``mode``: the state rows, temperatures, seeds (the int64
    limits now and then), positions below ``max_pos``, a cache of ``K`` columns."""
    rng = np.random.default_rng(c.integer(0, 2**32 - 1))
    R = T + c.integer(0, 4)
    logits = (rng.standard_normal((T, V)) * c.choice([3.0, 0.3, 8.0]) - c.choice([0.0, 0.0, 40.0])).astype(np.float32)
    temp = np.asarray([c.choice(TEMPERATURES) for _ in range(R)], np.float32)
    seeds = np.asarray(c.array_of(np.int64, R, [(INT64_MIN, INT64_MAX)]))
    pos = rng.integers(0, max_pos, size=T).astype(np.int64)
    fp64 = c.chance(0.3)
    if mode == "target":  # a request's rows share its state row
        rows = rng.integers(0, R, size=T)
        if c.chance(0.5):
            masked = rng.random((T, V)) < c.choice([0.5, 0.95])
            masked[np.arange(T), rng.integers(0, V, size=T)] = False
            logits[masked & (temp[rows] != 0)[:, None]] = -np.inf
        return clear_windows(build(logits, rows, pos, seeds, temp, mode, fp64=fp64))
    rows = rng.permutation(R)[:T]
    if c.chance(0.4):  # padded rows
        rows[rng.random(T) < 0.3] = -1
    K = c.integer(1, MAX_K)
    cache = np.full((R, K, V), -7.0, np.float32)
    if mode == "drafter":
        return clear_windows(build(logits, rows, pos, seeds, temp, mode, fp64=fp64, cache=cache, col=c.integer(0, K - 1)))
    cols = rng.integers(0, K, size=T)
    source = (rng.standard_normal((T, V)) * 3).astype(np.float32)
    return clear_windows(build(logits, rows, pos, seeds, temp, mode, fp64=fp64, cache=cache, col=cols, source=source))


def body(c: Chooser, scale: Scale) -> Case:
    """``T`` rows (a batch's) over a vocabulary of :data:`VOCABS` or a few 1024-wide blocks, in one
    of the three modes."""
    mode = c.choice(MODES)
    T = c.integer_of(request_count_ranges(scale)[:2])
    V = c.choice(VOCABS) if not c.chance(0.2) else 1024 * c.integer(1, 3) + c.choice([0, 1, 500])
    return draw(c, T, V, mode)
