"""How a case of ``target_dependent_ar_prepare_prefill_inputs_kernel`` is built (docs/CONTRACT.md
§25.1): the target step's batch (its input ids, positions, query ranges, sequence lengths), what
the rejection sampler left per row (sampled and rejected counts), and the state the drafter reads
(the last sampled token, the next prompt token)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2 import cumulative

NAME = "target_dependent_ar_prepare_prefill_inputs_kernel"
"""The target's name: vLLM's ``_prepare_prefill_inputs_kernel`` of
``spec_decode/target_dependent_ar/speculator.py`` (``input_batch.py``'s has the same name:
docs/CONTRACT.md §14, §25)."""
FUNCTION = "_prepare_prefill_inputs_kernel"


@dataclass(frozen=True)
class Row:
    """One batch row: state row ``s``, ``qlen`` tokens from computed count ``c``, ``sampled``
    and ``rejected`` counts (0 and 0 for a row still prefilling)."""

    s: int
    qlen: int
    c: int
    sampled: int
    rejected: int


def build(rows: Sequence[Row], ids: np.ndarray, last_sampled: np.ndarray, next_prefill: np.ndarray,
          max_num_reqs: int) -> Case:
    """The case of ``rows``: ``ids`` the target's input ids (one per token), ``last_sampled``
    (``[R, 1]`` int64) and ``next_prefill`` (``[n, R]`` int32) the state's; positions ``c + i``."""
    qlens = [r.qlen for r in rows]
    pos = np.concatenate([r.c + np.arange(r.qlen) for r in rows]) if rows else np.zeros(0)
    return Case(
        kernel=NAME,
        arrays={
            "target_input_ids": np.asarray(ids, dtype=np.int64).astype(np.int32),
            "target_positions": np.asarray(pos, dtype=np.int64),
            "idx_mapping": np.asarray([r.s for r in rows], dtype=np.int64),
            "last_sampled": np.asarray(last_sampled, dtype=np.int64).reshape(-1, 1),
            "next_prefill_tokens": np.ascontiguousarray(next_prefill, dtype=np.int32),
            "num_sampled": np.asarray([r.sampled for r in rows], dtype=np.int64).astype(np.int32),
            "num_rejected": np.asarray([r.rejected for r in rows], dtype=np.int64).astype(np.int32),
            "query_start_loc": cumulative(qlens),
            "seq_lens": np.asarray([r.c + r.qlen for r in rows], dtype=np.int64).astype(np.int32),
        },
        scalars={"max_num_reqs": int(max_num_reqs), "num_reqs": len(rows)},
        launch={"BLOCK_SIZE": None},
    )


def rows_of(case: Case) -> list[Row]:
    """The rows of ``case`` (as :func:`build` takes them)."""
    a = case.arrays
    q = a["query_start_loc"].astype(np.int64)
    return [Row(int(a["idx_mapping"][b]), int(q[b + 1] - q[b]), int(a["seq_lens"][b]) - int(q[b + 1] - q[b]),
                int(a["num_sampled"][b]), int(a["num_rejected"][b])) for b in range(len(q) - 1)]
