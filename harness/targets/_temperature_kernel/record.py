"""``_temperature_kernel``: docs/CONTRACT.md §28.

``apply_temperature`` (``vllm/v1/worker/gpu/sample/gumbel.py``), through
``SamplingStates.apply_temperature``: the target's float32 logits divided in place by each
request's temperature (rows of temperature 0 or 1 untouched), before top-k/top-p, min-p and
verification. Launched as ``apply_temperature`` launches it (grid ``(num_tokens, cdiv(V,
8192))``). The quotient is compared within its bound (2 ulps: a compiled division).
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...core.errors import ContractViolation
from ...targetkit.base import Tier
from ...targetkit.runner_v2_verify import (
    F32,
    GUMBEL,
    I64,
    STATS_BLOCK,
    VerifyTarget,
    cdiv,
    verify_oracles,
)
from ...targetkit.scale import past_limit
from . import edges
from .layout import NAME


class Temperature(VerifyTarget):
    state_index = ("expanded_idx_mapping",)
    per_state = ("temperature",)
    name = NAME
    runner = "V2"
    module = GUMBEL
    function = NAME
    section = 28
    launcher = "launch_temperature"
    parameters = ("logits_ptr", "logits_stride", "expanded_idx_mapping_ptr", "temperature_ptr", "vocab_size",
                  "BLOCK_SIZE")
    inputs = {"logits": F32, "expanded_idx_mapping": I64, "temperature": F32}
    inout = frozenset({"logits"})
    scalar_names = ("vocab_size",)
    launch_names = ("BLOCK_SIZE",)
    features = {
        "greedy_row": "a row of temperature 0: untouched",
        "unit_temperature": "a row of temperature 1: untouched",
        "scaled_row": "a row divided by its temperature",
        "low_temperature": "a temperature below 0.1 (quotients ten times the logits and more)",
        "shared_state_row": "rows of one request (its drafts and bonus) sharing a state row",
        "untouched_state_rows": "state rows no row names",
        "several_blocks": "a vocabulary of more than one 8192-wide block",
        "many_rows": "more than 256 rows",
        # production extremes
        "vocab_past_131072": "a 151936- or 262144-id vocabulary (block offsets past 2**17)",
        # production scale
        "row_offset_past_2_31": "a row whose offset token_idx * logits_stride lies past 2**31 elements",
    }
    extremes = ("vocab_past_131072", "many_rows")
    scale_features = ("row_offset_past_2_31",)
    oracle_functions = verify_oracles("temperature")

    def rules(self, case: Case, tier: Tier) -> None:
        """§28.2: finite model logits (float32 ``[num_tokens, V]``, ``V`` the row's width), state
        rows inside ``temperature``, temperatures ``>= 0`` and finite, vLLM's block of 8192."""
        if tier == "extended":
            edges.validate(case)
            return
        edges.shapes(case)
        a = case.arrays
        if not set(a) <= set(self.inputs):
            raise ContractViolation(f"arrays.{sorted(set(a) - set(self.inputs))[0]}", "is not an input of this kernel")
        if case.scalars or case.launch:
            raise ContractViolation("scalars.vocab_size", "production passes the row's width and vLLM's block (none given)")
        R = a["temperature"].shape[0]
        rows = a["expanded_idx_mapping"]
        if np.any(rows < 0) or np.any(rows >= R):
            raise ContractViolation("arrays.expanded_idx_mapping", f"must hold state rows in [0, {R})")
        if not np.all(np.isfinite(a["temperature"])) or np.any(a["temperature"] < 0):
            raise ContractViolation("arrays.temperature", "must be finite and >= 0")
        if not np.all(np.isfinite(a["logits"])):
            raise ContractViolation("arrays.logits", "must be finite (the model's logits)")

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        T, W = a["logits"].shape
        rows = a["expanded_idx_mapping"]
        t = a["temperature"][rows]
        checks = {
            "greedy_row": bool(np.any(t == 0)),
            "unit_temperature": bool(np.any(t == 1)),
            "scaled_row": bool(np.any((t != 0) & (t != 1))),
            "low_temperature": bool(np.any((t > 0) & (t < 0.1))),
            "shared_state_row": len(np.unique(rows)) < T,
            "untouched_state_rows": len(np.unique(rows)) < a["temperature"].shape[0],
            "several_blocks": case.scalars.get("vocab_size", W) > STATS_BLOCK,
            "many_rows": T > 256,
            "vocab_past_131072": case.scalars.get("vocab_size", W) > 1 << 17,
            "row_offset_past_2_31": past_limit((T - 1) * W),
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        W = case.arrays["logits"].shape[1]
        t, v = divmod(index, W)
        return t, f"row {t}, column {v}" + (" (past vocab_size)" if v >= case.scalars.get("vocab_size", W) else "")

    def programs(self, case: Case) -> int:
        T, W = case.arrays["logits"].shape
        return T * cdiv(case.scalars.get("vocab_size", W), case.launch.get("BLOCK_SIZE") or STATS_BLOCK)

    def split_requests(self, case: Case) -> list[int] | None:
        return list(range(case.arrays["logits"].shape[0]))

    def join_requests(self, case: Case, pieces: list[int]) -> Case:
        return case.replace(arrays={"logits": case.arrays["logits"][pieces].copy(),
                                    "expanded_idx_mapping": case.arrays["expanded_idx_mapping"][pieces].copy()})


TARGET = Temperature()
