"""The tour of ``_temperature_kernel``'s production extremes (docs/CONTRACT.md §28.2): a Gemma
vocabulary (262144 ids, 32 blocks of 8192) and a batch of many rows."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import Scale, Shape
from .layout import build, random_logits


def _large_vocab(rng: np.random.Generator, scale: Scale) -> Case:
    """One to three rows of a 151936- or 262144-id vocabulary, temperatures 0, 1 and another: a
    flat row with a few dozen logits standing out (a compact reproducer), some past 32767."""
    V = int(rng.choice([151936, 262144]))
    T = int(rng.integers(1, 4))
    temp = np.array([0.0, 1.0, float(rng.choice([0.6, 1.7]))], np.float32)
    rows = np.append(rng.integers(0, 3, size=T - 1), 2)
    logits = np.zeros((T, V), np.float32)
    for t in range(T):
        at = np.append(rng.integers(0, V, size=40), rng.integers(V - 8192, V, size=8))
        logits[t, at] = random_logits(rng, 1, at.size)[0]
    return build(logits, rows, temp)


def _many_rows(rng: np.random.Generator, scale: Scale) -> Case:
    """Hundreds of rows (a batch of 64 requests of 4 drafts and more: their bonus rows too) of a
    small vocabulary, every state row scaled."""
    T = int(rng.integers(257, 400))
    R = int(rng.integers(64, 80))
    return build(random_logits(rng, T, 8), rng.integers(0, R, size=T), rng.uniform(0.1, 3.0, size=R))


SHAPES = (Shape("large_vocab", 96, _large_vocab), Shape("many_rows", 400, _many_rows))
