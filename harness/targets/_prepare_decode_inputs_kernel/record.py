"""``_prepare_decode_inputs_kernel``: docs/CONTRACT.md §26.

The drafter's first decode step (EAGLE/MTP with two drafts or more): each row's first draft
token becomes its input, its position and sequence length move on by one (clamped at the
model's length), its sampling key advances, and ``query_start_loc`` is rebuilt (one token per
row) and padded, with the lengths, for CUDA graphs. Launched as vLLM's ``prepare_decode_inputs``
launches it (grid ``(B + 1,)``: the last program pads).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, INT32_MAX, MAX_NUM_SEQS
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I32, I64, SPECULATOR, V2Target, need, need_int, only, v2_oracles
from . import edges
from .layout import NAME


class PrepareDecodeInputs(V2Target):
    name = NAME
    runner = "V2"
    module = SPECULATOR
    function = NAME
    section = 26
    launcher = "launch_prepare_decode_inputs"
    parameters = ("draft_tokens_ptr", "draft_tokens_stride", "target_seq_lens_ptr", "num_rejected_ptr",
                  "input_ids_ptr", "positions_ptr", "sample_src_positions_ptr", "query_start_loc_ptr", "seq_lens_ptr",
                  "max_model_len", "max_num_reqs", "BLOCK_SIZE", "ADVANCE_DRAFT_POSITIONS")
    inputs = {"draft_tokens": I64, "target_seq_lens": I32, "num_rejected": I32, "positions": I64,
              "sample_src_positions": I64}
    inout = frozenset({"positions", "sample_src_positions"})
    scalar_names = ("max_model_len", "max_num_reqs", "num_reqs", "ADVANCE_DRAFT_POSITIONS")
    launch_names = ("BLOCK_SIZE",)
    features = {
        "advancing": "ADVANCE_DRAFT_POSITIONS (EAGLE, MTP): positions and lengths move on",
        "constant_positions": "no ADVANCE_DRAFT_POSITIONS (Gemma4's MTP): positions untouched",
        "position_clamped": "a row at the model's length: its position stays max_model_len - 1",
        "length_clamped": "a row at the model's length: its length stays max_model_len",
        "rejected": "a row that rejected drafts (its length is the target's minus them)",
        "padding": "max_num_reqs > B: query starts and lengths padded",
        "no_padding": "max_num_reqs = B",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "lengths_past_32767": "a sequence past 32767 tokens (max_model_len of 32k and more)",
        "max_num_seqs_1024": "max_num_reqs of 1024 and more: the padded query starts span two blocks",
    }
    extremes = ("lengths_past_32767", "max_num_seqs_1024")
    oracle_functions = v2_oracles("prepare_decode_inputs")

    def resolved(self, case: Case) -> dict[str, int]:
        return {}

    def programs(self, case: Case) -> int:
        return int(case.scalars["num_reqs"]) + 1

    def production_rules(self, case: Case) -> None:
        """§26.2: the speculator's ``[max_num_reqs, K]`` drafts (``2 <= K <= 32``), ids of a
        vocabulary; ``0 <= rejected <= K``; accepted sequences of 1 to ``max_model_len`` tokens;
        positions and sample keys as the drafter's prefill leaves them; vLLM's block."""
        a = case.arrays
        only(a, set(self.inputs))
        B = need_int(case.scalars, "num_reqs", 1)
        R = need_int(case.scalars, "max_num_reqs", B, 1 << 15)
        M = need_int(case.scalars, "max_model_len", 1, INT32_MAX - 1)
        if not isinstance(case.scalars.get("ADVANCE_DRAFT_POSITIONS"), bool):
            raise ContractViolation("scalars.ADVANCE_DRAFT_POSITIONS", "must be true or false")
        d = need(a, "draft_tokens", I64, ndim=2)
        if d.shape[0] != R or not 2 <= d.shape[1] <= 32:
            raise ContractViolation("arrays.draft_tokens", "must be [max_num_reqs, K], 2 <= K <= 32")
        if np.any((d[:B, 0] < 0) | (d[:B, 0] >= 262144)):
            raise ContractViolation("arrays.draft_tokens", "a first draft must be a token id in [0, 262144)")
        tsl = need(a, "target_seq_lens", I32, (B,)).astype(np.int64)
        nr = need(a, "num_rejected", I32, (B,)).astype(np.int64)
        seq = tsl - nr
        if np.any(nr < 0) or np.any(nr > d.shape[1]) or np.any(seq < 1) or np.any(seq > M):
            raise ContractViolation("arrays.num_rejected", "must be in [0, K], the accepted sequence in [1, max_model_len]")
        pos = need(a, "positions", I64, ndim=1, at_least=B)
        src = need(a, "sample_src_positions", I64, (R,))
        if not np.array_equal(pos[:B], seq - 1) or not np.array_equal(src[:B], seq):
            raise ContractViolation("arrays.positions", "must hold each row's last accepted position (seq - 1), the "
                                    "sample keys one more (the drafter's prefill)")
        if case.launch.get("BLOCK_SIZE") is not None:
            raise ContractViolation("launch.BLOCK_SIZE", "must be null (vLLM's 1024)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        B, R, M = (case.scalars[k] for k in ("num_reqs", "max_num_reqs", "max_model_len"))
        adv = case.scalars["ADVANCE_DRAFT_POSITIONS"]
        nr = a["num_rejected"].astype(np.int64)
        seq = a["target_seq_lens"].astype(np.int64) - nr
        pos = a["positions"][:B]
        checks = {
            "advancing": adv,
            "constant_positions": not adv,
            "position_clamped": adv and bool(np.any(pos + 1 > M - 1)),
            "length_clamped": adv and bool(np.any(seq + 1 > M)),
            "rejected": bool(np.any(nr > 0)),
            "padding": R > B,
            "no_padding": R == B,
            "several_rows": B > 1,
            "many_requests": B > 64,
            "lengths_past_32767": bool(np.any(seq > INT16_MAX)),
            "max_num_seqs_1024": R >= MAX_NUM_SEQS,
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        B, R = case.scalars["num_reqs"], case.scalars["max_num_reqs"]
        return {"input_ids": (I32, (B,)), "query_start_loc": (I32, (R + 1,)), "seq_lens": (I32, (R,))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        B = case.scalars["num_reqs"]
        return (index, "the row's entry") if index < B else (None, "past the batch (padding, or untouched)")

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        """The first row alone; nothing rejected."""
        a = case.arrays
        if case.scalars["num_reqs"] > 1:
            yield case.replace(arrays={"target_seq_lens": a["target_seq_lens"][:1], "num_rejected": a["num_rejected"][:1]},
                               scalars={"num_reqs": 1})
        if np.any(a["num_rejected"] != 0):
            seq = a["target_seq_lens"].astype(np.int64) - a["num_rejected"]
            yield case.replace(arrays={"target_seq_lens": seq.astype(np.int32), "num_rejected": np.zeros_like(a["num_rejected"])})


TARGET = PrepareDecodeInputs()
