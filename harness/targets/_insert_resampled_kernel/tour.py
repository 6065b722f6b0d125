"""The tour of ``_insert_resampled_kernel``'s production extremes (docs/CONTRACT.md §35.2):
Qwen's and Gemma's vocabularies (149 and 256 blocks of 1024: a padded block count of 256) and
more than 64 requests."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import Scale, Shape
from ...targetkit.runner_v2_verify import large_vocab_step, many_requests_step, settle_step
from .layout import build


def _large_vocab(rng: np.random.Generator, scale: Scale) -> Case:
    return build(*settle_step(large_vocab_step(rng, greedy=(0.0, 0.3))))


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    return build(*settle_step(many_requests_step(rng)))


SHAPES = (Shape("over_64_requests", 128, _many_requests), Shape("large_vocab", 300, _large_vocab))
