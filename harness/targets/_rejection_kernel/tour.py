"""The tour of ``_rejection_kernel``'s production extremes (docs/CONTRACT.md §33.2): Qwen's and
Gemma's vocabularies (log-sum-exps and argmaxes over 19 and 32 blocks), more than 64 requests,
and positions past 65535 (the acceptance uniforms' counter)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import Scale, Shape
from ...targetkit.runner_v2_verify import (
    large_vocab_step,
    long_context_step,
    many_requests_step,
    settle_step,
)
from .layout import build


def _large_vocab(rng: np.random.Generator, scale: Scale) -> Case:
    return build(*settle_step(large_vocab_step(rng)))


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    return build(*settle_step(many_requests_step(rng)))


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """Random requests of synthetic rates (every decision a uniform's) at positions past 65535."""
    return build(*settle_step(long_context_step(rng, method="synthetic", greedy=(0.0,))))


SHAPES = (Shape("large_vocab", 2, _large_vocab), Shape("long_context", 4, _long_context),
          Shape("over_64_requests", 128, _many_requests))
