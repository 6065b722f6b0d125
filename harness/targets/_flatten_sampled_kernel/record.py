"""``_flatten_sampled_kernel``: docs/CONTRACT.md §24.

The rejection sampler's logprobs path: each row's sampled tokens (the accepted drafts and the
bonus or recovered token, ``[B, K + 1]``) written into the logits rows they were sampled from.
Launched as vLLM's ``RejectionSampler._get_logprobs_tensors`` launches it (grid ``(B,)``,
``num_warps = 1``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, MAX_NUM_SEQS
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import (
    I32,
    I64,
    REJECTION,
    V2Target,
    check_cu,
    need,
    need_int,
    only,
    row_of,
    v2_oracles,
)
from . import edges
from .layout import NAME


class FlattenSampled(V2Target):
    name = NAME
    runner = "V2"
    module = REJECTION
    function = NAME
    section = 24
    launcher = "launch_flatten_sampled"
    parameters = ("flat_sampled_ptr", "sampled_ptr", "sampled_stride", "num_sampled_ptr", "cu_num_logits_ptr")
    inputs = {"sampled": I64, "num_sampled": I32, "cu_num_logits": I32}
    scalar_names = ("num_reqs",)
    per_row = {"sampled": 0, "num_sampled": 0, "cu_num_logits": 1}
    features = {
        "all_kept": "a row with drafts whose every logit sampled a token (the drafts and the bonus)",
        "rejected": "a row that rejected a draft (fewer tokens than logits: its last logits rows untouched)",
        "no_drafts_row": "a row of one logit",
        "full_row": "a row of K + 1 logits",
        "unread_columns": "a row of sampled with columns past its count (never read)",
        "several_rows": "more than one row",
        "many_requests": "more than 64 rows",
        # production extremes
        "ids_past_32767": "a token id past 32767 (vocabularies of 151936 and 262144)",
        "beyond_1024_rows": "more than 1024 rows (max_num_seqs of 1024 and more)",
    }
    extremes = ("ids_past_32767", "beyond_1024_rows")
    oracle_functions = v2_oracles("flatten_sampled")

    def production_rules(self, case: Case) -> None:
        """§24.2: ``sampled`` int64 ``[B, K + 1]`` (``K <= 32``), ``1 <= num_sampled <= logits
        <= K + 1``, token ids in ``[0, 262144)`` where they are read."""
        a = case.arrays
        only(a, set(self.inputs))
        B = need_int(case.scalars, "num_reqs", 1)
        sampled = need(a, "sampled", I64, ndim=2)
        if sampled.shape[0] != B or not 2 <= sampled.shape[1] <= 33:
            raise ContractViolation("arrays.sampled", "must be [num_reqs, K + 1] with 1 <= K <= 32")
        nl = check_cu(case, B, 1, sampled.shape[1])
        ns = need(a, "num_sampled", I32, (B,)).astype(np.int64)
        if np.any(ns < 1) or np.any(ns > nl):
            raise ContractViolation("arrays.num_sampled", "must be in [1, the row's logits] (rejection_sample)")
        read = np.arange(sampled.shape[1])[None, :] < ns[:, None]
        if np.any((sampled[read] < 0) | (sampled[read] >= 262144)):
            raise ContractViolation("arrays.sampled", "a sampled id must be a token id in [0, 262144)")

    def extended_rules(self, case: Case) -> None:
        edges.validate(case)

    def features_of(self, case: Case) -> frozenset[str]:
        a = case.arrays
        nl = np.diff(a["cu_num_logits"].astype(np.int64))
        ns = a["num_sampled"].astype(np.int64)
        W = a["sampled"].shape[1]
        read = np.arange(W)[None, :] < ns[:, None]
        B = len(ns)
        checks = {
            "all_kept": bool(np.any((nl > 1) & (ns == nl))),
            "rejected": bool(np.any(ns < nl)),
            "no_drafts_row": bool(np.any(nl == 1)),
            "full_row": bool(np.any(nl == W)),
            "unread_columns": bool(np.any(ns < W)),
            "several_rows": B > 1,
            "many_requests": B > 64,
            "ids_past_32767": bool(np.any(a["sampled"][read] > INT16_MAX)),
            "beyond_1024_rows": B > MAX_NUM_SEQS,
        }
        return frozenset(k for k, v in checks.items() if v)

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {"flat_sampled": (I64, (max(int(case.arrays["cu_num_logits"][-1]), 0),))}

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        return row_of(case.arrays["cu_num_logits"][:-1].astype(np.int64), index), "the row's logits rows"

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        """One sampled token per row."""
        B = int(case.scalars["num_reqs"])
        if np.any(case.arrays["num_sampled"] != 1):
            yield case.replace(arrays={"num_sampled": np.ones(B, np.int32)})


TARGET = FlattenSampled()
