"""The tour of ``_compute_cumulative_log_p_kernel``'s production extremes (docs/CONTRACT.md
§31.2): Qwen's and Gemma's vocabularies (log-sum-exps over 19 and 32 blocks) and a batch of
more than 64 requests."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import Scale, Shape
from ...targetkit.runner_v2_verify import chain, large_vocab_step, many_requests_step
from .layout import build


def _large_vocab(rng: np.random.Generator, scale: Scale) -> Case:
    step = large_vocab_step(rng, method="block")
    return build(step, chain(step))


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    step = many_requests_step(rng, method="block")
    return build(step, chain(step))


SHAPES = (Shape("large_vocab", 2, _large_vocab), Shape("over_64_requests", 128, _many_requests))
