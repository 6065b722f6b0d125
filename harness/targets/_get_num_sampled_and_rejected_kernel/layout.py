"""How a case of ``_get_num_sampled_and_rejected_kernel`` is built (docs/CONTRACT.md §18.1):
per batch row its state row, logits count, sampled count and sequence length; per state row its
prompt length."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2 import cumulative

NAME = "_get_num_sampled_and_rejected_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


def build(rows: Sequence[int], logits: Sequence[int], sampled: Sequence[int], seq_lens: Sequence[int],
          prefill_len: Sequence[int]) -> Case:
    """Row ``b`` (state row ``rows[b]``) verified ``logits[b]`` logits and sampled ``sampled[b]``
    tokens; its sequence is ``seq_lens[b]`` long; ``prefill_len`` holds every state row's prompt
    length."""
    return Case(
        kernel=NAME,
        arrays={
            "num_sampled": np.asarray(sampled, dtype=np.int64).astype(np.int32),
            "seq_lens": np.asarray(seq_lens, dtype=np.int64).astype(np.int32),
            "cu_num_logits": cumulative(logits),
            "idx_mapping": np.asarray(rows, dtype=np.int64),
            "prefill_len": np.asarray(prefill_len, dtype=np.int64).astype(np.int32),
        },
        scalars={"num_reqs": len(rows)},
        launch={},
    )
