"""The production tier of ``_insert_resampled_kernel`` (docs/CONTRACT.md §35.2): verification
steps of every method after §33 and §34 (greedy and random requests, rejections, bonus draws,
one or several 1024-wide blocks, a last block top-k masked whole, both noise paths); re-keyed
off every window."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale
from ...targetkit.runner_v2_verify import SAMPLE_BLOCK, VOCABS, draw_step, settle_step
from .layout import build


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 12 requests of up to 16 drafts, any method, now and then several 1024-wide blocks
    (the last one often a few lanes), whose last block a random request's top-k masks whole."""
    V = c.choice(VOCABS) if not c.chance(0.5) else SAMPLE_BLOCK * c.integer(1, 5) + (
        c.integer(1, 4) if c.chance(0.7) else c.integer(1, 1000))
    step = draw_step(c, B=c.integer_of([(1, 4), (1, 12)]), V=V, same=False)
    if step.rnb > 1 and c.chance(0.4):
        tl_ = step.target_logits.copy()
        rows = np.flatnonzero(np.repeat(~step.greedy(), step.counts))
        lo = (step.rnb - 1) * SAMPLE_BLOCK
        keep = rows[np.isfinite(tl_[rows, :lo]).any(axis=1)]
        tl_[keep, lo:] = -np.inf
        step = replace(step, target_logits=tl_)
    return build(*settle_step(step))
