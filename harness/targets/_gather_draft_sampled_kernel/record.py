"""``_gather_draft_sampled_kernel``: docs/CONTRACT.md §23.

The rejection sampler's inputs per logits row: the token in the row's slot of the step's input
ids (the draft being verified; ``-1``, a placeholder the rejection kernels reject, for a draft
slot of a step that starts inside the prompt) and its position. Launched as vLLM's
``gather_draft_sampled`` launches it (grid ``(cdiv(num_logits, 1024),)``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    BLOCK,
    I32,
    I64,
    REJECTION,
    V2Target,
    need,
    need_int,
    only,
    v2_oracles,
)
from . import edges
from .layout import NAME, build, rows_of


class GatherDraftSampled(V2Target):
    state_index = ("expanded_idx_mapping",)
    per_state = ("prefill_len",)
    name = NAME
    runner = "V2"
    module = REJECTION
    function = NAME
    section = 23
    launcher = "launch_gather_draft_sampled"
    parameters = ("draft_sampled_ptr", "pos_ptr", "input_ids_ptr", "positions_ptr", "logits_indices_ptr",
                  "expanded_idx_mapping_ptr", "expanded_local_pos_ptr", "prefill_len_ptr", "num_logits", "BLOCK_SIZE")
    inputs = {"input_ids": I32, "positions": I64, "logits_indices": I64, "expanded_idx_mapping": I64,
              "expanded_local_pos": I32, "prefill_len": I32}
    scalar_names = ("num_logits",)
    launch_names = ("BLOCK_SIZE",)
    grid_field = "scalars.num_logits"
    features = {
        "bonus_slot": "a row's first logits row (local position 0: never a placeholder)",
        "draft_slot": "a draft slot of a step past the prompt (its input id gathered)",
        "placeholder_slot": "a draft slot of a step starting inside the prompt (-1)",
        "prefill_row": "a row of one logit (a prefill chunk's last token)",
        "query_longer_than_logits": "a row whose query holds more tokens than its logits",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "logits_past_1024": "more than 1024 logits rows (two programs or more)",
        "positions_past_32767": "a position past 32767 (max_model_len of 32k and more)",
    }
    extremes = ("logits_past_1024", "positions_past_32767")
    oracle_functions = v2_oracles("gather_draft_sampled")

    def resolved(self, case: Case) -> dict[str, int]:
        block = case.launch.get("BLOCK_SIZE")
        return {"BLOCK_SIZE": BLOCK if block is None else block}

    def programs(self, case: Case) -> int:
        n, block = case.scalars["num_logits"], self.resolved(case)["BLOCK_SIZE"]
        return -(-n // block)

    def production_rules(self, case: Case) -> None:
        """§23.2: the logits rows of a batch as §16 and §17 make them (each row's last ``nl_b``
        tokens, its state row, local positions ``0, 1, ...``), positions ``c + i``, distinct
        state rows, prompts ``>= 1``, ids of a vocabulary, vLLM's block."""
        a = case.arrays
        only(a, set(self.inputs))
        n = need_int(case.scalars, "num_logits", 1)
        prefill = need(a, "prefill_len", I32, ndim=1)
        T = need(a, "input_ids", I32, ndim=1).shape[0]
        need(a, "positions", I64, (T,))
        for x, dt in (("logits_indices", I64), ("expanded_idx_mapping", I64), ("expanded_local_pos", I32)):
            need(a, x, dt, (n,))
        rows = rows_of(case) if np.all((a["logits_indices"] >= 0) & (a["logits_indices"] < T)) else None
        if rows is None or not all(r.qlen >= r.logits >= 1 and r.c >= 0 for r in rows) or any(
                not 0 <= r.s < prefill.shape[0] for r in rows):
            raise ContractViolation("arrays.logits_indices", "must be the logits rows of a batch (§16, §17)")
        again = build(rows, a["input_ids"], prefill)
        if sum(r.qlen for r in rows) != T or any(not np.array_equal(again.arrays[x], a[x]) for x in a):
            raise ContractViolation("arrays.logits_indices", "must be the logits rows of a batch (§16, §17): each row's "
                                    "last tokens, its state row, local positions 0, 1, ...; positions c + i")
        if len({r.s for r in rows}) != len(rows) or np.any(prefill < 1):
            raise ContractViolation("arrays.expanded_idx_mapping", "must name distinct state rows with prompts >= 1")
        if np.any((a["input_ids"] < 0) | (a["input_ids"] >= 262144)):
            raise ContractViolation("arrays.input_ids", "must hold token ids in [0, 262144)")
        if case.launch.get("BLOCK_SIZE") is not None:
            raise ContractViolation("launch.BLOCK_SIZE", "must be null (vLLM's 1024)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        lp = a["expanded_local_pos"].astype(np.int64)
        p = a["positions"][a["logits_indices"]]
        L = a["prefill_len"].astype(np.int64)[a["expanded_idx_mapping"]]
        placeholder = (lp > 0) & (p - lp < L)
        rows = rows_of(case) or []
        checks = {
            "bonus_slot": bool(np.any(lp == 0)),
            "draft_slot": bool(np.any((lp > 0) & ~placeholder)),
            "placeholder_slot": bool(np.any(placeholder)),
            "prefill_row": any(r.logits == 1 for r in rows),
            "query_longer_than_logits": any(r.qlen > r.logits for r in rows),
            "several_rows": len(rows) > 1,
            "many_requests": len(rows) > 64,
            "logits_past_1024": case.scalars["num_logits"] > BLOCK,
            "positions_past_32767": bool(np.any(p > INT16_MAX)),
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        n = int(case.scalars["num_logits"])
        return {"draft_sampled": (I32, (n,)), "pos": (I64, (n,))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        starts = np.flatnonzero(case.arrays["expanded_local_pos"] == 0)
        b = int(np.searchsorted(starts, index, side="right") - 1) if len(starts) else None
        return (b if b is not None and b >= 0 else None), "the row's logits rows"

    def split_requests(self, case: Case) -> list[Any] | None:
        return rows_of(case)

    def join_requests(self, case: Case, pieces: list[Any]) -> Case:
        rows = rows_of(case) or []
        q = np.concatenate([[0], np.cumsum([r.qlen for r in rows])]).astype(np.int64)
        where = {r: b for b, r in enumerate(rows)}
        ids = [case.arrays["input_ids"][q[where[r]] : q[where[r] + 1]] for r in pieces]
        return build(pieces, np.concatenate(ids) if ids else np.zeros(0), case.arrays["prefill_len"],
                     case.launch.get("BLOCK_SIZE"))


TARGET = GatherDraftSampled()
