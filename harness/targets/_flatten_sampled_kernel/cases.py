"""The production tier of ``_flatten_sampled_kernel`` (docs/CONTRACT.md §24.2): the rejection
sampler's rows when a request asks for logprobs: ``1 <= num_sampled <= logits <= K + 1``."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from .layout import build, draw_rows

VOCABS = (1000, 32000, 151936, 262144)


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows, ``K`` from 1 to 16 drafts, each row ``d + 1`` logits and 1 to ``d + 1``
    sampled tokens (a rejection, or every draft kept and the bonus), ids of a vocabulary."""
    B = c.integer_of(request_count_ranges(scale))
    K = c.integer_of([(1, 4), (1, 16)])
    logits = [int(x) for x in c.array(np.int64, B, 1, K + 1)]
    kept = [c.integer(1, n) for n in logits] if c.chance(0.8) else list(logits)
    ids = c.array(np.int64, int(sum(kept)), 0, c.choice(VOCABS) - 1)
    return build(draw_rows(ids, kept, K, tail=c.choice([-1, 0])), kept, logits)
