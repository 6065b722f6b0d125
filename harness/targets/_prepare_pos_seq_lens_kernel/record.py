"""``_prepare_pos_seq_lens_kernel``: docs/CONTRACT.md §15.

Every step, Model Runner V2 computes each scheduled token's position (its request's
computed-token count plus its offset in the chunk) and each row's sequence length, and zeroes
the sequence lengths past the batch for full CUDA graphs. Launched as vLLM's
``prepare_pos_seq_lens`` launches it (grid ``(B + 1,)``: the last program pads).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT32_MAX
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    BLOCK,
    I32,
    I64,
    INPUT_BATCH,
    V2Target,
    check_batch,
    need,
    only,
    row_of,
    v2_oracles,
)
from . import edges
from .layout import NAME


class PreparePosSeqLens(V2Target):
    name = NAME
    runner = "V2"
    module = INPUT_BATCH
    function = NAME
    section = 15
    launcher = "launch_prepare_pos_seq_lens"
    parameters = ("pos_ptr", "seq_lens_ptr", "idx_mapping_ptr", "query_start_loc_ptr", "num_computed_tokens_ptr",
                  "max_num_reqs", "BLOCK_SIZE")
    inputs = {"idx_mapping": I64, "query_start_loc": I32, "num_computed_tokens": I32}
    scalar_names = ("num_reqs", "max_num_reqs")
    launch_names = ("BLOCK_SIZE",)
    per_row = {"idx_mapping": 0}
    features = {
        "decode_rows": "a row of one token",
        "chunk_rows": "a row of several tokens (drafts, a prefill chunk)",
        "padding": "max_num_reqs > B: the last program zeroes the lengths past the batch",
        "no_padding": "max_num_reqs = B: nothing to pad",
        "permuted_state_rows": "a batch row whose state row is not its own index",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "chunk_past_1024": "a chunk of more than 1024 tokens (two blocks or more)",
        "padding_past_1024": "more than 1024 lengths to zero (max_num_seqs of 2048 and more)",
    }
    extremes = ("chunk_past_1024", "padding_past_1024")
    oracle_functions = v2_oracles("prepare_pos_seq_lens")

    def programs(self, case: Case) -> int:
        return int(case.scalars["num_reqs"]) + 1

    def production_rules(self, case: Case) -> None:
        """§15.2: distinct state rows, rows of one token or more, counts ``>= 0`` that stay within
        ``max_model_len`` (< 2**31) with their chunks, ``max_num_reqs`` the state's (and the
        ``seq_lens`` buffer's) size, vLLM's block."""
        only(case.arrays, set(self.inputs))
        counts = need(case.arrays, "num_computed_tokens", I32, ndim=1)
        batch = check_batch(case, counts.shape[0])
        c = counts.astype(np.int64)[batch.s]
        if np.any(counts < 0) or np.any(c + batch.qlen > INT32_MAX):
            raise ContractViolation("arrays.num_computed_tokens", "must be >= 0, a count plus its chunk within "
                                    "max_model_len (< 2**31)")
        if case.scalars.get("max_num_reqs") != counts.shape[0]:
            raise ContractViolation("scalars.max_num_reqs", "must be seq_lens.shape[0], the state's rows "
                                    "(num_computed_tokens' length)")
        if case.launch.get("BLOCK_SIZE") is not None:
            raise ContractViolation("launch.BLOCK_SIZE", "must be null (vLLM's 1024)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        s = a["idx_mapping"]
        qlen = np.diff(a["query_start_loc"].astype(np.int64))
        B, M = len(s), case.scalars["max_num_reqs"]
        checks = {
            "decode_rows": bool(np.any(qlen == 1)),
            "chunk_rows": bool(np.any(qlen > 1)),
            "padding": M > B,
            "no_padding": M == B,
            "permuted_state_rows": bool(np.any(s != np.arange(B))),
            "several_rows": B > 1,
            "many_requests": B > 64,
            "chunk_past_1024": bool(np.any(qlen > BLOCK)),
            "padding_past_1024": M - B > BLOCK,
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        T = int(case.arrays["query_start_loc"][-1])
        return {"pos": (I64, (max(T, 0),)), "seq_lens": (I32, (len(case.arrays["num_computed_tokens"]),))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        B = int(case.scalars["num_reqs"])
        if array == "seq_lens":
            return (index, "the row's length") if index < B else (None, "a length past the batch (padding)")
        return row_of(case.arrays["query_start_loc"][:-1].astype(np.int64), index), "the row's positions"

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        """Every row one token long."""
        q = case.arrays["query_start_loc"]
        if q[-1] != len(q) - 1:
            yield case.replace(arrays={"query_start_loc": np.arange(len(q), dtype=np.int32)})


TARGET = PreparePosSeqLens()
