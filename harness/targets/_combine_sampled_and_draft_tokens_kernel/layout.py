"""How a case of ``_combine_sampled_and_draft_tokens_kernel`` is built (docs/CONTRACT.md §16.1):
per batch row its state row, query length, computed count and drafts; per state row its prompt
length, last sampled token and draft tokens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2 import cumulative

NAME = "_combine_sampled_and_draft_tokens_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


@dataclass(frozen=True)
class Row:
    """Batch row: state row ``s``, ``qlen`` tokens after ``c`` computed, ``drafts`` scheduled
    (its logits: ``drafts + 1``)."""

    s: int
    qlen: int
    c: int
    drafts: int


def build(rows: Sequence[Row], prefill_len: Sequence[int], last_sampled: np.ndarray, draft_tokens: np.ndarray,
          block: int | None = None, new: int | None = None) -> Case:
    """The case of ``rows`` over the state's ``prefill_len``, ``last_sampled`` (``[R, 1]``) and
    ``draft_tokens`` (``[R, K]``); ``seq_lens = c + qlen``, ``cu_num_logits`` from the drafts plus
    ``NUM_NEW_SAMPLED_TOKENS`` (``new``; ``None``: vLLM's 1)."""
    n = 1 if new is None else new
    return Case(
        kernel=NAME,
        arrays={
            "idx_mapping": np.asarray([r.s for r in rows], dtype=np.int64),
            "last_sampled_tokens": np.asarray(last_sampled, dtype=np.int64).reshape(-1, 1),
            "query_start_loc": cumulative([r.qlen for r in rows]),
            "seq_lens": np.asarray([r.c + r.qlen for r in rows], dtype=np.int64).astype(np.int32),
            "prefill_len": np.asarray(prefill_len, dtype=np.int64).astype(np.int32),
            "draft_tokens": np.ascontiguousarray(draft_tokens, dtype=np.int64),
            "cu_num_logits": cumulative([r.drafts + n for r in rows]),
        },
        scalars={"num_reqs": len(rows)},
        launch={"BLOCK_SIZE": block, "NUM_NEW_SAMPLED_TOKENS": new},
    )


def rows_of(case: Case) -> list[Row]:
    a = case.arrays
    q = a["query_start_loc"].astype(np.int64)
    n = case.launch.get("NUM_NEW_SAMPLED_TOKENS")
    nl = np.diff(a["cu_num_logits"].astype(np.int64))
    return [Row(int(a["idx_mapping"][b]), int(q[b + 1] - q[b]), int(a["seq_lens"][b]) - int(q[b + 1] - q[b]),
                int(nl[b]) - (1 if n is None else n)) for b in range(len(q) - 1)]
