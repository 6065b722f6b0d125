"""The production tier of ``_gather_draft_sampled_kernel`` (docs/CONTRACT.md §23.2): the logits
rows of a speculative step as vLLM builds them: decoding rows (their bonus and drafts), rows whose
step starts inside the prompt (their draft slots are placeholders), prefill chunks."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import state_count, state_rows
from .layout import Row, build


def _row(c: Chooser, s: int, K: int, M: int) -> tuple[Row, int]:
    """A row and its prompt length: decoding past its prompt, starting inside it (the draft
    slots of a padded first step after a remote KV load), or a prefill chunk (one logit), in a
    model of ``M`` tokens."""
    nl = c.integer(1, K + 1)
    qlen = nl + c.integer_of([(0, 0), (0, 30)])
    count = c.integer_of([(0, 64), (0, M - 64)])
    first = count + qlen - nl  # the position of the row's first logit
    kind = c.choice(["decode", "inside", "prefill"])
    if kind == "prefill":
        return Row(s, count, qlen, 1), count + qlen + c.integer(0, 64)
    prompt = c.integer(1, first) if kind == "decode" and first >= 1 else first + c.integer(1, max(1, nl))
    return Row(s, count, qlen, nl), prompt


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows of distinct state rows, ``K`` up to 16 drafts, a model of 4096 or 131072
    tokens, input ids of a vocabulary."""
    B = c.integer_of(request_count_ranges(scale))
    R = state_count(c, B)
    s = state_rows(c, B, R)
    K = c.integer_of([(1, 4), (1, 16)])
    M = c.choice([4096, 4096, 131072])  # max_model_len: most batches' positions below 32767
    per = [_row(c, int(x), K, M) for x in s]
    prompts = np.asarray(c.array(np.int64, R, 1, M))
    prompts[s] = [p for _, p in per]
    rows = [r for r, _ in per]
    return build(rows, c.array(np.int64, sum(r.qlen for r in rows), 0, 151935), prompts)
