"""The production tier of ``_prepare_decode_inputs_kernel`` (docs/CONTRACT.md §26.2): the
drafter's first decode step after its prefill, rows up to the model's length (where the clamps
engage), EAGLE/MTP (positions advance) and Gemma4's MTP (constant positions)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import MAX_MODEL_LEN, state_count
from .layout import build


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows, ``K`` of 2 to 16 drafts, accepted sequences of 1 to ``max_model_len`` tokens
    (some at it), up to ``K`` rejected, ids of a vocabulary."""
    B = c.integer_of(request_count_ranges(scale))
    R = state_count(c, B)
    K = c.integer_of([(2, 4), (2, 16)])
    M = c.choice([64, 4096, MAX_MODEL_LEN])
    seq = c.array_of(np.int64, B, [(1, M), (M - 2, M)])
    rejected = c.array(np.int64, B, 0, K)
    return build(seq, rejected, c.array(np.int64, R * K, 0, 151935).reshape(R, K), M, R, c.chance(0.8))
