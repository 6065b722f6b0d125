"""``expand_kernel``: docs/CONTRACT.md §12.

``expand_batch_to_tokens``: a per-request value repeated over the request's draft tokens,
``replace_from`` replaced by ``replace_to`` on the way (a greedy request's temperature ``0``
becomes ``1``). Launched as vLLM's dispatcher ``_expand`` launches it (grid ``(B,)``,
``MAX_NUM_TOKENS = MAX_SPEC_LEN = 128``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import MAX_NUM_SEQS
from ...targetkit.base import ContractViolation, TritonTarget, numpy_and_numba
from ...targetkit.draft_rows import MAX_SPEC_LEN, Rows, check_cu, check_int
from . import edges
from .layout import DTYPES, F32, I32, NAME

MODULE = "vllm/v1/sample/rejection_sampler.py"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_OUTPUT_EXTRA = 4096
"""How much longer than ``cu[B-1]`` an output may be (its tail stays untouched)."""


def _m(case: Case) -> int:
    m = case.launch.get("max_num_tokens")
    return MAX_SPEC_LEN if m is None else int(m)


class Expand(TritonTarget):
    name = NAME
    runner = "V1"
    function = NAME
    section = 12
    module = MODULE
    parameters = ("output_ptr", "input_ptr", "cu_num_tokens_ptr", "replace_from", "replace_to", "MAX_NUM_TOKENS")
    inputs = {"input": F32, "cu_num_tokens": I32}
    features = {
        "temperature": "vLLM's temperatures: float32, greedy 0 replaced by 1",
        "top_k": "vLLM's top-k: int32 1 .. V, 0 -> 0",
        "top_p": "vLLM's top-p: float32 in (0, 1], 0 -> 0",
        "float_data": "float32 data",
        "int32_data": "int32 data",
        "int64_data": "int64 data",
        "replaced": "an element equal to replace_from (replaced)",
        "negative_zero": "-0.0 in float32 data (equal to 0)",
        "nan_data": "NaN in float32 data (never equal)",
        "empty_row": "a request with no tokens (writes nothing)",
        "row_past_M": "a request with more tokens than MAX_NUM_TOKENS (only the first M written)",
        "other_M": "MAX_NUM_TOKENS other than vLLM's 128",
        "longer_output": "an output longer than cu[B-1] (its tail untouched)",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests",
        "row_of_128": "a request of 128 tokens (vLLM's MAX_SPEC_LEN: every lane of the launch stores)",
        "top_k_262144": "top-k values of 262144 (Gemma 3's vocabulary: no top-k)",
    }
    extremes = ("beyond_1024_requests", "row_of_128", "top_k_262144")

    oracle_functions = numpy_and_numba("expand")

    # -- contract ---------------------------------------------------------------------

    def production_rules(self, case: Case) -> None:
        a = case.arrays
        rows = check_cu(a.get("cu_num_tokens"), "arrays.cu_num_tokens")
        x = a.get("input")
        if x is None or x.dtype not in DTYPES or x.shape != (rows.B,):
            raise ContractViolation("arrays.input", "must be float32, int32 or int64 of shape [B] (one per request)")
        extra = sorted(set(a) - {"input", "cu_num_tokens"})
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        check_int(case.scalars, "replace_from", INT32_MIN, INT32_MAX)
        check_int(case.scalars, "replace_to", INT32_MIN, INT32_MAX)
        check_int(case.scalars, "num_tokens", rows.N, rows.N + MAX_OUTPUT_EXTRA)
        m = case.launch.get("max_num_tokens")
        if m is not None and (not isinstance(m, int) or isinstance(m, bool) or not 1 <= m <= 1024 or m & (m - 1)):
            raise ContractViolation("launch.max_num_tokens", "must be null (vLLM's 128) or a power of two from 1 to 1024")

    def features_of(self, case: Case) -> frozenset[str]:
        a, s = case.arrays, case.scalars
        rows = Rows.of(a["cu_num_tokens"])
        x = a["input"]
        M = _m(case)
        vllm_like = case.launch.get("max_num_tokens") is None and s["num_tokens"] == rows.N
        f32 = x.dtype == F32
        checks = {
            "temperature": vllm_like and f32 and s["replace_from"] == 0 and s["replace_to"] == 1
            and bool(np.all((x == 0) | (x >= np.float32(0.01)))),
            "top_k": vllm_like and x.dtype == I32 and s["replace_from"] == s["replace_to"] == 0 and bool(np.all(x >= 1)),
            "top_p": vllm_like and f32 and s["replace_from"] == s["replace_to"] == 0
            and bool(np.all((x > 0) & (x <= 1))),
            "float_data": f32,
            "int32_data": x.dtype == I32,
            "int64_data": x.dtype == np.int64,
            "replaced": bool(np.any(x == (np.float32(s["replace_from"]) if f32 else s["replace_from"]))),
            "negative_zero": f32 and bool(np.any((x == 0) & np.signbit(x))),
            "nan_data": f32 and bool(np.any(np.isnan(x))),
            "empty_row": bool(np.any(rows.d == 0)),
            "row_past_M": bool(np.any(rows.d > M)),
            "other_M": case.launch.get("max_num_tokens") is not None,
            "longer_output": s["num_tokens"] > rows.N,
            "several_requests": rows.B > 1,
            "many_requests": rows.B > 64,
            "beyond_1024_requests": rows.B > MAX_NUM_SEQS,
            "row_of_128": M == MAX_SPEC_LEN and bool(np.any(rows.d >= MAX_SPEC_LEN)),
            "top_k_262144": x.dtype == I32 and bool(np.any(x == 262144)),
        }
        return frozenset(k for k, v in checks.items() if v)

    # -- running ----------------------------------------------------------------------

    grid_field = "arrays.input"

    def programs(self, case: Case) -> int:
        return len(case.arrays["input"])

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {"output": (case.arrays["input"].dtype, (case.scalars["num_tokens"],))}

    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        """As ``_expand`` (vLLM 0.33.0): grid ``(input.shape[0],)``, ``MAX_NUM_TOKENS =
        MAX_SPEC_LEN = 128`` (or the case's)."""
        from ....kernels.launchers import launch_expand

        launch_expand(
            kernel, output=tensors["output"], input=tensors["input"], cu_num_tokens=tensors["cu_num_tokens"],
            replace_from=case.scalars["replace_from"], replace_to=case.scalars["replace_to"], max_num_tokens=_m(case),
        )  # fmt: skip

    def call_oracle(self, oracle: Any, case: Case, outputs: Mapping[str, np.ndarray]) -> None:
        oracle(
            output=outputs["output"], input=case.arrays["input"], cu_num_tokens=case.arrays["cu_num_tokens"],
            replace_from=case.scalars["replace_from"], replace_to=case.scalars["replace_to"], MAX_NUM_TOKENS=_m(case),
        )  # fmt: skip

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        rows = Rows.of(case.arrays["cu_num_tokens"])
        if index >= rows.N:
            return None, "past cu[B-1] (untouched)"
        r = min(int(np.searchsorted(rows.cu, index, side="right")), rows.B - 1)
        return r, f"token {index - int(rows.s[r])} of {int(rows.d[r])}"

    def split_requests(self, case: Case) -> list[Any]:
        rows = Rows.of(case.arrays["cu_num_tokens"])
        return [(case.arrays["input"][r], int(rows.d[r])) for r in range(rows.B)]

    def join_requests(self, case: Case, pieces: list[Any]) -> Case:
        from ...targetkit.draft_rows import cu_of

        x = np.array([p[0] for p in pieces], dtype=case.arrays["input"].dtype)
        cu = cu_of([p[1] for p in pieces])
        extra = case.scalars["num_tokens"] - Rows.of(case.arrays["cu_num_tokens"]).N
        return case.replace(arrays={"input": x, "cu_num_tokens": cu},
                            scalars={"num_tokens": (int(cu[-1]) if cu.size else 0) + extra})

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        rows = Rows.of(case.arrays["cu_num_tokens"])
        if case.scalars["num_tokens"] > rows.N:
            yield case.replace(scalars={"num_tokens": rows.N})
        if case.launch.get("max_num_tokens") is not None:
            yield case.replace(launch={"max_num_tokens": None})


    # -- extended tier (docs/CONTRACT.md §12.4): edges.py ----------------------------------

    def extended_rules(self, case: Case) -> None:
        edges.validate(case, dict(self.inputs))


TARGET = Expand()
