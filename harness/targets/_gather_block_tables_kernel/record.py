"""``_gather_block_tables_kernel``: docs/CONTRACT.md §21.

Every step, Model Runner V2 gathers the batch's rows of each KV-cache group's block table into
the forward pass's tables: a row's first ``num_blocks`` entries copied (those wholly below a
sliding window nulled), the grid's rows past the batch zeroed for CUDA graphs. Launched as
vLLM's ``BlockTables.gather_block_tables`` launches it (grid ``(G, num_rows)``, the tables'
addresses in pointer tensors).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT32_MAX
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    BLOCK,
    BLOCK_TABLE,
    I32,
    I64,
    V2Target,
    check_batch,
    need_int,
    v2_oracles,
)
from . import edges
from .edges import null_counts
from .layout import NAME, dst, groups, src


class GatherBlockTables(V2Target):
    name = NAME
    runner = "V2"
    module = BLOCK_TABLE
    function = NAME
    section = 21
    launcher = "launch_gather_block_tables"
    parameters = ("batch_idx_to_req_idx", "src_block_table_ptrs", "dst_block_table_ptrs", "block_table_strides",
                  "num_blocks_ptr", "num_blocks_stride", "num_reqs", "num_computed_tokens_ptr",
                  "sliding_window_reach_ptr", "block_sizes_ptr", "MASK_SLIDING_WINDOW", "BLOCK_SIZE")
    inputs = {"idx_mapping": I64, "num_blocks": I32, "num_computed_tokens": I32, "sliding_window_reach": I32,
              "block_sizes": I32}
    scalar_names = ("num_reqs", "num_rows", "MASK_SLIDING_WINDOW")
    launch_names = ("BLOCK_SIZE",)
    grid_field = "scalars.num_rows"
    features = {
        "full_attention": "a group without a window (every entry copied)",
        "sliding_window_nulls": "a sliding-window group whose window nulls a row's leading blocks",
        "no_mask": "no MASK_SLIDING_WINDOW (no group has a window, or no counts passed)",
        "several_groups": "more than one KV-cache group",
        "padding_rows": "grid rows past the batch (zeroed for CUDA graphs)",
        "empty_row": "a row of no blocks (nothing copied)",
        "full_row": "a row of as many blocks as the table is wide",
        "permuted_state_rows": "a batch row whose state row is not its own index",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "row_past_1024_blocks": "a row of more than 1024 blocks (long contexts: the copy spans blocks)",
        "padding_past_1024_blocks": "a zeroed row wider than 1024 blocks",
    }
    extremes = ("row_past_1024_blocks", "padding_past_1024_blocks")
    oracle_functions = v2_oracles("gather_block_tables")

    @property
    def array_names(self) -> tuple[str, ...]:  # type: ignore[override]
        """The inputs in the signature's order, the groups' tables (up to 8) where it passes them."""
        return ("idx_mapping", *(src(g) for g in range(8)), "num_blocks", "num_computed_tokens", "sliding_window_reach",
                "block_sizes")

    def arguments(self, arrays: Any, case: Case) -> dict[str, Any]:
        G = groups(case)
        rest = {n: v for n, v in arrays.items() if not n.startswith(("src_block_table_", "dst_block_table_"))}
        return rest | {"src_block_tables": [arrays[src(g)] for g in range(G)],
                       "dst_block_tables": [arrays[dst(g)] for g in range(G)]}

    def programs(self, case: Case) -> int:
        return groups(case) * int(case.scalars["num_rows"])

    def production_rules(self, case: Case) -> None:
        """§21.2: 1 to 8 groups, each ``[max_num_reqs, W_g]`` with counts in ``[0, W_g]`` and block
        ids ``>= 0``; distinct state rows; ``B <= num_rows <= max_num_reqs``; block sizes ``>= 1``;
        with ``MASK_SLIDING_WINDOW`` counts ``>= 0`` and reaches ``>= 0``, else reaches of 0;
        vLLM's block."""
        a = case.arrays
        edges.validate(case)
        G = groups(case)
        R = a[src(0)].shape[0]
        allowed = {"idx_mapping", "num_blocks", "num_computed_tokens", "sliding_window_reach", "block_sizes"}
        extra = sorted(set(a) - allowed - {src(g) for g in range(G)})
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        check_batch(case, R, qsl=False)
        if a["num_blocks"].shape[1] != R:
            raise ContractViolation("arrays.num_blocks", "must be [G, max_num_reqs] (its stride max_num_reqs)")
        if any(np.any(a[src(g)] < 0) for g in range(G)):
            raise ContractViolation(f"arrays.{src(0)}", "block ids must be >= 0 (0: the null block)")
        reach = a["sliding_window_reach"]
        if np.any(reach < 0) or (not case.scalars["MASK_SLIDING_WINDOW"] and np.any(reach != 0)):
            raise ContractViolation("arrays.sliding_window_reach", "must be >= 0, and 0 without MASK_SLIDING_WINDOW")
        if case.scalars["MASK_SLIDING_WINDOW"] and np.any(a["num_computed_tokens"] < 0):
            raise ContractViolation("arrays.num_computed_tokens", "must be >= 0 (the step's first position)")
        need_int(case.scalars, "num_rows", int(case.scalars["num_reqs"]), min(R, INT32_MAX))
        if case.launch.get("BLOCK_SIZE") is not None:
            raise ContractViolation("launch.BLOCK_SIZE", "must be null (vLLM's 1024)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        s = a["idx_mapping"]
        n = a["num_blocks"].astype(np.int64)[:, s]
        widths = np.array([a[src(g)].shape[1] for g in range(groups(case))])
        nulls = null_counts(case)
        mask = case.scalars["MASK_SLIDING_WINDOW"]
        B, NR = len(s), case.scalars["num_rows"]
        windows = mask & (a["sliding_window_reach"] > 0)
        checks = {
            "full_attention": bool(np.any(~windows)),
            "sliding_window_nulls": bool(np.any((nulls > 0) & (n > 0))),
            "no_mask": not mask,
            "several_groups": groups(case) > 1,
            "padding_rows": NR > B,
            "empty_row": bool(np.any(n == 0)),
            "full_row": bool(np.any(n == widths[:, None])),
            "permuted_state_rows": bool(np.any(s != np.arange(B))),
            "several_rows": B > 1,
            "many_requests": B > 64,
            "row_past_1024_blocks": bool(np.any(n > BLOCK)),
            "padding_past_1024_blocks": NR > B and bool(np.any(widths > BLOCK)),
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {dst(g): (I32, case.arrays[src(g)].shape) for g in range(groups(case))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        W = case.arrays[src(int(array.rsplit("_", 1)[1]))].shape[1]
        r = index // W
        B = case.scalars["num_reqs"]
        return (r, "the row's blocks") if r < B else (None, "a grid row past the batch (zeroed)"
                                                      if r < case.scalars["num_rows"] else "a row past the grid")


TARGET = GatherBlockTables()
