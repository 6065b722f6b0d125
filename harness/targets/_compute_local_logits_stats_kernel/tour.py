"""The tour of ``_compute_local_logits_stats_kernel``'s production extremes (docs/CONTRACT.md
§30.2): Qwen's and Gemma's vocabularies (19 and 32 blocks), and a step of hundreds of rows."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import Scale, Shape
from ...targetkit.runner_v2_verify import _rng_chooser, draw_step, large_vocab_step
from .layout import build


def _large_vocab(rng: np.random.Generator, scale: Scale) -> Case:
    return build(large_vocab_step(rng))


def _many_rows(rng: np.random.Generator, scale: Scale) -> Case:
    """Hundreds of rows: 24 to 32 requests of 8 to 16 drafts, a small vocabulary."""
    c = _rng_chooser(rng)
    step = draw_step(c, B=int(rng.integers(24, 33)), K=16, V=37, min_drafts=8)
    return build(step)


SHAPES = (Shape("large_vocab", 100, _large_vocab), Shape("many_rows", 500, _many_rows))
