"""The production tier of ``_expand_idx_mapping_kernel`` (docs/CONTRACT.md §17.2): a speculative
step's logits rows, ``d_b + 1`` per row (``0 <= d_b <= K`` drafts), vLLM's block."""

from __future__ import annotations

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.runner_v2 import state_count, state_rows
from .layout import build


def body(c: Chooser, scale: Scale) -> Case:
    """``B`` rows, ``K`` from 1 to 16 speculative tokens, each row 1 to ``K + 1`` logits (a row
    without drafts, one with all ``K``), state rows among ``max_num_reqs``."""
    B = c.integer_of(request_count_ranges(scale))
    rows = state_rows(c, B, state_count(c, B))
    K = c.integer_of([(1, 4), (1, 16)])
    logits = [int(x) for x in c.array(int, B, 1, K + 1)]
    return build(rows, logits, K + 1)
