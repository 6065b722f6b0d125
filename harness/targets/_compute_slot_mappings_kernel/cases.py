"""The production tier of ``_compute_slot_mappings_kernel`` (docs/CONTRACT.md §22.2): every step's
slot mappings (prefill chunks, decodes) and the drafter's decode steps (one token per row, dummy
rows ``-1``), one to three KV-cache groups (some without slot mappings), decode context
parallelism (sharded and unsharded groups), the buffer padded past the batch's tokens."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import lengths, state_count, state_rows
from .layout import build, widths_for


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows, a model of up to 4096 tokens, up to 3 groups of block size 16 to 64 (1 now
    and then), context parallelism of 1 to 8 ranks with an interleave dividing the block sizes,
    chunks of up to 600 tokens or one-token draft steps, a buffer up to 200 tokens wider."""
    B = c.integer_of(request_count_ranges(scale))
    R = state_count(c, B)
    rows = state_rows(c, B, R)
    if c.chance(0.2):
        rows = np.where(c.array(np.int64, B, 0, 4) == 0, -1, rows)
    G = c.integer(1, 3)
    sizes = [c.choice([16, 32, 64, 1]) for _ in range(G)]
    CP = c.choice([1, 1, 2, 4, 8])
    IL = c.choice([i for i in (1, 2, 4, 8, 16) if all(s % i == 0 for s in sizes)])
    sharded = [CP > 1 and c.chance(0.7) for _ in range(G)]
    M = c.choice([64, 4096])
    widths = widths_for(M, sizes, sharded, CP)
    tables = [c.array(np.int64, R * w, 0, 1 << 20).reshape(R, w) for w in widths]
    if c.chance(0.5):  # a step: chunks of the batch, positions c + i
        qlens = lengths(c, B, [(1, 1), (1, 17), (1, min(scale.max_query_len, 600))])
        qlens = [min(q, M) for q in qlens]
        starts = [c.integer(0, M - q) for q in qlens]
        pos = np.concatenate([s + np.arange(q) for s, q in zip(starts, qlens, strict=True)])
    else:  # the drafter's decode step: one token per row, any position
        qlens = [1] * B
        pos = c.array(np.int64, B, 0, M - 1)
    enabled = [c.chance(0.85) for _ in range(G)]
    T = int(sum(qlens))
    return build(rows, qlens, pos, tables, sizes, enabled, sharded, T + c.integer_of([(0, 0), (0, 200)]),
                 (CP, c.integer(0, CP - 1), IL))
