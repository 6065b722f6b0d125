"""The production tier of ``_resample_kernel`` (docs/CONTRACT.md §34.2): verification steps of
every method after §33 (rejected drafts, placeholders, bonus rows, greedy requests), the
drafter's logits or one-hot drafts, both noise paths; re-keyed off every window."""

from __future__ import annotations

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale
from ...targetkit.runner_v2_verify import VOCABS, WITH_LOGPROBS, draw_step, settle_step
from .layout import build


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 12 requests of up to 16 drafts, any method, now and then two 1024-wide blocks or more."""
    V = c.choice(VOCABS) if not c.chance(0.2) else 1024 * c.integer(1, 3) + c.integer(1, 1000)
    step, ch = settle_step(draw_step(c, B=c.integer_of([(1, 4), (1, 12)]), V=V, styles=WITH_LOGPROBS, same=False))
    return build(step, ch)
