"""``_post_update_num_computed_tokens_kernel``: docs/CONTRACT.md §20.

Model Runner V2's bookkeeping after a pooling model's step (no sampling): each scheduled
request's computed-token count grows by its query length, in the state row the batch row
names. Launched as vLLM's ``post_update_num_computed_tokens`` launches it (grid ``(B,)``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, INT32_MAX
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    I32,
    INPUT_BATCH,
    V2Target,
    check_batch,
    need,
    only,
    state_row,
    v2_oracles,
)
from . import edges
from .layout import NAME


class PostUpdateNumComputedTokens(V2Target):
    name = NAME
    runner = "V2"
    module = INPUT_BATCH
    function = NAME
    section = 20
    launcher = "launch_post_update_num_computed_tokens"
    parameters = ("idx_mapping_ptr", "num_computed_tokens_ptr", "query_start_loc_ptr")
    inputs = {"idx_mapping": np.dtype(np.int64), "num_computed_tokens": I32, "query_start_loc": I32}
    inout = frozenset({"num_computed_tokens"})
    scalar_names = ("num_reqs",)
    per_row = {"idx_mapping": 0}
    features = {
        "decode_rows": "a row of one token (a decode step)",
        "chunk_rows": "a row of several tokens (a prompt or a chunk of one)",
        "permuted_state_rows": "a batch row whose state row is not its own index",
        "untouched_state_rows": "state rows no batch row names (max_num_reqs > B): they keep their counts",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes (the tour reaches them on every default run)
        "counts_past_32767": "a count past 32767 after the update (max_model_len of 32k and more)",
        "offsets_past_32767": "query_start_loc past 32767 (max_num_batched_tokens of 32k and more)",
    }
    extremes = ("counts_past_32767", "offsets_past_32767")
    oracle_functions = v2_oracles("post_update_num_computed_tokens")

    def production_rules(self, case: Case) -> None:
        """§20.2: distinct state rows, rows of one token or more, counts ``>= 0`` whose sums
        stay in int32 (below ``max_model_len``)."""
        only(case.arrays, set(self.inputs))
        counts = need(case.arrays, "num_computed_tokens", I32, ndim=1)
        batch = check_batch(case, counts.shape[0])
        c = counts.astype(np.int64)[batch.s]
        if np.any(counts < 0) or np.any(c + batch.qlen > INT32_MAX):
            raise ContractViolation("arrays.num_computed_tokens", "must be >= 0, each count plus its query "
                                    "length within max_model_len (< 2**31)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        s = a["idx_mapping"]
        q = a["query_start_loc"].astype(np.int64)
        qlen = np.diff(q)
        after = a["num_computed_tokens"].astype(np.int64)[s] + qlen
        B, R = len(s), len(a["num_computed_tokens"])
        checks = {
            "decode_rows": bool(np.any(qlen == 1)),
            "chunk_rows": bool(np.any(qlen > 1)),
            "permuted_state_rows": bool(np.any(s != np.arange(B))),
            "untouched_state_rows": R > B,
            "several_rows": B > 1,
            "many_requests": B > 64,
            "counts_past_32767": bool(np.any(after > INT16_MAX)),
            "offsets_past_32767": bool(q[-1] > INT16_MAX),
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        b = state_row(case.arrays["idx_mapping"], index)
        return b, "the row's state count" if b is not None else "a state row no batch row names"

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        """Every row one token long."""
        q = case.arrays["query_start_loc"]
        if q[-1] != len(q) - 1:
            yield case.replace(arrays={"query_start_loc": np.arange(len(q), dtype=np.int32)})


TARGET = PostUpdateNumComputedTokens()
