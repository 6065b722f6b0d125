"""The production tier of ``rejection_greedy_sample_kernel`` (docs/CONTRACT.md §10.2):
in-contract cases by construction, one body for the Hypothesis and the bulk driver."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale
from .layout import GREEDY_MODES, build

VOCABS = (2, 16, 1000, 32000, 128256, 151936, 262144)
"""Vocabulary sizes: toy ones, Llama's, Qwen's, Gemma 3's (only the ids' range: no table)."""


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case: a small, medium or tail-sized batch with ragged draft
    counts up to 16 (some requests without drafts), ``max_spec_len`` the largest count (or,
    now and then, larger), drafts that match the argmax in runs, ``-1`` padding suffixes,
    all-greedy (``is_greedy`` None), mixed or all-true batches, synthetic mode now and then."""
    regime = c.choice(["small"] * 6 + ["medium"] * 3 + ["tail"])
    top = {"small": 8, "medium": scale.max_requests, "tail": scale.request_tail}[regime]
    B = c.integer(1, max(1, top))
    K = c.integer_of([(1, 4), (0, 16)])
    counts = [int(x) for x in c.array(np.int64, B, 0, K)]
    L = max(counts)
    if c.chance(0.15):
        L += c.integer(1, 8)
    return build(
        counts, L, V=c.choice(VOCABS), seed=c.integer(0, (1 << 32) - 1),
        greedy=c.choice(GREEDY_MODES), match=c.choice([0.0, 0.5, 0.9, 0.97, 1.0]),
        pad=c.choice([0.0, 0.0, 0.2, 0.6]), synthetic=c.chance(0.2), rates=c.choice(["any", "edges"]),
        ids=c.choice(["any", "top"]),
    )  # fmt: skip
