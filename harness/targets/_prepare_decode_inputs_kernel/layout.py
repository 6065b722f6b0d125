"""How a case of ``_prepare_decode_inputs_kernel`` is built (docs/CONTRACT.md §26.1): per row the
target's sequence length and rejected count (the row's accepted sequence ``seq``), the
speculator's first draft token of it, and the drafter's buffers as its prefill left them
(``positions[b] = seq - 1``, ``sample_src_positions[b] = seq``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case

NAME = "_prepare_decode_inputs_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


def build(seq: Sequence[int], rejected: Sequence[int], draft_tokens: np.ndarray, max_model_len: int,
          max_num_reqs: int, advance: bool = True, positions: np.ndarray | None = None,
          sample_src: np.ndarray | None = None) -> Case:
    """Row ``b`` accepted ``seq[b]`` tokens after rejecting ``rejected[b]``; ``draft_tokens`` is
    the speculator's ``[max_num_reqs, K]`` table; ``positions`` and ``sample_src`` (default: as
    the drafter's prefill leaves them, then 0 past the batch) its buffers."""
    B = len(seq)
    seq = np.asarray(seq, dtype=np.int64)
    if positions is None:
        positions = np.concatenate([seq - 1, np.zeros(max_num_reqs - B + 3, np.int64)])
    if sample_src is None:
        sample_src = np.concatenate([seq, np.zeros(max_num_reqs - B, np.int64)])
    return Case(
        kernel=NAME,
        arrays={
            "draft_tokens": np.ascontiguousarray(draft_tokens, dtype=np.int64),
            "target_seq_lens": (seq + np.asarray(rejected, dtype=np.int64)).astype(np.int32),
            "num_rejected": np.asarray(rejected, dtype=np.int64).astype(np.int32),
            "positions": np.asarray(positions, dtype=np.int64),
            "sample_src_positions": np.asarray(sample_src, dtype=np.int64),
        },
        scalars={"max_model_len": int(max_model_len), "max_num_reqs": int(max_num_reqs), "num_reqs": B,
                 "ADVANCE_DRAFT_POSITIONS": bool(advance)},
        launch={"BLOCK_SIZE": None},
    )
