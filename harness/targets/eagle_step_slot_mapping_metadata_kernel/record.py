"""``eagle_step_slot_mapping_metadata_kernel``: docs/CONTRACT.md §6.

One EAGLE draft step: positions move on by one (parked at 0 past ``max_model_len``), slots are
looked up in the block table, ``seq_lens`` grows by one in place, and the cudagraph padding
programs write ``PADDING_SLOT_ID``.

A case holds ``positions`` (int64 ``[B]``), ``block_table`` (int32 ``[B, W]``: the kernel
sees its first ``n_blocks_per_req`` columns, rows ``W`` apart, as a column slice of a wider
table) and ``seq_lens`` (int32 ``[B]``, updated in place: the buffer must end up as the
oracles leave it). Launch: ``input_batch_size`` (``null``: ``B``, no padding) and
``aliased_positions`` (``true``: ``out_clamped_positions`` is the ``positions`` buffer itself,
as in vLLM's draft steps after the first; ``false``: a buffer of its own, as in the first).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    FLOAT32_EXACT,
    INT16_MAX,
    INT32_MAX,
    MAX_NUM_SEQS,
    cdiv,
)
from ...targetkit.base import ContractViolation, TritonTarget, numpy_and_numba, require_arrays
from ...targetkit.block_tables import (
    MAX_BLOCK_SIZE,
    MAX_POSITION,
    max_block_id,
)
from .layout import (
    I32,
    I64,
    NAME,
    PAD_ID,
    Step,
    allocated_columns,
    vllm_block_size,
)


class EagleStep(TritonTarget):
    name = NAME
    runner = "V1"
    module = "vllm/v1/spec_decode/utils.py"
    function = NAME
    section = 6
    parameters = (
        "positions_ptr",
        "block_table_ptr",
        "block_table_stride",
        "seq_lens_ptr",
        "out_clamped_positions_ptr",
        "out_slot_mapping_ptr",
        "block_size",
        "max_model_len",
        "n_blocks_per_req",
        "PAD_ID",
        "batch_size",
    )
    inputs = {"positions": I64, "block_table": I32, "seq_lens": I32}
    inout = frozenset({"seq_lens"})
    scalar_names = ("block_size", "max_model_len", "n_blocks_per_req")
    launch_names = ("input_batch_size", "aliased_positions")
    features = {
        "separate_positions": "out_clamped_positions is a buffer of its own (vLLM's first draft step)",
        "aliased_positions": "out_clamped_positions is the positions buffer (vLLM's later draft steps)",
        "exact_launch": "input_batch_size = batch_size (no cudagraph padding)",
        "padded_launch": "input_batch_size > batch_size: padding programs write PADDING_SLOT_ID",
        "single_request": "one request",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        "last_position": "a request stepping onto position M - 1, the last one in range",
        "block_start": "a request stepping onto the first slot of a block (p % bs == 0, p > 0)",
        "later_block": "a request whose slot is in block column >= 1",
        "last_column": "a request whose slot is in the table's last column (nb - 1), unclamped",
        "seq_follows_position": "every seq_lens[r] = positions[r] + 1, as vLLM keeps them for a text target",
        "mrope_positions": "a request with seq_lens > positions + 1: an M-RoPE target's temporal coordinate",
        "block_size_one": "block_size = 1",
        "odd_block_size": "a block size that is not a power of two (hybrid models: 528)",
        "partial_last_block": "max_model_len is not a multiple of block_size",
        "slot_near_int32_limit": "a slot id within 2**16 of the int32 limit",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests (max_num_seqs of 1024 and more)",
        "positions_past_2_24": "an in-range position past 2**24 (max_model_len in the millions: float32 no longer exact)",
        "block_id_past_int16": "a block id read past 32767 (KV caches of more than 32k blocks)",
    }
    extremes = ("beyond_1024_requests", "positions_past_2_24", "block_id_past_int16", "slot_near_int32_limit")

    oracle_functions = numpy_and_numba("eagle_step_slot_mapping_metadata")

    # -- contract ---------------------------------------------------------------------

    def production_rules(self, case: Case) -> None:
        """The production tier (docs/CONTRACT.md §6.2): :meth:`extended_rules`'s rules, and what
        vLLM's draft loop hands the kernel: positions + 1 <= M - 1 (the drafter gate: nothing
        exceeds), positions + 1 <= seq_lens <= M - 1 (equal for a text target), a contiguous
        table as wide as M needs, vLLM's block sizes, and each request's allocation (when the
        case gives ``num_allocated_blocks``) covering its step slot."""
        self.extended_rules(case)
        t = Step(case)
        if np.any(t.p > t.M - 1):
            raise ContractViolation("arrays.positions", "positions + 1 must stay below max_model_len (vLLM's drafter gate)")
        if np.any(t.seq < t.p) or np.any(t.seq > t.M - 1):
            raise ContractViolation("arrays.seq_lens", "must be from positions + 1 (a text target) to max_model_len - 1")
        if case.arrays["block_table"].shape[1] != t.nb:
            raise ContractViolation("arrays.block_table", "vLLM's table is contiguous: exactly n_blocks_per_req columns")
        if t.nb * t.bs < t.M:
            raise ContractViolation("scalars.n_blocks_per_req", "n_blocks_per_req * block_size must cover max_model_len (vLLM's table width)")
        if not vllm_block_size(t.bs):
            raise ContractViolation("scalars.block_size", "must be a power of two or a multiple of 16")
        alloc = allocated_columns(case)
        if alloc is not None and np.any(alloc <= t.col):
            raise ContractViolation("arrays.num_allocated_blocks", "the scheduler allocates every step slot's block (lookahead K)")

    def extended_rules(self, case: Case) -> None:
        """The extended tier's rules (docs/CONTRACT.md §6.4)."""
        a, s = case.arrays, case.scalars
        require_arrays(a, self.inputs | {"block_table": (self.inputs["block_table"], 2)})
        for name in self.scalar_names:
            v = s.get(name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ContractViolation(f"scalars.{name}", "must be an int")
        B = len(a["positions"])
        if B < 1:
            raise ContractViolation("arrays.positions", "needs at least one request")
        if len(a["seq_lens"]) != B:
            raise ContractViolation("arrays.seq_lens", "needs one entry per request (len(positions))")
        if a["block_table"].shape[0] != B:
            raise ContractViolation("arrays.block_table", "needs one row per request (len(positions))")
        bs, M, nb = s["block_size"], s["max_model_len"], s["n_blocks_per_req"]
        if not 1 <= bs <= MAX_BLOCK_SIZE:
            raise ContractViolation("scalars.block_size", f"must be from 1 to {MAX_BLOCK_SIZE}")
        if not 1 <= M <= INT32_MAX:
            raise ContractViolation("scalars.max_model_len", "must be from 1 to 2**31 - 1")
        if not 1 <= nb <= a["block_table"].shape[1]:
            raise ContractViolation("scalars.n_blocks_per_req", "must be from 1 to the width of block_table (its row stride)")
        pos, seq = a["positions"], a["seq_lens"].astype(np.int64)
        if np.any(pos < 0) or np.any(pos > MAX_POSITION):
            raise ContractViolation("arrays.positions", "must be from 0 to 2**40")
        if np.any(seq < 0) or np.any(seq > INT32_MAX - 1):
            raise ContractViolation("arrays.seq_lens", "must be from 0 to 2**31 - 2")
        ids = a["block_table"][:, :nb].astype(np.int64)
        if np.any(ids < 0) or np.any(ids > max_block_id(bs)):
            raise ContractViolation(
                "arrays.block_table", "block ids (the first n_blocks_per_req columns) must be >= 0 with slots within int32"
            )
        alloc = a.get("num_allocated_blocks")
        if alloc is not None and (alloc.dtype != I32 or alloc.shape != (B,) or np.any(alloc < 0) or np.any(alloc > nb)):
            raise ContractViolation("arrays.num_allocated_blocks", "must be int32, one per request, from 0 to n_blocks_per_req")
        ib = case.launch.get("input_batch_size")
        if ib is not None and (not isinstance(ib, int) or isinstance(ib, bool) or not B <= ib <= B + 4096):
            raise ContractViolation("launch.input_batch_size", "must be null or an int from batch_size to batch_size + 4096")
        if not isinstance(case.launch.get("aliased_positions"), bool):
            raise ContractViolation("launch.aliased_positions", "must be true or false")

    def features_of(self, case: Case) -> frozenset[str]:
        t = Step(case)
        inside = ~t.exceeds
        checks = {
            "separate_positions": not case.launch["aliased_positions"],
            "aliased_positions": bool(case.launch["aliased_positions"]),
            "exact_launch": t.IB == t.B,
            "padded_launch": t.IB > t.B,
            "single_request": t.B == 1,
            "several_requests": t.B > 1,
            "many_requests": t.B > 64,
            "last_position": np.any(t.p == t.M - 1),
            "block_start": np.any(inside & (t.p > 0) & (t.p % t.bs == 0)),
            "later_block": np.any(inside & (t.col >= 1)),
            "last_column": np.any(inside & (t.raw_col == t.nb - 1)),
            "seq_follows_position": bool(np.all(t.seq == t.pos + 1)),
            "mrope_positions": bool(np.any(t.seq > t.pos + 1)),
            "block_size_one": t.bs == 1,
            "odd_block_size": t.bs & (t.bs - 1) != 0,
            "partial_last_block": t.M % t.bs != 0,
            "slot_near_int32_limit": np.any(inside & (t.slot > INT32_MAX - (1 << 16))),
            "beyond_1024_requests": t.B > MAX_NUM_SEQS,
            "positions_past_2_24": np.any(inside & (t.clamped > FLOAT32_EXACT)),
            "block_id_past_int16": np.any(t.block > INT16_MAX),
        }
        return frozenset(k for k, v in checks.items() if v)

    # -- extended tier (docs/CONTRACT.md §6.4): edges.py ----------------------------------


    # -- running ----------------------------------------------------------------------

    grid_field = "launch.input_batch_size"

    def programs(self, case: Case) -> int:
        return case.launch.get("input_batch_size") or len(case.arrays["positions"])

    def aliases(self, case: Case) -> Mapping[str, str]:
        return {"out_clamped_positions": "positions"} if case.launch.get("aliased_positions") else {}

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        t = Step(case)
        return {"out_clamped_positions": (I64, (t.B,)), "out_slot_mapping": (I64, (t.IB,))}

    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        from ....kernels.launchers import launch_eagle_step_slot_mapping_metadata

        nb = case.scalars["n_blocks_per_req"]
        launch_eagle_step_slot_mapping_metadata(
            kernel,
            positions=tensors["positions"],
            block_table=tensors["block_table"][:, :nb],
            seq_lens=tensors["seq_lens"],
            out_clamped_positions=tensors["out_clamped_positions"],
            out_slot_mapping=tensors["out_slot_mapping"],
            block_size=case.scalars["block_size"],
            max_model_len=case.scalars["max_model_len"],
            input_batch_size=case.launch.get("input_batch_size"),
        )

    def call_oracle(self, oracle: Any, case: Case, outputs: Mapping[str, np.ndarray]) -> None:
        a, s = case.arrays, case.scalars
        B = len(a["positions"])
        ib = case.launch.get("input_batch_size")
        oracle(
            positions=a["positions"],
            block_table=a["block_table"],
            n_blocks_per_req=s["n_blocks_per_req"],
            seq_lens=a["seq_lens"],
            block_size=s["block_size"],
            max_model_len=s["max_model_len"],
            pad_id=PAD_ID,
            batch_size=B,
            input_batch_size=B if ib is None else ib,
            **outputs,
        )

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        t = Step(case)
        if index >= t.B:
            return None, "cudagraph padding slot"
        if t.exceeds[index]:
            return index, "request stepping onto or past max_model_len (parked)"
        return index, f"request, block column {int(t.col[index])}"

    def shrink_candidates(self, case: Case) -> Iterator[Case]:
        a, s = case.arrays, case.scalars
        B = len(a["positions"])
        ib = case.launch.get("input_batch_size")

        def keep(rows: list[int]) -> Case:
            new_ib = None if ib is None else len(rows) + (ib - B)
            return case.replace(
                arrays={n: a[n][rows] for n in a}, launch={"input_batch_size": new_ib}
            )

        every = list(range(B))
        if B > 1:
            yield keep(every[: B // 2])
            yield keep(every[B // 2 :])
            for r in every:
                yield keep(every[:r] + every[r + 1 :])
        if ib is not None:
            yield case.replace(launch={"input_batch_size": None})
            if ib > B + 1:
                yield case.replace(launch={"input_batch_size": B + 1})
        if case.launch.get("aliased_positions"):
            yield case.replace(launch={"aliased_positions": False})
        if a["block_table"].shape[1] > s["n_blocks_per_req"]:
            yield case.replace(arrays={"block_table": a["block_table"][:, : s["n_blocks_per_req"]]})
        small = a["block_table"] % 1000
        if not np.array_equal(small, a["block_table"]):
            yield case.replace(arrays={"block_table": small.astype(np.int32)})
        bs, M, nb = s["block_size"], s["max_model_len"], s["n_blocks_per_req"]
        shorter = int(max(a["seq_lens"].max(initial=0), a["positions"].max(initial=0) + 1)) + 1
        keep = cdiv(shorter, bs)
        if shorter < M and keep < nb:  # the model length the requests need, and its table
            arrays = {"block_table": a["block_table"][:, :keep]}
            if "num_allocated_blocks" in a:
                arrays["num_allocated_blocks"] = np.minimum(a["num_allocated_blocks"], keep).astype(np.int32)
            yield case.replace(arrays=arrays, scalars={"max_model_len": shorter, "n_blocks_per_req": keep})


TARGET = EagleStep()
