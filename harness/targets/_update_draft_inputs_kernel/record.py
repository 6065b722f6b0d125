"""``_update_draft_inputs_kernel``: docs/CONTRACT.md §27.

After each draft step of a multi-step drafter (EAGLE, MTP), each row's sampled token is stored
as its draft number ``step`` and, unless it was the last step, becomes the next step's input,
with the draft model's hidden state copied over and the position, length and sampling key
moved on (clamped at the model's length). Launched as vLLM's ``update_draft_inputs`` launches
it (grid ``(B,)``, ``hidden_size = hidden_states.shape[1]``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT32_MAX, MAX_NUM_SEQS
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    BLOCK,
    F32,
    I32,
    I64,
    SPECULATOR,
    V2Target,
    need,
    need_int,
    only,
    v2_oracles,
)
from . import edges
from .layout import NAME


class UpdateDraftInputs(V2Target):
    name = NAME
    runner = "V2"
    module = SPECULATOR
    function = NAME
    section = 27
    launcher = "launch_update_draft_inputs"
    parameters = ("output_draft_tokens_ptr", "output_draft_tokens_stride", "next_input_hidden_states_ptr",
                  "next_input_hidden_states_stride", "input_ids_ptr", "positions_ptr", "sample_src_positions_ptr",
                  "seq_lens_ptr", "draft_tokens_ptr", "current_draft_step_ptr", "hidden_states_ptr",
                  "hidden_states_stride", "hidden_size", "max_model_len", "num_speculative_steps", "BLOCK_SIZE",
                  "ADVANCE_DRAFT_POSITIONS")
    inputs = {"positions": I64, "sample_src_positions": I64, "seq_lens": I32, "draft_tokens": I64,
              "current_draft_step": I64, "hidden_states": F32}
    inout = frozenset({"positions", "sample_src_positions", "seq_lens"})
    scalar_names = ("max_model_len", "num_speculative_steps", "num_reqs", "ADVANCE_DRAFT_POSITIONS")
    launch_names = ("hidden_size", "BLOCK_SIZE")
    features = {
        "middle_step": "a step before the last: the next step's inputs written",
        "last_step": "the last step (K - 1): only the draft written",
        "advancing": "ADVANCE_DRAFT_POSITIONS: positions and lengths move on",
        "constant_positions": "no ADVANCE_DRAFT_POSITIONS (Gemma4's MTP)",
        "position_clamped": "a row at the model's length: its position stays max_model_len - 1",
        "length_clamped": "a row at the model's length: its length stays max_model_len",
        "signed_zeros_and_subnormals": "hidden states holding -0.0 or subnormals (copied bit for bit)",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "hidden_past_1024": "a hidden state wider than 1024 (every model's: the copy spans blocks)",
        "beyond_1024_rows": "more than 1024 rows (max_num_seqs of 1024 and more)",
    }
    extremes = ("hidden_past_1024", "beyond_1024_rows")
    oracle_functions = v2_oracles("update_draft_inputs")

    def resolved(self, case: Case) -> dict[str, int]:
        hs = case.launch.get("hidden_size")
        return {"hidden_size": case.arrays["hidden_states"].shape[1] if hs is None else hs}

    def production_rules(self, case: Case) -> None:
        """§27.2: ``1 <= step <= K - 1`` (``2 <= K <= 32``), ids of a vocabulary, finite hidden
        states of one row per batch row or more, positions and lengths as the previous step left
        them (``positions <= max_model_len - 1``, ``1 <= seq_lens <= max_model_len``), vLLM's
        launch."""
        a = case.arrays
        only(a, set(self.inputs))
        B = need_int(case.scalars, "num_reqs", 1)
        K = need_int(case.scalars, "num_speculative_steps", 2, 32)
        M = need_int(case.scalars, "max_model_len", 1, INT32_MAX - 1)
        if not isinstance(case.scalars.get("ADVANCE_DRAFT_POSITIONS"), bool):
            raise ContractViolation("scalars.ADVANCE_DRAFT_POSITIONS", "must be true or false")
        step = int(need(a, "current_draft_step", I64, (1,))[0])
        if not 1 <= step <= K - 1:
            raise ContractViolation("arrays.current_draft_step", "must be in [1, num_speculative_steps - 1]")
        d = need(a, "draft_tokens", I64, (B,))
        if np.any((d < 0) | (d >= 262144)):
            raise ContractViolation("arrays.draft_tokens", "must hold token ids in [0, 262144)")
        h = need(a, "hidden_states", F32, ndim=2, at_least=B)
        if not np.all(np.isfinite(h[:B])):
            raise ContractViolation("arrays.hidden_states", "must be finite (a model's hidden states)")
        pos = need(a, "positions", I64, ndim=1, at_least=B)[:B]
        seq = need(a, "seq_lens", I32, ndim=1, at_least=B)[:B]
        src = need(a, "sample_src_positions", I64, ndim=1, at_least=B)[:B]
        if np.any(pos < 0) or np.any(pos > M - 1) or np.any(seq < 1) or np.any(seq > M) or np.any(src < 0) \
                or np.any(src > INT32_MAX):
            raise ContractViolation("arrays.positions", "positions must be in [0, max_model_len - 1], lengths in "
                                    "[1, max_model_len], sample keys >= 0")
        for f in ("hidden_size", "BLOCK_SIZE"):
            if case.launch.get(f) is not None:
                raise ContractViolation(f"launch.{f}", "must be null (vLLM's choice)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        B, K, M = (case.scalars[k] for k in ("num_reqs", "num_speculative_steps", "max_model_len"))
        adv = case.scalars["ADVANCE_DRAFT_POSITIONS"]
        step = int(a["current_draft_step"][0])
        mid = step < K - 1
        h = a["hidden_states"][:B]
        bits = h.view(np.uint32) & 0x7FFFFFFF
        checks = {
            "middle_step": mid,
            "last_step": not mid,
            "advancing": adv,
            "constant_positions": not adv,
            "position_clamped": mid and adv and bool(np.any(a["positions"][:B] + 1 > M - 1)),
            "length_clamped": mid and adv and bool(np.any(a["seq_lens"][:B].astype(np.int64) + 1 > M)),
            "signed_zeros_and_subnormals": bool(np.any((h.view(np.uint32) == 0x80000000) | ((bits > 0) & (bits < 0x00800000)))),
            "several_rows": B > 1,
            "many_requests": B > 64,
            "hidden_past_1024": self.resolved(case)["hidden_size"] > BLOCK,
            "beyond_1024_rows": B > MAX_NUM_SEQS,
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        B, K = case.scalars["num_reqs"], case.scalars["num_speculative_steps"]
        W = case.arrays["hidden_states"].shape[1]
        return {"output_draft_tokens": (I64, (B, K)), "next_input_hidden_states": (F32, (B, W)), "input_ids": (I32, (B,))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        B = case.scalars["num_reqs"]
        width = {"output_draft_tokens": case.scalars["num_speculative_steps"],
                 "next_input_hidden_states": case.arrays["hidden_states"].shape[1]}.get(array, 1)
        b = index // width
        return (b, "the row's entry") if b < B else (None, "past the batch")

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        """The first row alone."""
        if case.scalars["num_reqs"] > 1:
            yield case.replace(arrays={"draft_tokens": case.arrays["draft_tokens"][:1]}, scalars={"num_reqs": 1})


TARGET = UpdateDraftInputs()
