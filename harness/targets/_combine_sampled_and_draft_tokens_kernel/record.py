"""``_combine_sampled_and_draft_tokens_kernel``: docs/CONTRACT.md §16.

Every step, Model Runner V2 writes each row's logits indices (the last ``nl_b`` tokens of its
query) and, for a row past its prompt, its last sampled token and its draft tokens into the
input ids (the prompt's tail kept where the step starts inside it). Launched as vLLM's
``combine_sampled_and_draft_tokens`` launches it (grid ``(B,)``, ``BLOCK_SIZE =
next_power_of_2(K + NUM_NEW_SAMPLED_TOKENS)``).
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    I32,
    I64,
    INPUT_BATCH,
    V2Target,
    check_batch,
    check_cu,
    need,
    npow2,
    only,
    row_of,
    v2_oracles,
)
from . import edges
from .layout import NAME


class CombineSampledAndDraftTokens(V2Target):
    state_index = ("idx_mapping",)
    per_state = ("last_sampled_tokens", "prefill_len", "draft_tokens")
    name = NAME
    runner = "V2"
    module = INPUT_BATCH
    function = NAME
    section = 16
    launcher = "launch_combine_sampled_and_draft_tokens"
    parameters = ("input_ids_ptr", "idx_mapping_ptr", "last_sampled_tokens_ptr", "query_start_loc_ptr",
                  "seq_lens_ptr", "prefill_len_ptr", "draft_tokens_ptr", "draft_tokens_stride", "cu_num_logits_ptr",
                  "logits_indices_ptr", "BLOCK_SIZE", "NUM_NEW_SAMPLED_TOKENS")
    inputs = {"idx_mapping": I64, "last_sampled_tokens": I64, "query_start_loc": I32, "seq_lens": I32,
              "prefill_len": I32, "draft_tokens": I64, "cu_num_logits": I32}
    scalar_names = ("num_reqs",)
    launch_names = ("BLOCK_SIZE", "NUM_NEW_SAMPLED_TOKENS")
    per_row = {"idx_mapping": 0, "seq_lens": 0, "cu_num_logits": 1}
    features = {
        "prefilling_row": "a row still in its prompt (seq_len <= prefill_len): its logits indices only",
        "prompt_tail_row": "a row whose logits start inside its prompt: the bonus slot keeps the prompt token",
        "decoding_row": "a row past its prompt: its last sampled token written",
        "drafts_written": "a decoding row with drafts (written after the bonus slot)",
        "decoding_without_drafts": "a decoding row without drafts",
        "query_longer_than_logits": "a row whose query holds more tokens than its logits (a chunk)",
        "block_wider": "a block wider than K + 1 (masked lanes)",
        "permuted_state_rows": "a batch row whose state row is not its own index",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "ids_past_32767": "a token id past 32767 written (vocabularies of 151936 and 262144)",
        "offsets_past_32767": "a query ending past token 32767 (max_num_batched_tokens of 32k and more)",
    }
    extremes = ("ids_past_32767", "offsets_past_32767")
    oracle_functions = v2_oracles("combine_sampled_and_draft_tokens")

    def resolved(self, case: Case) -> dict[str, int]:
        new = case.launch.get("NUM_NEW_SAMPLED_TOKENS")
        new = 1 if new is None else new
        block = case.launch.get("BLOCK_SIZE")
        return {"NUM_NEW_SAMPLED_TOKENS": new,
                "BLOCK_SIZE": npow2(case.arrays["draft_tokens"].shape[1] + new) if block is None else block}

    def production_rules(self, case: Case) -> None:
        """§16.2: distinct state rows; each row's logits ``d_b + 1`` (``0 <= d_b <= K``) inside
        its query; ``seq_lens = c + qlen`` with ``c >= 0``; prompts ``>= 1``; ids of a vocabulary;
        vLLM's block and ``NUM_NEW_SAMPLED_TOKENS = 1``."""
        a = case.arrays
        only(a, set(self.inputs))
        drafts = need(a, "draft_tokens", I64, ndim=2)
        R, K = drafts.shape
        if not 1 <= K <= 32:
            raise ContractViolation("arrays.draft_tokens", "must be [max_num_reqs, K] with 1 <= K <= 32")
        batch = check_batch(case, R)
        last = need(a, "last_sampled_tokens", I64, (R, 1))
        prefill = need(a, "prefill_len", I32, (R,))
        seq = need(a, "seq_lens", I32, (batch.B,)).astype(np.int64)
        nl = check_cu(case, batch.B, 1, K + 1)
        if np.any(batch.qlen < nl):
            raise ContractViolation("arrays.query_start_loc", "every row's query must hold its logits")
        if np.any(seq < batch.qlen) or np.any(prefill < 1):
            raise ContractViolation("arrays.seq_lens", "must be c + qlen (c >= 0), prompts of one token or more")
        for n, v in (("last_sampled_tokens", last), ("draft_tokens", drafts)):
            if np.any((v < 0) | (v >= 262144)):
                raise ContractViolation(f"arrays.{n}", "must hold token ids in [0, 262144)")
        for f in ("BLOCK_SIZE", "NUM_NEW_SAMPLED_TOKENS"):
            if case.launch.get(f) is not None:
                raise ContractViolation(f"launch.{f}", "must be null (vLLM's choice)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        s = a["idx_mapping"]
        q = a["query_start_loc"].astype(np.int64)
        qlen = np.diff(q)
        nl = np.diff(a["cu_num_logits"].astype(np.int64))
        new = self.resolved(case)["NUM_NEW_SAMPLED_TOKENS"]
        d = nl - new
        seq = a["seq_lens"].astype(np.int64)
        L = a["prefill_len"].astype(np.int64)[s]
        past = seq > L
        bonus = past & (seq - nl >= L) & (new > 0)
        ids = np.concatenate([a["last_sampled_tokens"][s[bonus], 0]] + [a["draft_tokens"][s[b], : d[b]]
                                                                       for b in np.flatnonzero(past & (d > 0))])
        B, K = len(s), a["draft_tokens"].shape[1]
        checks = {
            "prefilling_row": bool(np.any(~past)),
            "prompt_tail_row": bool(np.any(past & (seq - nl < L))),
            "decoding_row": bool(np.any(bonus)),
            "drafts_written": bool(np.any(past & (d > 0))),
            "decoding_without_drafts": bool(np.any(bonus & (d == 0))),
            "query_longer_than_logits": bool(np.any(qlen > nl)),
            "block_wider": npow2(K + new) > K + new,
            "permuted_state_rows": bool(np.any(s != np.arange(B))),
            "several_rows": B > 1,
            "many_requests": B > 64,
            "ids_past_32767": bool(np.any(ids > INT16_MAX)),
            "offsets_past_32767": bool(q[-1] > INT16_MAX),
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        T = int(case.arrays["query_start_loc"][-1])
        N = int(case.arrays["cu_num_logits"][-1])
        return {"input_ids": (I32, (max(T, 0),)), "logits_indices": (I64, (max(N, 0),))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        if array == "input_ids":
            return row_of(case.arrays["query_start_loc"][:-1].astype(np.int64), index), "the row's input ids"
        return row_of(case.arrays["cu_num_logits"][:-1].astype(np.int64), index), "the row's logits indices"


TARGET = CombineSampledAndDraftTokens()
