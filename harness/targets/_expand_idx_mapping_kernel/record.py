"""``_expand_idx_mapping_kernel``: docs/CONTRACT.md §17.

Model Runner V2's map from each logits row to its request: for every logits row of batch row
``b``, the state row of ``b`` and the row's position among ``b``'s logits (what the rejection
sampler and the drafter read per logit). Launched as vLLM's ``expand_idx_mapping`` launches it
(grid ``(B,)``, ``BLOCK_SIZE = next_power_of_2(decode_query_len)``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...core.case import Case
from ...generation.strategies import MAX_NUM_SEQS
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    I32,
    I64,
    INPUT_BATCH,
    V2Target,
    check_batch,
    check_cu,
    need_int,
    npow2,
    only,
    row_of,
    v2_oracles,
)
from . import edges
from .layout import NAME


class ExpandIdxMapping(V2Target):
    name = NAME
    runner = "V2"
    module = INPUT_BATCH
    function = NAME
    section = 17
    launcher = "launch_expand_idx_mapping"
    parameters = ("idx_mapping_ptr", "expanded_idx_mapping_ptr", "expanded_local_pos_ptr", "cu_num_logits_ptr",
                  "BLOCK_SIZE")
    inputs = {"idx_mapping": I64, "cu_num_logits": I32}
    scalar_names = ("num_reqs", "max_expand_len")
    launch_names = ("BLOCK_SIZE",)
    per_row = {"idx_mapping": 0, "cu_num_logits": 1}
    features = {
        "no_drafts_row": "a row of one logit (no drafts)",
        "full_row": "a row of K + 1 logits (every draft scheduled)",
        "ragged": "rows of different logits counts",
        "block_wider": "a block wider than K + 1 (K + 1 not a power of two): masked lanes",
        "permuted_state_rows": "a batch row whose state row is not its own index",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "sixteen_drafts": "a row of 16 logits or more (num_speculative_tokens of 15 and more)",
        "beyond_1024_rows": "more than 1024 rows (max_num_seqs of 1024 and more)",
    }
    extremes = ("sixteen_drafts", "beyond_1024_rows")
    oracle_functions = v2_oracles("expand_idx_mapping")

    def resolved(self, case: Case) -> dict[str, int]:
        block = case.launch.get("BLOCK_SIZE")
        return {"BLOCK_SIZE": npow2(case.scalars["max_expand_len"]) if block is None else block}

    def production_rules(self, case: Case) -> None:
        """§17.2: distinct state rows, each row 1 to ``max_expand_len = K + 1`` logits
        (``1 <= K <= 32``), vLLM's block."""
        only(case.arrays, set(self.inputs))
        batch = check_batch(case, 1 << 20, qsl=False)
        E = need_int(case.scalars, "max_expand_len", 2, 33)
        check_cu(case, batch.B, 1, E)
        if case.launch.get("BLOCK_SIZE") is not None:
            raise ContractViolation("launch.BLOCK_SIZE", "must be null (vLLM's next_power_of_2(max_expand_len))")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        s = case.arrays["idx_mapping"]
        nl = np.diff(case.arrays["cu_num_logits"].astype(np.int64))
        E = case.scalars["max_expand_len"]
        B = len(s)
        checks = {
            "no_drafts_row": bool(np.any(nl == 1)),
            "full_row": bool(np.any(nl == E)),
            "ragged": len(set(nl.tolist())) > 1,
            "block_wider": npow2(E) > E,
            "permuted_state_rows": bool(np.any(s != np.arange(B))),
            "several_rows": B > 1,
            "many_requests": B > 64,
            "sixteen_drafts": bool(np.any(nl >= 16)),
            "beyond_1024_rows": B > MAX_NUM_SEQS,
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        n = int(case.arrays["cu_num_logits"][-1])
        return {"expanded_idx_mapping": (I64, (max(n, 0),)), "expanded_local_pos": (I32, (max(n, 0),))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        b = row_of(case.arrays["cu_num_logits"][:-1].astype(np.int64), index)
        return b, "the row's logits rows"

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        """Every row one logit."""
        B = int(case.scalars["num_reqs"])
        if case.arrays["cu_num_logits"][-1] != B:
            yield case.replace(arrays={"cu_num_logits": np.arange(B + 1, dtype=np.int32)})


TARGET = ExpandIdxMapping()
