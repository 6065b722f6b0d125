"""The production tier of ``eagle_prepare_next_token_padded_kernel`` (docs/CONTRACT.md §3.2):
in-contract cases by construction, one body for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import INT32_MAX, Scale, request_count_ranges
from .layout import MAX_SAMPLED, build


def _row(c: Chooser, S: int, vocab: int) -> np.ndarray:
    """One request's row as the rejection sampler writes it: ``a`` accepted ids and one
    recovered or bonus id, all vocabulary ids, then ``-1`` up to ``S``."""
    k = c.integer(1, S)
    head = c.array_of(np.int64, k, [(0, vocab - 1), (max(0, vocab - 3), vocab - 1)])
    return np.concatenate([head, np.full(S - k, -1, dtype=np.int64)])


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §3.2): the sampler's fresh rows of up to
    33 columns (a third of the batches of one column: no request has drafts) (a valid prefix of vocabulary ids, then ``-1``), vocabularies from 1 id to the
    int32 limit, none, some or all requests discarded (and buffers longer than the batch),
    vocabulary backup ids, vLLM's block and grid."""
    R = c.integer_of(request_count_ranges(scale))
    S = c.integer_of([(1, 1), (1, 8), (1, MAX_SAMPLED)])  # S = 1: a batch without drafts (prefills)
    vocab = c.integer(1, INT32_MAX) if c.boolean() else c.choice([32000, 128256, 1, 2])
    rows = np.stack(c.repeat(R, lambda c: _row(c, S, vocab)))
    extra = c.integer_of([(0, 0), (1, 8)])
    mode = c.choice(["none", "some", "all"])
    if mode == "some":
        discard = c.array(np.int8, R + extra, 0, 1).astype(bool)
    else:
        discard = np.full(R + extra, mode == "all")
    backup = c.array(np.int32, R + extra, 0, vocab - 1)
    return build(rows, discard, backup, vocab, S, None, None)
