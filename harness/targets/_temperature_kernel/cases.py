"""The production tier of ``_temperature_kernel`` (docs/CONTRACT.md §28.2): a batch's logits rows
(one per sampled token: a request's drafts and bonus share its state row), temperatures of 0
(greedy: untouched), 1 (untouched) and others (divided), finite model logits."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2_verify import VOCABS
from .layout import build, random_logits

TEMPERATURES = (0.0, 1.0, 0.7, 1.3, 0.05, 2.0)


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` requests of 1 to 5 rows each over a vocabulary of :data:`VOCABS` (now and then two
    8192-wide blocks), state rows a permutation's, temperatures of :data:`TEMPERATURES`."""
    B = c.integer_of(request_count_ranges(scale)[:2])
    R = B + c.integer(0, 4)
    rng = np.random.default_rng(c.integer(0, 2**32 - 1))
    state = rng.permutation(R)[:B]
    per = np.asarray(c.array(np.int64, B, 1, 5))
    rows = np.repeat(state, per)
    V = c.choice(VOCABS) if not c.chance(0.1) else 8192 + c.integer(1, 300)
    temp = np.asarray([c.choice(TEMPERATURES) for _ in range(R)], dtype=np.float32)
    return build(random_logits(rng, len(rows), V), rows, temp)
