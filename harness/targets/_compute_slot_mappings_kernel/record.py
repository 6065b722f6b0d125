"""``_compute_slot_mappings_kernel``: docs/CONTRACT.md §22.

The KV-cache slot of every scheduled token in every KV-cache group (the block its position falls
in, from the request's block table, times the block size, plus its offset), with decode context
parallelism's interleaving (a token another rank holds gets ``PAD_ID``), ``PAD_ID`` for a group
without slot mappings and a dummy row, and for the rest of each row of the buffer (CUDA-graph
padding, stale slots of earlier chunks: PR #36580). Launched as vLLM's
``BlockTables.compute_slot_mappings`` launches it (grid ``(G, B + 1)``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import BLOCK, BLOCK_TABLE, BOOL, I32, I64, V2Target, row_of, v2_oracles
from . import edges
from .layout import NAME, groups, table


class ComputeSlotMappings(V2Target):
    state_index = ("idx_mapping",)
    per_state = ("block_table_0", "block_table_1", "block_table_2", "block_table_3")
    name = NAME
    runner = "V2"
    module = BLOCK_TABLE
    function = NAME
    section = 22
    launcher = "launch_compute_slot_mappings"
    parameters = ("max_num_tokens", "idx_mapping", "query_start_loc", "pos", "block_table_ptrs", "block_table_strides",
                  "block_sizes", "slot_mapping_enabled", "dcp_sharded", "slot_mappings_ptr", "slot_mappings_stride",
                  "cp_rank", "CP_SIZE", "CP_INTERLEAVE", "PAD_ID", "TRITON_BLOCK_SIZE")
    inputs = {"idx_mapping": I64, "query_start_loc": I32, "positions": I64, "block_sizes": I32,
              "slot_mapping_enabled": BOOL, "dcp_sharded": BOOL}
    scalar_names = ("num_reqs", "max_num_tokens", "cp_rank", "CP_SIZE", "CP_INTERLEAVE")
    launch_names = ("PAD_ID", "TRITON_BLOCK_SIZE")
    features = {
        "context_parallel": "decode context parallelism (CP_SIZE > 1)",
        "sharded_group": "a group sharded across the context-parallel ranks (other ranks' tokens PAD_ID)",
        "unsharded_group_under_cp": "a group every rank holds whole, under context parallelism",
        "interleave": "CP_INTERLEAVE > 1 (runs of positions per rank)",
        "disabled_group": "a group without slot mappings (every token PAD_ID)",
        "dummy_row": "a row of state row -1 (a dummy or padded request: PAD_ID)",
        "padding": "a buffer wider than the step's tokens (PAD_ID past them)",
        "chunk_rows": "a row of several tokens",
        "draft_step": "one token per row (a drafter's decode step)",
        "several_groups": "more than one KV-cache group",
        "permuted_state_rows": "a batch row whose state row is not its own index",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "chunk_past_1024": "a chunk of more than 1024 tokens (the row's loop spans blocks)",
        "padding_past_1024": "more than 1024 padded slots (max_num_batched_tokens well past the step's)",
    }
    extremes = ("chunk_past_1024", "padding_past_1024")
    oracle_functions = v2_oracles("compute_slot_mappings")

    @property
    def array_names(self) -> tuple[str, ...]:  # type: ignore[override]
        """The inputs in the signature's order, the groups' tables (up to 8) where it passes them."""
        return ("idx_mapping", "query_start_loc", "positions", *(table(g) for g in range(8)), "block_sizes",
                "slot_mapping_enabled", "dcp_sharded")

    def arguments(self, arrays: Any, case: Case) -> dict[str, Any]:
        rest = {n: v for n, v in arrays.items() if not n.startswith("block_table_")}
        return rest | {"block_tables": [arrays[table(g)] for g in range(groups(case))]}

    def resolved(self, case: Case) -> dict[str, int]:
        pad = case.launch.get("PAD_ID")
        return {"PAD_ID": -1 if pad is None else pad}

    def programs(self, case: Case) -> int:
        return groups(case) * (int(case.scalars["num_reqs"]) + 1)

    def production_rules(self, case: Case) -> None:
        """§22.2: 1 to 8 groups of ``[max_num_reqs, W_g]`` tables wide enough for every position
        (slot ids inside int32); distinct state rows or ``-1``; rows of one token or more at
        positions ``>= 0``; ``CP_SIZE >= 1``, ``0 <= cp_rank < CP_SIZE``, an interleave dividing
        every block size; ``max_num_tokens`` at least the step's tokens; vLLM's ``PAD_SLOT_ID``
        and block."""
        a = case.arrays
        G = edges.check(case, distinct=True)
        allowed = {"idx_mapping", "query_start_loc", "positions", "block_sizes", "slot_mapping_enabled", "dcp_sharded"}
        extra = sorted(set(a) - allowed - {table(g) for g in range(G)})
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        if a["positions"].shape[0] != int(a["query_start_loc"][-1]):
            raise ContractViolation("arrays.positions", "must hold one position per token")
        IL = case.scalars["CP_INTERLEAVE"]
        if any(int(x) % IL for x in a["block_sizes"]):
            raise ContractViolation("scalars.CP_INTERLEAVE", "must divide every block size")
        for f in ("PAD_ID", "TRITON_BLOCK_SIZE"):
            if case.launch.get(f) is not None:
                raise ContractViolation(f"launch.{f}", "must be null (vLLM's choice)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        s = a["idx_mapping"]
        qlen = np.diff(a["query_start_loc"].astype(np.int64))
        CP = case.scalars["CP_SIZE"]
        sh, en = a["dcp_sharded"], a["slot_mapping_enabled"]
        B = len(s)
        real = s[s >= 0]
        checks = {
            "context_parallel": CP > 1,
            "sharded_group": CP > 1 and bool(np.any(sh & en)),
            "unsharded_group_under_cp": CP > 1 and bool(np.any(~sh & en)),
            "interleave": CP > 1 and case.scalars["CP_INTERLEAVE"] > 1,
            "disabled_group": bool(np.any(~en)),
            "dummy_row": bool(np.any(s < 0)),
            "padding": case.scalars["max_num_tokens"] > int(a["query_start_loc"][-1]),
            "chunk_rows": bool(np.any(qlen > 1)),
            "draft_step": bool(np.all(qlen == 1)),
            "several_groups": groups(case) > 1,
            "permuted_state_rows": bool(np.any(real != np.arange(B)[s >= 0])),
            "several_rows": B > 1,
            "many_requests": B > 64,
            "chunk_past_1024": bool(np.any(qlen > BLOCK)),
            "padding_past_1024": case.scalars["max_num_tokens"] - int(a["query_start_loc"][-1]) > BLOCK,
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {"slot_mappings": (I64, (groups(case), int(case.scalars["max_num_tokens"])))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        MT = int(case.scalars["max_num_tokens"])
        g, t = divmod(index, max(MT, 1))
        q = case.arrays["query_start_loc"].astype(np.int64)
        if t >= q[-1]:
            return None, f"group {g}: a slot past the step's tokens (padding)"
        return row_of(q[:-1], t), f"group {g}: the row's slots"


TARGET = ComputeSlotMappings()
