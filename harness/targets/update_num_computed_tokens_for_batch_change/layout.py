"""How a case of ``update_num_computed_tokens_for_batch_change`` is laid out (docs/CONTRACT.md §8.1):
the function's arguments, each row's quantities of the contract's table, the case built from rows.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    INT32_MAX,
    INT32_MIN,
)

NAME = "update_num_computed_tokens_for_batch_change"
"""The target's name (its registry key, folder and vLLM name)."""




I32, I64 = np.dtype(np.int32), np.dtype(np.int64)


ARRAYS = {
    "num_computed_tokens": I32,
    "num_accepted_tokens": I32,
    "prev_positions": I64,
    "valid_sampled_token_count": I32,
    "prev_num_draft_tokens": I32,
    "cpu_num_computed_tokens": I32,
}
"""The function's arguments, in its order."""


INOUT = ("num_computed_tokens", "num_accepted_tokens")


MODES = ("eager", "compiled")


NEAR_LIMIT = 1 << 16


MAX_COUNT = (1 << 30)
"""Largest token count of the production tier (docs/CONTRACT.md §8.2: counts are token counts,
``0 .. max_model_len``, far below 2**31; max_model_len in the billions is out of reach)."""


MAX_DRAFTS = 64
"""Most drafts a previous row has in the production tier (``num_speculative_tokens``)."""


class Rows:
    """Per-row quantities of the contract's table (int64 arrays), for features and reports."""

    def __init__(self, case: Case) -> None:
        a = {n: case.arrays[n].astype(np.int64) for n in ARRAYS}
        self.n = len(a["prev_positions"])
        self.P = len(a["valid_sampled_token_count"])
        self.Mx = len(a["num_computed_tokens"])
        self.prev = a["prev_positions"]
        self.g = np.maximum(self.prev, 0)
        ok = self.g < min(self.P, self.Mx, len(a["prev_num_draft_tokens"]))
        g = np.where(ok, self.g, 0)
        self.valid = a["valid_sampled_token_count"][g] if self.P else np.zeros(self.n, np.int64)
        self.drafts = a["prev_num_draft_tokens"][g] if len(a["prev_num_draft_tokens"]) else np.zeros(self.n, np.int64)
        self.before = a["num_computed_tokens"][g] if self.Mx else np.zeros(self.n, np.int64)
        self.participating = (self.prev >= 0) & (self.drafts > 0)
        self.corrected = self.before + self.valid

    def region(self, i: int) -> str:
        if i >= self.n:
            return "past num_reqs (untouched)"
        if self.participating[i]:
            return f"request with drafts (previous row {int(self.prev[i])})"
        if self.prev[i] < 0:
            return "request new to the batch (CPU value)"
        return f"request without drafts (previous row {int(self.prev[i])}, CPU value)"


def build(
    n: int,
    P: int,
    mode: str,
    *,
    extra: int,
    order: str,
    new_share: float,
    values: str,
    seed: int,
    K: int | None = None,
    valid_mode: str = "prefix",
) -> Case:
    """A case: ``n`` requests, a previous batch of ``P``, buffers ``max(n, P) + extra`` long;
    ``order`` maps requests to previous rows (``identity``, ``shuffled``, ``shared``: some share
    one, extended tier), ``new_share`` of them new; ``values``: ``small`` counts, ``long`` ones
    (up to :data:`MAX_COUNT`), ``large`` ones (any int32, extended tier) or ``near_limit``
    (corrected counts just below 2**31, extended tier); ``valid_mode``: ``prefix`` (a row with
    ``d`` drafts has ``1 .. d + 1`` valid tokens, as the rejection sampler makes them) or
    ``any`` (``0 .. K + 1`` whatever ``d``, extended tier)."""
    rng = np.random.default_rng(seed)
    Mx = max(n, P) + extra
    rows = np.arange(n) if order == "identity" else rng.permutation(max(n, P))[:n]
    prev = np.where(rows < P, rows, -1).astype(np.int64)
    if order == "shared" and n > 1:
        prev[rng.integers(0, n)] = prev[rng.integers(0, n)]
    new = rng.random(n) < new_share
    prev[new] = -1
    if order == "shared" and new.any():
        prev[np.flatnonzero(new)[0]] = -int(rng.integers(2, 1 << 20))
    K = int(rng.integers(1, 8)) if K is None else K
    drafts = rng.integers(0, K + 1, size=Mx)
    drafts[rng.random(Mx) < 0.2] = 0
    if valid_mode == "prefix":
        valid = np.where(drafts[:P] > 0, rng.integers(1, drafts[:P] + 2), rng.integers(0, 2, size=P))
    else:
        valid = np.where(drafts[:P] > 0, rng.integers(1, K + 2, size=P), rng.integers(0, 2, size=P))
        valid[rng.random(P) < 0.05] = 0
    if values == "small":
        computed = rng.integers(0, 4097, size=Mx)
        cpu = rng.integers(0, 4097, size=n)
    elif values == "long":
        computed = rng.integers(0, MAX_COUNT - K - 1, size=Mx, endpoint=True)
        cpu = rng.integers(0, MAX_COUNT, size=n, endpoint=True)
    elif values == "large":
        computed = rng.integers(0, INT32_MAX - K - 1, size=Mx, endpoint=True)
        cpu = rng.integers(INT32_MIN, INT32_MAX, size=n, endpoint=True)
    else:
        computed = INT32_MAX - K - 1 - rng.integers(0, NEAR_LIMIT // 2, size=Mx)
        cpu = INT32_MAX - rng.integers(0, NEAR_LIMIT, size=n)
    accepted = np.ones(n, dtype=np.int64) if rng.random() < 0.7 else rng.integers(1, K + 2, size=n)
    return Case(
        kernel=NAME,
        arrays={
            "num_computed_tokens": computed.astype(np.int32),
            "num_accepted_tokens": accepted.astype(np.int32),
            "prev_positions": prev,
            "valid_sampled_token_count": valid.astype(np.int32),
            "prev_num_draft_tokens": drafts.astype(np.int32),
            "cpu_num_computed_tokens": cpu.astype(np.int32),
        },
        launch={"mode": mode},
    )
