"""The production tier of ``_get_num_sampled_and_rejected_kernel`` (docs/CONTRACT.md §18.2): the
rejection sampler's counts (or the plain sampler's: one logit, one token per row) over rows
still prefilling in chunks, rows at the end of their prompt and decoding rows."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import state_count, state_rows
from .layout import build


def _row(c: Chooser, K: int, sampler: bool) -> tuple[int, int, int, int]:
    """``(logits, sampled, seq_len, prompt)`` of one row: chunked (its sequence shorter than its
    prompt), at its prompt's end, or decoding past it."""
    nl = 1 if sampler else c.integer(1, K + 1)
    ns = c.integer(1, nl)
    seq = c.integer_of([(nl, 64), (nl, 20000)])
    kind = c.choice(["decode", "chunked", "prompt_end"])
    prompt = {"decode": c.integer(1, seq - 1) if seq > 1 else 1, "chunked": seq + c.integer(1, 500),
              "prompt_end": seq}[kind]
    return nl, ns, seq, prompt


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows of up to ``K + 1`` logits each (``K`` up to 16 drafts), or the plain sampler's
    batch (one each), their state rows among ``max_num_reqs``."""
    B = c.integer_of(request_count_ranges(scale))
    R = state_count(c, B)
    rows = state_rows(c, B, R)
    K = c.integer_of([(1, 4), (1, 16)])
    sampler = c.chance(0.2)
    per = c.repeat(B, lambda c: _row(c, K, sampler))
    prompts = np.asarray(c.array(np.int64, R, 1, 4096))
    prompts[rows] = [p[3] for p in per]
    return build(rows, [p[0] for p in per], [p[1] for p in per], [p[2] for p in per], prompts)
