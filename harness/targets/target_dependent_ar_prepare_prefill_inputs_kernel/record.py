"""``target_dependent_ar_prepare_prefill_inputs_kernel``: docs/CONTRACT.md §25.

vLLM's ``_prepare_prefill_inputs_kernel`` of
``vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py``: the first pass of an
EAGLE/MTP drafter over the target step's batch, in the target's padded layout: each row's input
ids shifted by one with its next token (the last sampled one, or the next prompt token
mid-prefill) after its last accepted token; its positions, query start and length; the rest
padded for CUDA graphs. Launched as vLLM's ``prepare_prefill_inputs`` launches it (grid ``(B,)``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...core.case import Case
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    BLOCK,
    I32,
    I64,
    SPECULATOR,
    V2Target,
    check_batch,
    need,
    need_int,
    only,
    row_of,
    v2_oracles,
)
from . import edges
from .layout import FUNCTION, NAME


class TargetDependentARPreparePrefillInputs(V2Target):
    name = NAME
    runner = "V2"
    module = SPECULATOR
    function = FUNCTION
    section = 25
    launcher = "launch_target_dependent_ar_prepare_prefill_inputs"
    parameters = ("last_token_indices_ptr", "draft_current_step_ptr", "draft_input_ids_ptr", "draft_positions_ptr",
                  "draft_query_start_loc_ptr", "draft_seq_lens_ptr", "target_input_ids_ptr", "target_positions_ptr",
                  "idx_mapping_ptr", "last_sampled_ptr", "next_prefill_tokens_ptr", "num_sampled_ptr",
                  "num_rejected_ptr", "query_start_loc_ptr", "seq_lens_ptr", "max_num_reqs", "BLOCK_SIZE")
    inputs = {"target_input_ids": I32, "target_positions": I64, "idx_mapping": I64, "last_sampled": I64,
              "next_prefill_tokens": I32, "num_sampled": I32, "num_rejected": I32, "query_start_loc": I32,
              "seq_lens": I32}
    scalar_names = ("max_num_reqs", "num_reqs")
    launch_names = ("BLOCK_SIZE",)
    per_row = {"idx_mapping": 0, "num_sampled": 0, "num_rejected": 0, "seq_lens": 0}
    per_token = ("target_input_ids", "target_positions")
    features = {
        "chunked_row": "a row still prefilling (nothing sampled): its next token is the prompt's next one",
        "sampled_row": "a row that sampled: its next token is its last sampled one",
        "rejected_tokens": "a row that rejected tokens (their slots keep their values)",
        "nothing_rejected": "a sampled row that rejected nothing",
        "one_token_kept": "a row that keeps one token (no shifted copy)",
        "padding": "max_num_reqs > B: query starts, lengths and indices padded",
        "no_padding": "max_num_reqs = B",
        "permuted_state_rows": "a batch row whose state row is not its own index",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "query_past_1024": "a row keeping more than 1025 tokens (its shifted copy spans blocks)",
        "padding_past_1024": "more than 1024 rows to pad (max_num_seqs of 2048 and more)",
    }
    extremes = ("query_past_1024", "padding_past_1024")
    oracle_functions = v2_oracles("target_dependent_ar_prepare_prefill_inputs")

    def production_rules(self, case: Case) -> None:
        """§25.2: the target batch's arrays (distinct state rows, rows of one token or more,
        positions ``c + i``, lengths ``c + qlen``), ``0 <= num_rejected < qlen``, a row that
        sampled nothing rejected nothing, state buffers of ``max_num_reqs`` rows, token ids of a
        vocabulary, vLLM's block."""
        a = case.arrays
        only(a, set(self.inputs))
        last = need(a, "last_sampled", I64, ndim=2)
        R = last.shape[0]
        batch = check_batch(case, R)
        nxt = need(a, "next_prefill_tokens", I32, ndim=2)
        if last.shape[1] != 1 or nxt.shape[1] != R or not 1 <= nxt.shape[0] <= 64:
            raise ContractViolation("arrays.next_prefill_tokens", "must be [n, max_num_reqs] beside last_sampled "
                                    "[max_num_reqs, 1]")
        if need_int(case.scalars, "max_num_reqs", batch.B) != R:
            raise ContractViolation("scalars.max_num_reqs", "must be the state's rows (last_sampled's)")
        ns = need(a, "num_sampled", I32, (batch.B,)).astype(np.int64)
        nr = need(a, "num_rejected", I32, (batch.B,)).astype(np.int64)
        seq = need(a, "seq_lens", I32, (batch.B,)).astype(np.int64)
        ids = need(a, "target_input_ids", I32, (batch.tokens,))
        pos = need(a, "target_positions", I64, (batch.tokens,))
        if np.any(nr < 0) or np.any(nr >= batch.qlen) or np.any(ns < 0) or np.any((ns == 0) & (nr != 0)):
            raise ContractViolation("arrays.num_rejected", "must be in [0, qlen - 1], 0 for a row that sampled nothing")
        c = seq - batch.qlen
        want = np.repeat(c, batch.qlen) + (np.arange(batch.tokens) - np.repeat(batch.qs, batch.qlen))
        if np.any(c < 0) or not np.array_equal(pos, want):
            raise ContractViolation("arrays.target_positions", "must be each row's c, c + 1, ... (seq_lens = c + qlen)")
        for n, v in (("target_input_ids", ids), ("last_sampled", last[batch.s]), ("next_prefill_tokens", nxt)):
            if np.any((v < 0) | (v >= 262144)):
                raise ContractViolation(f"arrays.{n}", "must hold token ids in [0, 262144)")
        if case.launch.get("BLOCK_SIZE") is not None:
            raise ContractViolation("launch.BLOCK_SIZE", "must be null (vLLM's 1024)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        s = a["idx_mapping"]
        qlen = np.diff(a["query_start_loc"].astype(np.int64))
        ns, nr = a["num_sampled"].astype(np.int64), a["num_rejected"].astype(np.int64)
        keep = qlen - nr
        B, M = len(s), case.scalars["max_num_reqs"]
        checks = {
            "chunked_row": bool(np.any(ns <= 0)),
            "sampled_row": bool(np.any(ns > 0)),
            "rejected_tokens": bool(np.any(nr > 0)),
            "nothing_rejected": bool(np.any((ns > 0) & (nr == 0))),
            "one_token_kept": bool(np.any(keep == 1)),
            "padding": M > B,
            "no_padding": M == B,
            "permuted_state_rows": bool(np.any(s != np.arange(B))),
            "several_rows": B > 1,
            "many_requests": B > 64,
            "query_past_1024": bool(np.any(keep > BLOCK + 1)),
            "padding_past_1024": M - B > BLOCK,
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        T = int(case.arrays["query_start_loc"][-1])
        M = int(case.scalars["max_num_reqs"])
        return {"last_token_indices": (I64, (M,)), "draft_current_step": (I64, (1,)), "draft_input_ids": (I32, (T,)),
                "draft_positions": (I64, (T,)), "draft_query_start_loc": (I32, (M + 1,)), "draft_seq_lens": (I32, (M,))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        B = int(case.scalars["num_reqs"])
        if array in ("draft_input_ids", "draft_positions"):
            return row_of(case.arrays["query_start_loc"][:-1].astype(np.int64), index), "the row's tokens"
        if array == "draft_current_step":
            return None, "the draft step"
        return (index, "the row's entry") if index < B else (None, "padding past the batch")

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        """Nothing rejected."""
        if np.any(case.arrays["num_rejected"] != 0):
            yield case.replace(arrays={"num_rejected": np.zeros_like(case.arrays["num_rejected"])})


TARGET = TargetDependentARPreparePrefillInputs()
