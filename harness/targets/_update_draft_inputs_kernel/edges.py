"""The extended tier of ``_update_draft_inputs_kernel``: docs/CONTRACT.md §27.4.

``step = 0`` and ``step >= num_speculative_steps - 1`` (only the draft written), a
``hidden_size`` smaller than the rows, any float data (NaN payloads copied bit for bit), and
positions and lengths anywhere below the int64 and int32 limits (the clamps engage). The
oracles compute §27.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, INT32_MIN, Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import F32, I32, I64, need, need_int
from .layout import build

FEATURES = {
    "step_outside": "step 0, or a step at or past the last (only the draft written)",
    "hidden_cut_short": "a hidden_size smaller than the rows (the columns past it untouched)",
    "nan_payloads": "hidden states holding NaN payloads or infinities (copied bit for bit)",
    "state_anywhere": "positions and lengths of no drafter (past the model's length, negative, near the limits)",
}


def validate(case: Case) -> None:
    """Buffers of the production tier's shapes, ``0 <= step < K``, positions within ``2**62``,
    any lengths."""
    a = case.arrays
    B = need_int(case.scalars, "num_reqs", 1)
    K = need_int(case.scalars, "num_speculative_steps", 1, 64)
    need_int(case.scalars, "max_model_len", 1, INT32_MAX)
    if not isinstance(case.scalars.get("ADVANCE_DRAFT_POSITIONS"), bool):
        raise ContractViolation("scalars.ADVANCE_DRAFT_POSITIONS", "must be true or false")
    step = need(a, "current_draft_step", I64, (1,))
    if not 0 <= int(step[0]) < K:
        raise ContractViolation("arrays.current_draft_step", "must be in [0, num_speculative_steps)")
    need(a, "draft_tokens", I64, (B,))
    h = need(a, "hidden_states", F32, ndim=2, at_least=B)
    pos = need(a, "positions", I64, ndim=1, at_least=B)
    need(a, "sample_src_positions", I64, ndim=1, at_least=B)
    need(a, "seq_lens", I32, ndim=1, at_least=B)
    if np.any(np.abs(pos[:B]) > 2**62) or np.any(np.abs(a["sample_src_positions"][:B]) > 2**62):
        raise ContractViolation("arrays.positions", "must lie within 2**62")
    hs = case.launch.get("hidden_size")
    if hs is not None and not (isinstance(hs, int) and 0 <= hs <= h.shape[1]):
        raise ContractViolation("launch.hidden_size", "must be null or in [0, the rows' width]")


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    B, K, M = (case.scalars[k] for k in ("num_reqs", "num_speculative_steps", "max_model_len"))
    step = int(a["current_draft_step"][0])
    h = a["hidden_states"]
    hs = case.launch.get("hidden_size")
    checks = {"step_outside": step == 0 or step >= K - 1,
              "hidden_cut_short": hs is not None and hs < h.shape[1],
              "nan_payloads": bool(np.any(~np.isfinite(h))),
              "state_anywhere": bool(np.any(a["positions"][:B] >= M) or np.any(a["positions"][:B] < 0)
                                     or np.any(a["seq_lens"][:B] > M) or np.any(a["seq_lens"][:B] < 1))}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 8 rows, any step, hidden states of any bits, any state."""
    B = c.integer(1, 8)
    K = c.integer(1, 6)
    H = c.integer(1, 40)
    bits = c.array_of(np.int64, B * H, [(0, 2**32 - 1), (0x7F800000, 0x7FFFFFFF)])
    hidden = bits.astype(np.uint32).view(np.float32).reshape(B, H)
    pos = c.array_of(np.int64, B + 2, [(0, 200), (-(2**62), 2**62)])
    seqs = c.array_of(np.int64, B + 2, [(0, 200), (INT32_MIN, INT32_MAX)])
    src = c.array_of(np.int64, B + 2, [(0, 200), (-(2**62), 2**62)])
    return build(c.integer(0, K - 1), K, c.array_of(np.int64, B, [(0, 99), (-(2**63), 2**63 - 1)]), hidden, pos, seqs,
                 src, c.integer(1, 150), c.boolean(), c.choice([None, c.integer(0, H)]))


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """The first row alone."""
    if case.scalars["num_reqs"] > 1:
        yield case.replace(arrays={"draft_tokens": case.arrays["draft_tokens"][:1]}, scalars={"num_reqs": 1})
