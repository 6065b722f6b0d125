"""How a case of ``input_batch_prepare_prefill_inputs_kernel`` is built (docs/CONTRACT.md §14.1):
the batch's state rows and chunks, the state's token table, prompt lengths and computed-token
counts, and how many lookahead tokens the drafter reads."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2 import cumulative

NAME = "input_batch_prepare_prefill_inputs_kernel"
"""The target's name: vLLM's ``_prepare_prefill_inputs_kernel`` of ``input_batch.py`` (the
speculator's has the same name: docs/CONTRACT.md §14, §25)."""
FUNCTION = "_prepare_prefill_inputs_kernel"


def build(rows: Sequence[int], qlens: Sequence[int], table: np.ndarray, prefill_len: Sequence[int],
          counts: Sequence[int], num_lookahead: int, lookahead_block: int | None = None) -> Case:
    """Row ``b`` of ``qlens[b]`` tokens names state row ``rows[b]``; ``table`` is the state's
    ``all_token_ids`` (``[max_num_reqs, max_model_len]``), ``prefill_len`` and ``counts`` its
    prompt lengths and computed-token counts; ``num_lookahead`` rows of ``next_prefill_tokens``."""
    return Case(
        kernel=NAME,
        arrays={
            "idx_mapping": np.asarray(rows, dtype=np.int64),
            "query_start_loc": cumulative(qlens),
            "all_token_ids": np.ascontiguousarray(table, dtype=np.int32),
            "prefill_len": np.asarray(prefill_len, dtype=np.int64).astype(np.int32),
            "num_computed_tokens": np.asarray(counts, dtype=np.int64).astype(np.int32),
        },
        scalars={"num_reqs": len(rows), "num_lookahead": int(num_lookahead)},
        launch={"LOOKAHEAD_BLOCK": lookahead_block, "BLOCK_SIZE": None},
    )


def state(rng_ints, R: int, W: int) -> np.ndarray:
    """A ``[R, W]`` token table of ids below 32000 (``rng_ints(n, lo, hi)`` draws ``n`` ints)."""
    return np.asarray(rng_ints(R * W, 0, 31999), dtype=np.int64).reshape(R, W)
