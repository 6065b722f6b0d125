"""How a case of ``_post_update_kernel`` is built (docs/CONTRACT.md §19.1): per batch row its
state row (``-1``: masked), query length, and what the sampler left (its sampled tokens, sampled
and rejected counts); the state it updates (computed-token counts, history lengths, the token
history, the penalties' output-token counts); on a non-last pipeline rank the drafts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2 import cumulative

NAME = "_post_update_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


@dataclass(frozen=True)
class State:
    """The request state the kernel updates: ``counts`` (computed tokens), ``total_len`` (history
    lengths), ``history`` (``[R, max_model_len]`` token ids), ``bins`` (``[R, V]`` output-token
    counts, or ``None``: not the last pipeline rank)."""

    counts: np.ndarray
    total_len: np.ndarray
    history: np.ndarray
    bins: np.ndarray | None


def build(rows: Sequence[int], qlens: Sequence[int] | None, sampled: np.ndarray, num_sampled: Sequence[int],
          num_rejected: Sequence[int], state: State, drafts: np.ndarray | None = None) -> Case:
    """Row ``b`` (state row ``rows[b]``, ``-1``: masked) of ``qlens[b]`` tokens (``None``: no
    ``query_start_loc``) sampled ``num_sampled[b]`` tokens of ``sampled[b]`` and rejected
    ``num_rejected[b]``; ``drafts`` (``[B, D]``) are a non-last pipeline rank's."""
    arrays = {
        "idx_mapping": np.asarray(rows, dtype=np.int64),
        "num_computed_tokens": np.asarray(state.counts, dtype=np.int64).astype(np.int32),
        "sampled_tokens": np.ascontiguousarray(sampled, dtype=np.int64),
        "num_sampled": np.asarray(num_sampled, dtype=np.int64).astype(np.int32),
        "num_rejected": np.asarray(num_rejected, dtype=np.int64).astype(np.int32),
        "all_token_ids": np.ascontiguousarray(state.history, dtype=np.int64).astype(np.int32),
        "total_len": np.asarray(state.total_len, dtype=np.int64).astype(np.int32),
    }
    if qlens is not None:
        arrays["query_start_loc"] = cumulative(qlens)
    if state.bins is not None:
        arrays["output_bin_counts"] = np.ascontiguousarray(state.bins, dtype=np.int64).astype(np.int32)
    if drafts is not None:
        arrays["draft_tokens"] = np.ascontiguousarray(drafts, dtype=np.int64)
    D = 0 if drafts is None else int(np.asarray(drafts).shape[1])
    return Case(kernel=NAME, arrays=arrays, scalars={"num_reqs": len(rows), "num_draft_tokens": D}, launch={})
