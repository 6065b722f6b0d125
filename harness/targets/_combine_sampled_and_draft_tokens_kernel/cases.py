"""The production tier of ``_combine_sampled_and_draft_tokens_kernel`` (docs/CONTRACT.md §16.2):
every step's batch: rows still prefilling, rows whose step starts in the prompt's tail, decoding
rows with and without drafts; token ids of a vocabulary."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import state_count, state_rows
from .layout import Row, build

VOCABS = (1000, 32000, 151936, 262144)


def _row(c: Chooser, s: int, K: int) -> tuple[Row, int]:
    """A row and its prompt length: prefilling (its sequence within the prompt), in the
    prompt's tail (its logits start inside the prompt), or decoding."""
    d = c.integer(0, K)
    qlen = d + 1 + c.integer_of([(0, 0), (0, 40)])
    count = c.integer_of([(0, 64), (0, 4000)])
    seq = count + qlen
    kind = c.choice(["decode", "prefill", "tail", "prompt_end"])
    prompt = {"decode": c.integer(1, max(1, seq - d - 1)), "prefill": seq + c.integer(1, 64), "prompt_end": seq,
              "tail": c.integer(seq - d, seq - 1) if seq - d <= seq - 1 else seq - 1}[kind]
    return Row(s, qlen, count, d), max(1, prompt)


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows of distinct state rows, ``K`` up to 16 drafts, ids of a vocabulary."""
    B = c.integer_of(request_count_ranges(scale))
    R = state_count(c, B)
    s = state_rows(c, B, R)
    K = c.integer_of([(1, 4), (1, 16)])
    per = [_row(c, int(x), K) for x in s]
    prompts = np.asarray(c.array(np.int64, R, 1, 4000))
    prompts[s] = [p for _, p in per]
    V = c.choice(VOCABS)
    return build([r for r, _ in per], prompts, c.array(np.int64, R, 0, V - 1),
                 c.array(np.int64, R * K, 0, V - 1).reshape(R, K))
