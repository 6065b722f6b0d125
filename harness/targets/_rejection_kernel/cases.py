"""The production tier of ``_rejection_kernel`` (docs/CONTRACT.md §33.2): verification steps of
every method (standard, synthetic rates, block verification, FLy) with the drafter's logits or
one-hot drafts, greedy and random requests, ``-1`` drafts, §30-§32's intermediates; re-keyed off
every window (a request whose acceptance test lands within its bound)."""

from __future__ import annotations

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale
from ...targetkit.runner_v2_verify import (
    VOCABS,
    WITH_LOGPROBS,
    blocks_vocab,
    draw_step,
    settle_step,
)
from .layout import build


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 12 requests of up to 16 drafts, any method, now and then two or three 8192-wide blocks."""
    V = c.choice(VOCABS) if not c.chance(0.1) else blocks_vocab(c)
    step, ch = settle_step(draw_step(c, B=c.integer_of([(1, 4), (1, 12)]), V=V, styles=WITH_LOGPROBS, same=False))
    return build(step, ch)
