"""The production tier of ``_compute_local_residual_mass_kernel`` (docs/CONTRACT.md §32.2): block
verification steps with the drafter's logits (some the target's own: residuals of 0), ``-1``
drafts, greedy requests (skipped), §30's statistics and §31's ratios."""

from __future__ import annotations

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale
from ...targetkit.runner_v2_verify import VOCABS, WITH_LOGPROBS, blocks_vocab, chain, draw_step
from .layout import build


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 12 requests of up to 16 drafts, now and then two or three 8192-wide blocks."""
    V = c.choice(VOCABS) if not c.chance(0.2) else blocks_vocab(c)
    step = draw_step(c, B=c.integer_of([(1, 4), (1, 12)]), V=V, styles=WITH_LOGPROBS, method="block", draft=True, greedy=(0.0, 0.3))
    return build(step, chain(step))
