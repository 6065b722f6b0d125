"""The production tier of ``sample_recovered_tokens_kernel`` (docs/CONTRACT.md §13.2, with
§13.4's generated inputs): in-contract cases by construction, one body for the Hypothesis and
the bulk driver."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.probabilities import KINDS
from ...generation.strategies import Scale
from .layout import build, tile_tie

VOCABS = (1, 2, 16, 100, 1000, 4096)
"""Vocabulary sizes of ordinary cases (the tables cost ``N * V``; the tour has 262144)."""


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary case: ragged draft counts up to 16, tables peaked, flat, sparse, tied,
    subnormal or random, target = draft (all-zero residuals), one-hot targets on the draft id,
    ``NO_DRAFT_PROBS`` or not, float32 or float64 noise (or ones: ties survive), vLLM's
    ``BLOCK_SIZE`` or a smaller power of two (several tiles, ties across them); now and then a
    batch of more than 64 requests with a draft or two each and a vocabulary to 100."""
    B = c.integer(1, c.choice([4, 8, 8, 32, 96]))
    # a batch of more than 64 requests (``many_requests``) keeps to a draft or two: a grid of (B, L)
    K = c.integer_of([(1, 4), (0, 16)]) if B <= 32 else c.integer(1, 2)
    counts = [int(x) for x in c.array(np.int64, B, 0, K)]
    L = max(counts)
    if c.chance(0.15):
        L += c.integer(1, 4)
    V = c.choice(VOCABS if B <= 32 else VOCABS[:4])  # a batch of many requests: small tables
    bs = None if c.chance(0.5) else 2 ** c.integer(max(0, (V - 1).bit_length() - 6), 13)
    if bs is not None and V > 2 and c.chance(0.3):  # the largest tile below V: a last tile of a third or more
        bs = 1 << ((V - 1).bit_length() - 1)
    seed = c.integer(0, (1 << 32) - 1)
    fp64 = c.chance(0.3)
    if c.chance(0.15) and V >= 2:
        return tile_tie(counts, L, V=V, seed=seed, block_size=bs if bs is not None and bs < V else 1 << ((V // 2).bit_length() - 1),
                        fp64=fp64)  # fmt: skip
    return build(
        counts, L, V=V, seed=seed, target_kind=c.choice(KINDS), draft_kind=c.choice([*KINDS, None]),
        relation=c.choice(["independent", "independent", "independent", "equal"]), fp64=fp64,
        noise=c.choice(["exponential", "exponential", "ones"]), block_size=bs, pad=c.choice([0.0, 0.2]),
        one_hot=c.choice([0.0, 0.0, 0.5]),
    )  # fmt: skip
