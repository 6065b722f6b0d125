"""The production tier of ``_update_draft_inputs_kernel`` (docs/CONTRACT.md §27.2): draft steps
``1 .. K - 1`` of a multi-step drafter, the model's hidden sizes (several blocks: 2048 to 5120),
rows up to the model's length (the clamps engage)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import MAX_MODEL_LEN
from .layout import build, state

HIDDEN = (64, 256, 1024, 2048, 4096, 5120)
"""Hidden sizes: small ones, and the models' (Llama 3 8B's 4096, Qwen's 5120)."""


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows, ``K`` of 2 to 16 steps, any step after the first, hidden states of finite
    values (signed zeros, subnormals among them; the wide ones with batches of up to 128 rows)."""
    B = c.integer_of(request_count_ranges(scale))
    K = c.integer_of([(2, 4), (2, 16)])
    step = c.integer(1, K - 1)
    H = c.choice([h for h in HIDDEN if h * B <= 1 << 19] or [HIDDEN[0]])  # a case of at most 2 MiB of states
    M = c.choice([64, 4096, MAX_MODEL_LEN])
    seq = c.array_of(np.int64, B, [(1, M), (M - 2, M)])
    bits = c.array_of(np.int64, B * H, [(0, 2**23), (0, 0x7F7FFFFF), (-(2**31), -(2**31) + 2**23)])
    hidden = bits.astype(np.int32).view(np.float32).reshape(B, H)  # finite: exponents below 0xFF
    pos, seqs, src = state(seq, c.integer(0, 8))
    return build(step, K, c.array(np.int64, B, 0, 151935), hidden, pos, seqs, src, M, c.chance(0.8))
