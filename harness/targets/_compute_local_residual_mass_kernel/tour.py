"""The tour of ``_compute_local_residual_mass_kernel``'s production extremes (docs/CONTRACT.md
§32.2): Qwen's and Gemma's vocabularies (19 and 32 blocks a row) and hundreds of rows."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import Scale, Shape
from ...targetkit.runner_v2_verify import _rng_chooser, chain, draw_step, large_vocab_step
from .layout import build


def _large_vocab(rng: np.random.Generator, scale: Scale) -> Case:
    step = large_vocab_step(rng, method="block", draft=True, greedy=(0.0, 0.3))
    return build(step, chain(step))


def _many_rows(rng: np.random.Generator, scale: Scale) -> Case:
    """24 to 32 requests of 8 to 16 drafts, a small vocabulary."""
    step = draw_step(_rng_chooser(rng), B=int(rng.integers(24, 33)), K=16, V=37, method="block", draft=True, min_drafts=8, greedy=(0.0, 0.3))
    return build(step, chain(step))


SHAPES = (Shape("large_vocab", 100, _large_vocab), Shape("many_rows", 500, _many_rows))
