"""How a case of ``_update_draft_inputs_kernel`` is built (docs/CONTRACT.md §27.1): the draft step
(``current_draft_step``, of ``num_speculative_steps``), each row's sampled draft and the draft
model's hidden states, and the drafter's buffers as the previous step left them (positions,
lengths, sample keys)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case

NAME = "_update_draft_inputs_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


def build(step: int, K: int, drafts: Sequence[int], hidden: np.ndarray, positions: Sequence[int],
          seq_lens: Sequence[int], sample_src: Sequence[int], max_model_len: int, advance: bool = True,
          hidden_size: int | None = None) -> Case:
    """Step ``step`` of ``K``; row ``b`` sampled ``drafts[b]``; ``hidden`` is the draft model's
    ``[tokens, hidden]`` output (float32: the kernel copies bits, whatever the dtype)."""
    return Case(
        kernel=NAME,
        arrays={
            "draft_tokens": np.asarray(drafts, dtype=np.int64),
            "current_draft_step": np.asarray([step], dtype=np.int64),
            "hidden_states": np.ascontiguousarray(hidden, dtype=np.float32),
            "positions": np.asarray(positions, dtype=np.int64),
            "sample_src_positions": np.asarray(sample_src, dtype=np.int64),
            "seq_lens": np.asarray(seq_lens, dtype=np.int64).astype(np.int32),
        },
        scalars={"max_model_len": int(max_model_len), "num_speculative_steps": int(K), "num_reqs": len(drafts),
                 "ADVANCE_DRAFT_POSITIONS": bool(advance)},
        launch={"hidden_size": hidden_size, "BLOCK_SIZE": None},
    )


def state(seq: np.ndarray, extra: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The drafter's positions, lengths and sample keys for accepted lengths ``seq`` (after
    ``k`` draft steps: position ``seq - 1``, key ``seq``), ``extra`` more entries past the batch."""
    pad = np.zeros(extra, np.int64)
    return np.concatenate([seq - 1, pad]), np.concatenate([seq, pad]), np.concatenate([seq, pad])
