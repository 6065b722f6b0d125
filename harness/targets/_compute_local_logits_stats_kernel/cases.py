"""The production tier of ``_compute_local_logits_stats_kernel`` (docs/CONTRACT.md §30.2): a
verification step's logits (processed: ``-inf`` where masked), the drafter's cached logits or
none, greedy and random requests, narrower or wider draft vocabularies, small vocabularies (one
8192-wide block) and now and then two or three blocks."""

from __future__ import annotations

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale
from ...targetkit.runner_v2_verify import VOCABS, WITH_LOGPROBS, blocks_vocab, draw_step
from .layout import build


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 12 requests of up to 16 drafts (:func:`~...targetkit.runner_v2_verify.draw_step`)."""
    V = c.choice(VOCABS) if not c.chance(0.1) else blocks_vocab(c)
    return build(draw_step(c, B=c.integer_of([(1, 4), (1, 12)]), V=V, styles=WITH_LOGPROBS, other_width=0.5))
