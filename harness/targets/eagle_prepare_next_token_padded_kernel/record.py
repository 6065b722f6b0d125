"""``eagle_prepare_next_token_padded_kernel``: docs/CONTRACT.md §3."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.shrink_steps import shorter
from ...generation.strategies import (
    ID16_MAX,
    INT32_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    next_power_of_2,
)
from ...targetkit.base import ContractViolation, TritonTarget, numpy_and_numba
from . import edges
from .layout import BOOL, I32, MAX_SPEC_LEN, NAME, subset


class PrepareNextTokenPadded(TritonTarget):
    name = NAME
    runner = "V1"
    module = "vllm/v1/spec_decode/utils.py"
    function = NAME
    section = 3
    parameters = (
        "sampled_token_ids_ptr",
        "discard_request_mask_ptr",
        "backup_next_token_ids_ptr",
        "next_token_ids_ptr",
        "valid_sampled_tokens_count_ptr",
        "vocab_size",
        "num_sampled_tokens_per_req",
        "num_reqs",
        "stride_sampled_token_ids",
        "BLOCK_SIZE_TOKENS",
    )
    inputs = {"sampled_token_ids": I32, "discard_request_mask": BOOL, "backup_next_token_ids": I32}
    scalar_names = ("vocab_size", "num_sampled_tokens_per_req", "num_reqs")
    launch_names = ("block_size_tokens", "grid_size")
    features = {
        "discard_none": "no request discarded",
        "discard_all": "every request discarded",
        "discard_some": "some but not all requests discarded",
        "full_row": "a kept request whose every column is valid",
        "several_valid_columns": "a kept request with at least two valid columns (the last one wins)",
        "block_past_stride": "BLOCK_SIZE_TOKENS larger than the row stride (lanes past the row are masked)",
        "minus_one_suffix": "a kept request with -1 padding after its valid ids",
        "single_column": "S = 1 (no drafts)",
        "overallocated_buffers": "discard/backup buffers longer than num_reqs",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests (max_num_seqs of 1024 and more)",
        "spec_tokens_15_plus": "S >= 16 columns (num_speculative_tokens >= 15)",
        "valid_past_column_16": "a kept request with a valid id in column 16 or later",
        "many_rejected": "a kept request with 16 or more rejected (-1) columns",
        "vocab_256k": "vocab_size of 256000 or more",
        "id_near_int32_max": "an id of 2**31-2 in a kept request (the largest id of a 2**31-1 vocabulary)",
        "ids_past_65535": "a kept request whose next token (its last valid id) is above 65535",
    }
    extremes = ("beyond_1024_requests", "spec_tokens_15_plus", "valid_past_column_16", "many_rejected",
                "vocab_256k", "ids_past_65535", "id_near_int32_max")

    oracle_functions = numpy_and_numba("eagle_prepare_next_token_padded")

    def production_rules(self, case: Case) -> None:
        a, s = case.arrays, case.scalars
        for name, dtype in self.inputs.items():
            if name not in a:
                raise ContractViolation(f"arrays.{name}", "is required")
            if a[name].dtype != dtype:
                raise ContractViolation(f"arrays.{name}", f"must be a {dtype} array")
        for name in self.scalar_names:
            v = s.get(name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ContractViolation(f"scalars.{name}", "must be an int")
        R, S, vocab = s["num_reqs"], s["num_sampled_tokens_per_req"], s["vocab_size"]
        ids = a["sampled_token_ids"]
        if R < 1:
            raise ContractViolation("scalars.num_reqs", "must be >= 1")
        if not 1 <= S <= MAX_SPEC_LEN + 1:
            raise ContractViolation("scalars.num_sampled_tokens_per_req", f"must be from 1 to {MAX_SPEC_LEN + 1} "
                                    f"(vLLM's rejection sampler takes at most {MAX_SPEC_LEN} drafts per request)")
        if ids.ndim != 2 or ids.shape[0] != R:
            raise ContractViolation("arrays.sampled_token_ids", "must be 2-D with num_reqs rows (columns = row stride)")
        if S > ids.shape[1]:
            raise ContractViolation("scalars.num_sampled_tokens_per_req", "must be from 1 to the row stride (columns of sampled_token_ids)")
        if not 1 <= vocab <= INT32_MAX:
            raise ContractViolation("scalars.vocab_size", "must be from 1 to 2**31-1")
        for name in ("discard_request_mask", "backup_next_token_ids"):
            if a[name].ndim != 1 or len(a[name]) < R:
                raise ContractViolation(f"arrays.{name}", "must be 1-D with at least num_reqs entries")
        if ids.shape[1] != S:
            raise ContractViolation("arrays.sampled_token_ids", "must have exactly S columns: the sampler's fresh buffer has stride(0) = S (wider rows are the extended tier)")
        head = ids.astype(np.int64)
        valid = (head >= 0) & (head < vocab)
        count = valid.sum(axis=1)
        if np.any(count < 1) or np.any(valid != (np.arange(S) < count[:, None])) or np.any(head[~valid] != -1):
            raise ContractViolation("arrays.sampled_token_ids", "each row must be the rejection sampler's: at least one vocabulary id (0 <= id < vocab_size), then only -1 (others are the extended tier)")
        backup = a["backup_next_token_ids"][:R].astype(np.int64)
        if np.any(backup < 0) or np.any(backup >= vocab):
            raise ContractViolation("arrays.backup_next_token_ids", "the first num_reqs entries must be vocabulary ids (0 <= id < vocab_size; others are the extended tier)")
        block = case.launch.get("block_size_tokens")
        if block not in (None, next_power_of_2(S)):
            raise ContractViolation("launch.block_size_tokens", "must be null or vLLM's next_power_of_2(S) (other blocks are the extended tier)")
        grid = case.launch.get("grid_size")
        if grid not in (None, R):
            raise ContractViolation("launch.grid_size", "must be null or num_reqs, vLLM's grid (padded grids are the extended tier)")

    def features_of(self, case: Case) -> frozenset[str]:
        s = case.scalars
        R, S, vocab = s["num_reqs"], s["num_sampled_tokens_per_req"], s["vocab_size"]
        ids = case.arrays["sampled_token_ids"][:, :S].astype(np.int64)
        disc = case.arrays["discard_request_mask"][:R]
        valid = (ids != -1) & (ids < vocab)
        kept = ~disc
        count = valid.sum(axis=1)
        nonneg = ids != -1
        cols = np.arange(S)
        last_col = np.where(valid, cols, -1).max(axis=1) if S else np.full(R, -1)
        last_id = ids[np.arange(R), np.maximum(last_col, 0)] if S else np.zeros(R, dtype=np.int64)
        checks = {
            "discard_none": not disc.any(),
            "discard_all": bool(disc.all()),
            "discard_some": bool(disc.any() and not disc.all()),
            "full_row": np.any(kept & (count == S)),
            "several_valid_columns": np.any(kept & (count >= 2)),
            "block_past_stride": (case.launch.get("block_size_tokens") or next_power_of_2(S)) > case.arrays["sampled_token_ids"].shape[1],
            "minus_one_suffix": np.any(kept & nonneg.any(axis=1) & (ids[:, -1] == -1)),
            "single_column": S == 1,
            "overallocated_buffers": len(case.arrays["discard_request_mask"]) > R,
            "several_requests": R > 1,
            "many_requests": R > 64,
            "beyond_1024_requests": R > MAX_NUM_SEQS,
            "spec_tokens_15_plus": S >= SPEC_TOKENS + 1,
            "valid_past_column_16": np.any(kept & (last_col >= 16)),
            "many_rejected": np.any(kept & ((~nonneg).sum(axis=1) >= 16)),
            "vocab_256k": vocab >= 256000,
            "id_near_int32_max": np.any(kept[:, None] & (ids == INT32_MAX - 1)),
            "ids_past_65535": np.any(kept & (last_col >= 0) & (last_id > ID16_MAX)),
        }
        return frozenset(k for k, v in checks.items() if v)

    grid_field = "launch.grid_size"

    def programs(self, case: Case) -> int:
        return case.launch.get("grid_size") or case.scalars["num_reqs"]

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        R = case.scalars["num_reqs"]
        return {"next_token_ids": (I32, (R,)), "valid_sampled_tokens_count": (I32, (R,))}

    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        from ....kernels.launchers import launch_eagle_prepare_next_token_padded

        S = case.scalars["num_sampled_tokens_per_req"]
        t = dict(tensors)
        t["sampled_token_ids"] = t["sampled_token_ids"][:, :S]
        launch_eagle_prepare_next_token_padded(
            kernel,
            **t,
            vocab_size=case.scalars["vocab_size"],
            num_reqs=case.scalars["num_reqs"],
            block_size_tokens=case.launch.get("block_size_tokens"),
            grid_size=case.launch.get("grid_size"),
        )

    def call_oracle(self, oracle: Any, case: Case, outputs: Mapping[str, np.ndarray]) -> None:
        S = case.scalars["num_sampled_tokens_per_req"]
        block = case.launch.get("block_size_tokens") or next_power_of_2(S)
        oracle(**case.arrays, **case.scalars, block_size_tokens=block, **outputs)

    def split_requests(self, case: Case) -> list[int]:
        return list(range(case.scalars["num_reqs"]))

    def join_requests(self, case: Case, pieces: list[int]) -> Case:
        return subset(case, pieces)

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        a, s = case.arrays, case.scalars
        R, S = s["num_reqs"], s["num_sampled_tokens_per_req"]
        rows = a["sampled_token_ids"]
        every = list(range(R))
        if rows.shape[1] > S:
            yield subset(case, every, rows=rows[:, :S])
        if len(a["discard_request_mask"]) > R:
            yield subset(case, every, tail=False)
        if case.launch.get("block_size_tokens") is not None:
            yield subset(case, every, block=None)
        if case.launch.get("grid_size") is not None:
            yield subset(case, every, grid=None)
        for fewer in shorter(S):  # a row's first columns keep -1 a suffix
            block = case.launch.get("block_size_tokens")
            yield subset(case, every, rows=rows[:, :fewer], S=fewer,
                          block=None if block is None or block < fewer else block)
        if np.any(a["backup_next_token_ids"]):
            yield case.replace(arrays={"backup_next_token_ids": np.zeros_like(a["backup_next_token_ids"])})

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        disc = bool(case.arrays["discard_request_mask"][index])
        return index, "discarded request" if disc else "kept request"

    # -- extended tier (docs/CONTRACT.md §3.4): edges.py ----------------------------------

    def extended_rules(self, case: Case) -> None:
        edges.validate(case, dict(self.inputs))


TARGET = PrepareNextTokenPadded()
