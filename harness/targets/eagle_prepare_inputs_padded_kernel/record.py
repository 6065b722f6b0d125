"""``eagle_prepare_inputs_padded_kernel``: docs/CONTRACT.md §2."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.shrink_steps import shorter
from ...generation.strategies import (
    INT16_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
)
from ...targetkit.base import (
    ContractViolation,
    TritonTarget,
    Variant,
    numpy_and_numba,
    require_arrays,
)
from . import edges
from .layout import I32, NAME, build


class PrepareInputsPadded(TritonTarget):
    name = NAME
    runner = "V1"
    module = "vllm/v1/spec_decode/utils.py"
    function = NAME
    section = 2
    parameters = (
        "cu_num_draft_tokens_ptr",
        "valid_sampled_tokens_count_ptr",
        "query_start_loc_gpu_ptr",
        "token_indices_to_sample_ptr",
        "num_rejected_tokens_gpu_ptr",
        "num_reqs",
    )
    variants = {
        "without num_rejected_tokens": Variant(
            parameters=("cu_num_draft_tokens_ptr", "valid_sampled_tokens_count_ptr",
                        "query_start_loc_gpu_ptr", "token_indices_to_sample_ptr", "num_reqs"),
            lacks=("num_rejected_tokens",),
            found_in="vLLM 0.12-0.13, and the torch prepare_inputs_padded of 0.11 (the rejected counts came later)",
        ),
    }
    inputs = {"cu_num_draft_tokens": I32, "valid_sampled_tokens_count": I32, "query_start_loc": I32}
    scalar_names = ("num_reqs",)
    launch_names = ("grid_size",)
    features = {
        "no_drafts": "a request without drafts (prefill, d = 0): rejected = 0",
        "drafts": "a request with drafts (d > 0)",
        "all_accepted": "every draft accepted (valid = d + 1): nothing rejected",
        "none_accepted": "no draft accepted (valid = 1): all d drafts rejected",
        "partly_accepted": "1 < valid < d + 1",
        "discarded": "a discarded request (valid = 0, d = 0)",
        "long_prefill": "a request longer than its drafts need (qlen > d + 1)",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests (max_num_seqs of 1024 and more)",
        "offsets_past_32767": "query_start_loc past 32767 (max_num_batched_tokens of 32k and more)",
        "prefill_thousands": "a request of 2048 tokens or more (a long prefill)",
        "spec_tokens_15_plus": "a request with 15 or more drafts (num_speculative_tokens >= 15)",
        "many_rejected": "a request with 16 or more rejected drafts",
    }
    extremes = ("beyond_1024_requests", "offsets_past_32767", "prefill_thousands", "spec_tokens_15_plus",
                "many_rejected")

    oracle_functions = numpy_and_numba("eagle_prepare_inputs_padded")

    def production_rules(self, case: Case) -> None:
        a = case.arrays
        require_arrays(a, self.inputs)
        R = case.scalars.get("num_reqs")
        if not isinstance(R, int) or isinstance(R, bool) or R < 1:
            raise ContractViolation("scalars.num_reqs", "must be an int >= 1")
        cu, valid, qsl = (a[n].astype(np.int64) for n in self.inputs)
        if len(cu) != R or len(valid) != R:
            raise ContractViolation("arrays.cu_num_draft_tokens", "cu_num_draft_tokens and valid_sampled_tokens_count need num_reqs entries")
        if len(qsl) != R + 1 or qsl[0] != 0 or np.any(np.diff(qsl) < 1):
            raise ContractViolation("arrays.query_start_loc", "must be num_reqs + 1 entries, start at 0 and increase strictly")
        d = np.diff(np.concatenate([[0], cu]))
        if np.any(d < 0):
            raise ContractViolation("arrays.cu_num_draft_tokens", "must be an inclusive cumulative sum (non-decreasing, >= 0)")
        if np.any(np.diff(qsl) < d + 1):
            raise ContractViolation("arrays.query_start_loc", "every request needs qlen >= num_draft_tokens + 1")
        bad = np.where(d > 0, (valid < 1) | (valid > d + 1), (valid < 0) | (valid > 1))
        if np.any(bad):
            raise ContractViolation("arrays.valid_sampled_tokens_count", "must be 1..d+1 for a request with drafts, 0 or 1 without")
        grid = case.launch.get("grid_size")
        if grid not in (None, R):
            raise ContractViolation("launch.grid_size", "must be null or num_reqs, vLLM's grid (padded grids are the extended tier)")

    def features_of(self, case: Case) -> frozenset[str]:
        cu = case.arrays["cu_num_draft_tokens"].astype(np.int64)
        valid = case.arrays["valid_sampled_tokens_count"].astype(np.int64)
        qlen = np.diff(case.arrays["query_start_loc"].astype(np.int64))
        d = np.diff(np.concatenate([[0], cu]))
        R = case.scalars["num_reqs"]
        checks = {
            "no_drafts": np.any(d == 0),
            "drafts": np.any(d > 0),
            "all_accepted": np.any((d > 0) & (valid == d + 1)),
            "none_accepted": np.any((d > 0) & (valid == 1)),
            "partly_accepted": np.any((d > 1) & (valid > 1) & (valid < d + 1)),
            "discarded": np.any((d == 0) & (valid == 0)),
            "long_prefill": np.any(qlen > d + 1),
            "several_requests": R > 1,
            "many_requests": R > 64,
            "beyond_1024_requests": R > MAX_NUM_SEQS,
            "offsets_past_32767": int(case.arrays["query_start_loc"].max()) > INT16_MAX,
            "prefill_thousands": int(qlen.max()) >= 2048,
            "spec_tokens_15_plus": int(d.max()) >= SPEC_TOKENS,
            "many_rejected": np.any((d > 0) & (d + 1 - valid >= 16)),
        }
        return frozenset(k for k, v in checks.items() if v)

    grid_field = "launch.grid_size"

    def programs(self, case: Case) -> int:
        return case.launch.get("grid_size") or case.scalars["num_reqs"]

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        R = case.scalars["num_reqs"]
        return {"token_indices_to_sample": (I32, (R,)), "num_rejected_tokens": (I32, (R,))}

    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        from ....kernels.launchers import launch_eagle_prepare_inputs_padded

        # the variant without num_rejected_tokens (vLLM 0.12's call site) gets no such tensor
        launch_eagle_prepare_inputs_padded(
            kernel, **{"num_rejected_tokens": None, **tensors}, num_reqs=case.scalars["num_reqs"],
            grid_size=case.launch.get("grid_size"),
        )

    def call_oracle(self, oracle: Any, case: Case, outputs: Mapping[str, np.ndarray]) -> None:
        oracle(**case.arrays, num_reqs=case.scalars["num_reqs"], **outputs)

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        return index, "per-request output"

    def split_requests(self, case: Case) -> list[tuple[int, int, int]]:
        cu = case.arrays["cu_num_draft_tokens"].astype(np.int64)
        d = np.diff(np.concatenate([[0], cu])).tolist()
        v = case.arrays["valid_sampled_tokens_count"].tolist()
        e = (np.diff(case.arrays["query_start_loc"].astype(np.int64)) - np.asarray(d) - 1).tolist()
        return list(zip(d, v, e, strict=True))

    def join_requests(self, case: Case, pieces: list[tuple[int, int, int]]) -> Case:
        grid = case.launch.get("grid_size")  # a padded grid keeps its padding
        g = None if grid is None else len(pieces) + (grid - case.scalars["num_reqs"])
        return build([r[0] for r in pieces], [r[1] for r in pieces], [r[2] for r in pieces], g)

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        reqs = self.split_requests(case)
        if case.launch.get("grid_size") is not None:
            yield build(*(list(x) for x in zip(*reqs, strict=True)), None)
        if sum(1 for r in reqs if r[2]) > 1:
            yield self.join_requests(case, [(d, v, 0) for d, v, _ in reqs])
        for r, (dr, vr, er) in enumerate(reqs):
            for e in [0, *shorter(er)] if er else []:
                yield self.join_requests(case, reqs[:r] + [(dr, vr, e)] + reqs[r + 1 :])
            if dr:
                half = dr // 2
                valid = min(vr, half + 1) if half else min(vr, 1)
                yield self.join_requests(case, reqs[:r] + [(half, valid, er)] + reqs[r + 1 :])

    # -- extended tier (docs/CONTRACT.md §2.4): edges.py ----------------------------------

    def extended_rules(self, case: Case) -> None:
        edges.validate(case, dict(self.inputs))


TARGET = PrepareInputsPadded()
