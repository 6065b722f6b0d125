"""What a caller of ``eagle_prepare_next_token_padded_kernel`` relies on (docs/CONTRACT.md §3): the properties ``eaglefuzz audit``
checks on one implementation's outputs (:mod:`...checking.audit`). A backup next token of -1
(PR #38556) needs no draws of its own: the tiers' backups (any int32) include it."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def _nt(case: Case) -> tuple[int, int, int, np.ndarray]:
    s = case.scalars
    R = int(s["num_reqs"])
    return R, int(s["num_sampled_tokens_per_req"]), int(s["vocab_size"]), case.arrays["discard_request_mask"][:R]


def nt_count_within_columns(case: Case, o: Observation) -> str | None:
    R, S, _, _ = _nt(case)
    c = o.out["valid_sampled_tokens_count"]
    for r in range(R):
        if not 0 <= c[r] <= S:
            return f"valid_sampled_tokens_count[{r}] = {int(c[r])}, outside [0, S = {S}]"
    return None


def nt_kept_has_valid(case: Case, o: Observation) -> str | None:
    R, _, _, disc = _nt(case)
    c = o.out["valid_sampled_tokens_count"]
    for r in range(R):
        if not disc[r] and c[r] < 1:
            return (f"request {r} is kept but valid_sampled_tokens_count = {int(c[r])}: with drafts, "
                    "prepare_inputs_padded then treats it as discarded (rejected = d + 1)")
    return None


def nt_next_in_vocab(case: Case, o: Observation) -> str | None:
    R, _, vocab, disc = _nt(case)
    nxt, c = o.out["next_token_ids"], o.out["valid_sampled_tokens_count"]
    for r in range(R):
        if not disc[r] and c[r] >= 1 and not 0 <= nxt[r] < vocab:
            return f"next_token_ids[{r}] = {int(nxt[r])}, a sampled id outside [0, vocab_size = {vocab})"
    return None


def nt_discarded_uses_backup(case: Case, o: Observation) -> str | None:
    R, _, _, disc = _nt(case)
    nxt, c = o.out["next_token_ids"], o.out["valid_sampled_tokens_count"]
    backup = case.arrays["backup_next_token_ids"]
    for r in range(R):
        if disc[r] and (c[r] != 0 or nxt[r] != backup[r]):
            return f"request {r} is discarded but gets count {int(c[r])} and next {int(nxt[r])} (backup {int(backup[r])})"
    return None


def nt_every_next_in_vocab(case: Case, o: Observation) -> str | None:
    R, _, vocab, disc = _nt(case)
    nxt = o.out["next_token_ids"]
    for r in range(R):
        if disc[r] and not 0 <= nxt[r] < vocab:
            return (f"next_token_ids[{r}] = {int(nxt[r])} (request {r} is discarded: its backup token), outside "
                    f"[0, vocab_size = {vocab}): it becomes the drafter's bonus input id")
    return None


PROPERTIES: tuple[Property, ...] = (
        Property("count_within_columns", "0 <= valid_sampled_tokens_count <= S", nt_count_within_columns),
        Property("kept_request_has_valid_token", "a kept request gets valid_sampled_tokens_count >= 1 "
                 "(prepare_inputs_padded relies on it for a request with drafts)", nt_kept_has_valid),
        Property("next_token_in_vocab", "a kept request's sampled next token is a vocabulary id in [0, vocab_size)",
                 nt_next_in_vocab),
        Property("discarded_uses_backup", "a discarded request gets count 0 and its backup token",
                 nt_discarded_uses_backup),
        Property("nothing_past_num_reqs", "nothing is written outside the num_reqs entries", nothing_past_num_reqs),
        Property("backup_next_token_in_vocab", "a discarded request's next token (its backup) is a vocabulary id in "
                 "[0, vocab_size)", nt_every_next_in_vocab, hazard_class="backup_token_minus_one", source="PR #38556",
                 rests_on="docs/CONTRACT.md §3.2: backup ids are get_token_id(num_tokens_no_spec - 1), a token of the "
                          "prompt for a discarded (partially prefilled) request (vLLM: "
                          "vllm/v1/spec_decode/llm_base_proposer.py, SpecDecodeBaseProposer.prepare_next_token_ids_padded; "
                          "vllm/v1/worker/gpu_model_runner.py, GPUModelRunner._prepare_inputs); async placeholders are -1"),
    )
"""The properties, in the order the audit reports them."""


AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
