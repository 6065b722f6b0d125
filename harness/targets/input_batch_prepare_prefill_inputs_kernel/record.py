"""``input_batch_prepare_prefill_inputs_kernel``: docs/CONTRACT.md §14.

vLLM's ``_prepare_prefill_inputs_kernel`` of ``vllm/v1/worker/gpu/input_batch.py``: the input
ids of the rows still prefilling, copied from each request's token history, and the next
``num_lookahead`` prompt tokens past this step's chunk (``0`` past the prompt), which the drafter
reads mid-prefill. Launched as vLLM's ``prepare_prefill_inputs`` launches it (grid ``(B,)``,
``LOOKAHEAD_BLOCK = next_power_of_2(num_lookahead)``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    BLOCK,
    I32,
    I64,
    INPUT_BATCH,
    V2Target,
    check_batch,
    need,
    need_int,
    npow2,
    only,
    row_of,
    v2_oracles,
)
from . import edges
from .layout import FUNCTION, NAME


class InputBatchPreparePrefillInputs(V2Target):
    name = NAME
    runner = "V2"
    module = INPUT_BATCH
    function = FUNCTION
    section = 14
    launcher = "launch_input_batch_prepare_prefill_inputs"
    parameters = ("input_ids_ptr", "next_prefill_tokens_ptr", "next_prefill_tokens_stride", "num_lookahead",
                  "idx_mapping_ptr", "query_start_loc_ptr", "all_token_ids_ptr", "all_token_ids_stride",
                  "prefill_lens_ptr", "num_computed_tokens_ptr", "BLOCK_SIZE", "LOOKAHEAD_BLOCK")
    inputs = {"idx_mapping": I64, "query_start_loc": I32, "all_token_ids": I32, "prefill_len": I32,
              "num_computed_tokens": I32}
    scalar_names = ("num_reqs", "num_lookahead")
    launch_names = ("LOOKAHEAD_BLOCK", "BLOCK_SIZE")
    per_row = {"idx_mapping": 0}
    features = {
        "decoding_row": "a row past its prompt (nothing written for it)",
        "first_chunk": "a prefilling row's first chunk (no token computed yet)",
        "later_chunk": "a prefilling row's chunk after computed tokens",
        "last_chunk": "a chunk that ends its prompt (the lookahead is all 0)",
        "lookahead_in_prompt": "a lookahead token inside the prompt (copied)",
        "lookahead_past_prompt": "a lookahead token past the prompt (0)",
        "several_lookahead": "num_lookahead > 1 (parallel drafting, MTP lookahead)",
        "lookahead_block_wider": "LOOKAHEAD_BLOCK wider than num_lookahead (masked lanes)",
        "untouched_state_rows": "state rows no batch row names (their lookahead columns untouched)",
        "permuted_state_rows": "a batch row whose state row is not its own index",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "chunk_past_1024": "a prefill chunk of more than 1024 tokens (two blocks or more)",
        "prompt_past_32767": "a chunk starting past token 32767 of its prompt (long-context prompts)",
    }
    extremes = ("chunk_past_1024", "prompt_past_32767")
    oracle_functions = v2_oracles("input_batch_prepare_prefill_inputs")

    def resolved(self, case: Case) -> dict[str, int]:
        block = case.launch.get("LOOKAHEAD_BLOCK")
        return {"LOOKAHEAD_BLOCK": npow2(case.scalars["num_lookahead"]) if block is None else block}

    def production_rules(self, case: Case) -> None:
        """§14.2: ``all_token_ids`` int32 ``[max_num_reqs, max_model_len]``, distinct state rows,
        rows of one token or more, prompts within the model length, a prefilling row's chunk
        inside its prompt, 1 to 64 lookahead tokens, vLLM's blocks."""
        a = case.arrays
        only(a, set(self.inputs))
        table = need(a, "all_token_ids", I32, ndim=2)
        R, W = table.shape
        batch = check_batch(case, R)
        prefill = need(a, "prefill_len", I32, (R,)).astype(np.int64)
        counts = need(a, "num_computed_tokens", I32, (R,)).astype(np.int64)
        need_int(case.scalars, "num_lookahead", 1, 64)
        if np.any(prefill < 1) or np.any(prefill > W):
            raise ContractViolation("arrays.prefill_len", "must be in [1, max_model_len] (all_token_ids' width)")
        c, L = counts[batch.s], prefill[batch.s]
        pre = c < L
        if np.any(counts < 0) or np.any(c[pre] + batch.qlen[pre] > L[pre]) or np.any(c + batch.qlen > W):
            raise ContractViolation("arrays.num_computed_tokens", "must be >= 0, a prefilling row's chunk inside its "
                                    "prompt, every chunk inside max_model_len")
        for f in ("LOOKAHEAD_BLOCK", "BLOCK_SIZE"):
            if case.launch.get(f) is not None:
                raise ContractViolation(f"launch.{f}", "must be null (vLLM's choice)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        s = a["idx_mapping"]
        q = a["query_start_loc"].astype(np.int64)
        qlen = np.diff(q)
        c = a["num_computed_tokens"].astype(np.int64)[s]
        L = a["prefill_len"].astype(np.int64)[s]
        pre = c < L
        n = case.scalars["num_lookahead"]
        ahead = (c + qlen)[pre, None] + np.arange(n)[None, :]
        B, R = len(s), a["all_token_ids"].shape[0]
        checks = {
            "decoding_row": bool(np.any(~pre)),
            "first_chunk": bool(np.any(pre & (c == 0))),
            "later_chunk": bool(np.any(pre & (c > 0))),
            "last_chunk": bool(np.any(pre & (c + qlen == L))),
            "lookahead_in_prompt": bool(np.any(ahead < L[pre, None])),
            "lookahead_past_prompt": bool(np.any(ahead >= L[pre, None])),
            "several_lookahead": n > 1,
            "lookahead_block_wider": npow2(n) > n,
            "untouched_state_rows": R > B,
            "permuted_state_rows": bool(np.any(s != np.arange(B))),
            "several_rows": B > 1,
            "many_requests": B > 64,
            "chunk_past_1024": bool(np.any(pre & (qlen > BLOCK))),
            "prompt_past_32767": bool(np.any(pre & (c > INT16_MAX))),
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        T = int(case.arrays["query_start_loc"][-1])
        R = case.arrays["all_token_ids"].shape[0]
        return {"input_ids": (I32, (max(T, 0),)), "next_prefill_tokens": (I32, (case.scalars["num_lookahead"], R))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        if array == "input_ids":
            return row_of(case.arrays["query_start_loc"][:-1].astype(np.int64), index), "the row's input ids"
        R = case.arrays["all_token_ids"].shape[0]
        hit = np.flatnonzero(case.arrays["idx_mapping"] == index % R)
        return (int(hit[0]) if hit.size else None), f"lookahead token {index // R} of state row {index % R}"

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        """One lookahead token."""
        if case.scalars["num_lookahead"] > 1:
            yield case.replace(scalars={"num_lookahead": 1})


TARGET = InputBatchPreparePrefillInputs()
