"""The production tier of ``rejection_random_sample_kernel`` (docs/CONTRACT.md §11.2):
in-contract cases by construction, one body for the Hypothesis and the bulk driver."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.probabilities import KINDS
from ...generation.strategies import Scale
from .layout import GREEDY_MODES, build

VOCABS = (1, 2, 16, 100, 1000, 4096)
"""Vocabulary sizes of ordinary cases (the tables cost ``N * V``; the tour has 262144)."""


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case: ragged draft counts up to 16, ``max_spec_len`` the largest
    (now and then larger), target and draft rows peaked, flat, sparse, tied, subnormal or
    random (equal or within ulps of each other now and then), ``NO_DRAFT_PROBS`` or not,
    uniforms at the acceptance boundary ``u = p`` without draft probabilities (with them no
    uniform in the division window: §11.2), ``-1`` padding, mixed batches, synthetic mode; one
    case in ten a batch of 65 to 96 requests of a draft or two, vocabularies to 100."""
    regime = c.choice(["small"] * 7 + ["medium"] * 2 + ["many"])
    if regime == "many":  # more than 64 requests (``many_requests``), a draft or two each, small tables
        B = c.integer(65, 96)
        K = c.integer(0, 2)
    else:
        B = c.integer(1, 8 if regime == "small" else max(1, scale.max_requests))
        K = c.integer_of([(1, 4), (0, 16)])
    counts = [int(x) for x in c.array(np.int64, B, 0, K)]
    L = max(counts)
    if c.chance(0.15):
        L += c.integer(1, 8)
    return build(
        counts, L, V=c.choice(VOCABS if regime != "many" else VOCABS[:4]), seed=c.integer(0, (1 << 32) - 1),
        target_kind=c.choice(KINDS), draft_kind=c.choice([*KINDS, None, None, None]),
        relation=c.choice(["independent", "independent", "equal", "close"]), greedy=c.choice(GREEDY_MODES),
        boundary=c.choice([0.0, 0.5, 1.0, 1.0]), pad=c.choice([0.0, 0.0, 0.2]), synthetic=c.chance(0.15),
    )  # fmt: skip
