"""The extended tier of ``_prepare_decode_inputs_kernel``: docs/CONTRACT.md §26.4.

Positions and sequence lengths anywhere (the clamps as §26.1 says; ``seq`` wrapping in int32;
positions near the int64 limit left out), ``max_num_reqs = B``, token ids outside int32
(truncated), a ``draft_tokens`` of one column (stride 1). The oracles compute §26.1 on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, INT32_MIN, Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import I32, I64, need, need_int
from .layout import build

FEATURES = {
    "positions_anywhere": "positions and sample keys of no prefill (past the model's length, negative)",
    "lengths_wrap": "a target length minus its rejected count (+ 1) past the int32 range (wraps)",
    "wide_ids": "a first draft id outside int32 (truncated)",
    "one_column": "a draft_tokens table of one column (stride 1)",
}


def validate(case: Case) -> None:
    """Buffers of the production tier's shapes, any values but positions within ``2**62``."""
    a = case.arrays
    B = need_int(case.scalars, "num_reqs", 1)
    M = need_int(case.scalars, "max_num_reqs", B)
    need_int(case.scalars, "max_model_len", 1, INT32_MAX)
    if not isinstance(case.scalars.get("ADVANCE_DRAFT_POSITIONS"), bool):
        raise ContractViolation("scalars.ADVANCE_DRAFT_POSITIONS", "must be true or false")
    d = need(a, "draft_tokens", I64, ndim=2)
    if d.shape[0] < B:
        raise ContractViolation("arrays.draft_tokens", "must have a row per batch row")
    need(a, "target_seq_lens", I32, (B,))
    need(a, "num_rejected", I32, (B,))
    pos = need(a, "positions", I64, ndim=1, at_least=B)
    need(a, "sample_src_positions", I64, ndim=1, at_least=B)
    if np.any(np.abs(pos[:B]) > 2**62) or np.any(np.abs(a["sample_src_positions"][:B]) > 2**62):
        raise ContractViolation("arrays.positions", "must lie within 2**62 (the sums stay in int64)")
    if M + 1 > 1 << 16:
        raise ContractViolation("scalars.max_num_reqs", "must be below 65536")


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    B = case.scalars["num_reqs"]
    seq = a["target_seq_lens"].astype(np.int64) - a["num_rejected"].astype(np.int64)
    first = a["draft_tokens"][:B, 0]
    M = case.scalars["max_model_len"]
    checks = {"positions_anywhere": bool(np.any(a["positions"][:B] >= M) or np.any(a["positions"][:B] < 0)),
              "lengths_wrap": bool(np.any((seq + 1 > INT32_MAX) | (seq < INT32_MIN))),
              "wide_ids": bool(np.any((first < INT32_MIN) | (first > INT32_MAX))),
              "one_column": a["draft_tokens"].shape[1] == 1}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 12 rows with any lengths, rejected counts, positions and ids."""
    B = c.integer(1, 12)
    R = B + c.integer(0, 4)
    K = c.integer(1, 4)
    seq = c.array_of(np.int64, B, [(1, 100), (INT32_MIN, INT32_MAX)])
    rejected = c.array_of(np.int64, B, [(0, 4), (INT32_MIN, INT32_MAX)])
    total = np.clip(seq + rejected, INT32_MIN, INT32_MAX)
    rejected = total - seq
    ids = c.array_of(np.int64, R * K, [(0, 99), (-(2**63), 2**63 - 1)]).reshape(R, K)
    pos = c.array_of(np.int64, R + 3, [(0, 200), (-(2**62), 2**62)])
    src = c.array_of(np.int64, R, [(0, 200), (-(2**62), 2**62)])
    return build(seq, rejected, ids, c.integer(1, 150), R, c.boolean(), pos, src)


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """The first row alone."""
    if case.scalars["num_reqs"] > 1:
        a = case.arrays
        yield case.replace(arrays={"target_seq_lens": a["target_seq_lens"][:1], "num_rejected": a["num_rejected"][:1]},
                           scalars={"num_reqs": 1})
