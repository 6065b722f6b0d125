"""The tour of ``_resample_kernel``'s production extremes (docs/CONTRACT.md §34.2): Qwen's and
Gemma's vocabularies (149 and 256 blocks of 1024, ids past 131072), positions past 65535 (the
noise's counter) and more than 64 requests."""

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
    return build(*settle_step(large_vocab_step(rng, greedy=(0.0,))))


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    return build(*settle_step(long_context_step(rng, greedy=(0.0, 0.3))))


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    return build(*settle_step(many_requests_step(rng)))


SHAPES = (Shape("long_context", 16, _long_context), Shape("over_64_requests", 128, _many_requests),
          Shape("large_vocab", 300, _large_vocab))
