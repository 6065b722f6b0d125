"""How a case of ``compute_new_slot_mapping`` is built (docs/CONTRACT.md §7.1): requests' query
lengths, ``N`` and a block table, with the vLLM layout of the slots or a scattered one.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    INT32_MAX,
    cdiv,
    query_start_loc_from,
)
from ...targetkit.block_tables import MAX_POSITION, MAX_TABLE, max_block_id

NAME = "compute_new_slot_mapping"


MAX_TOKENS = 1 << 14
"""Most tokens a generated case holds."""


def build(
    lengths: list[int],
    N: int,
    bs: int,
    *,
    nb: int,
    fit: str,
    layout: str,
    ids: str,
    seed: int,
    views: bool,
    p0_near_end: bool | None = None,
    max_tokens: int = MAX_TOKENS,
    max_table: int = MAX_TABLE,
    production: bool = True,
) -> Case:
    """A case: ``lengths`` (qlen per request), ``N`` new tokens each, a table of ``nb`` columns
    (cut to fit MAX_TABLE) and max_model_len filling it (``exact``) or not (``fits``, narrower
    than the table: a wide table); values from ``seed``. ``production``: every live position
    below max_model_len (vLLM's drafter gate, docs/CONTRACT.md §7.2): requests are shortened to
    fit, and one ending near max_model_len ends at most at ``M - 1``; otherwise the last live
    positions may pass it by up to 3."""
    rng = np.random.default_rng(seed)
    R = len(lengths)
    while sum(lengths) + R * N > max_tokens:  # shorten the requests, then drop some
        lengths = [x // 2 for x in lengths] if sum(lengths) else lengths[: len(lengths) // 2]
        R = len(lengths)
    nb = max(1, min(nb, max_table // max(R, 1)))
    full = nb * bs
    M = full if fit == "exact" else int(rng.integers(1, full + 1))
    if production and R:
        if full < N + 1:  # room for one query token and the N new ones
            nb = min(max_table // R, cdiv(N + 1, bs))
            full = nb * bs
        M = max(M, N + 1)
        lengths = [max(1, min(q, M - N)) for q in lengths]
    counts = [q + N for q in lengths]
    L = sum(counts)
    if layout == "vllm":
        pos, rej = [], []
        near = rng.random() < 0.5 if p0_near_end is None else p0_near_end
        for q, n in zip(lengths, counts, strict=True):
            k = int(rng.integers(0, q)) if q > 1 and rng.random() < 0.6 else 0  # rejected: at most qlen - 1
            live = n - k
            if production:
                p0 = max(0, M - live - int(rng.integers(0, 4))) if near else int(rng.integers(0, M - live + 1))
            else:
                p0 = max(0, M - live + int(rng.integers(-3, 4))) if near else int(rng.integers(0, M))
            pos += list(range(p0, p0 + live)) + [0] * k
            rej += [False] * live + [True] * k
        positions = np.asarray(pos, dtype=np.int64)
        rejected = np.asarray(rej, dtype=bool)
    else:
        positions = np.where(
            rng.random(L) < 0.8, rng.integers(0, M + 4, size=L), rng.integers(0, MAX_POSITION, size=L, endpoint=True)
        ).astype(np.int64)
        rejected = rng.random(L) < 0.3
    top = max_block_id(bs)
    if ids == "small":
        table = rng.integers(0, min(top, 4096), size=(R, nb), endpoint=True)
    elif ids == "near_limit":
        table = rng.integers(max(0, top - (1 << 16) // bs), top, size=(R, nb), endpoint=True)
    else:
        table = rng.integers(0, top, size=(R, nb), endpoint=True)
    T = sum(lengths)
    return Case(
        kernel=NAME,
        arrays={
            "query_start_loc": query_start_loc_from(lengths) if R else np.zeros(1, np.int32),
            "block_table": table.astype(np.int32).reshape(R, nb),
            "seq_lens": np.asarray([min(INT32_MAX, q + int(rng.integers(0, M))) for q in lengths], dtype=np.int64).astype(np.int32),
            "slot_mapping": rng.integers(-1, 1 << 40, size=T).astype(np.int64),
            "new_positions": positions,
            "is_rejected_token_mask": rejected,
        },
        scalars={"block_size": int(bs), "num_new_tokens": int(N), "max_model_len": int(M)},
        launch={"views": bool(views)},
    )


class Tokens:
    """Per-token owner request and position regime (int64 arrays), for features and reports."""

    def __init__(self, case: Case) -> None:
        a, s = case.arrays, case.scalars
        self.R, self.nb = a["block_table"].shape
        self.bs, self.N, self.M = s["block_size"], s["num_new_tokens"], s["max_model_len"]
        self.qlen = np.diff(a["query_start_loc"].astype(np.int64))
        self.counts = self.qlen + self.N
        self.owner = np.repeat(np.arange(self.R, dtype=np.int64), np.maximum(self.counts, 0))
        self.pos = a["new_positions"].astype(np.int64)
        self.rejected = a["is_rejected_token_mask"].astype(bool)
        self.past = self.pos >= self.M
        self.live = ~self.rejected & ~self.past
        self.col = np.minimum(self.pos, self.M - 1) // self.bs


def is_vllm_layout(t: Tokens) -> bool:
    """Positions as section 1 writes them: per request, consecutive up to its rejected tail,
    which holds position 0 and a true mask (and nowhere else)."""
    start = 0
    for r in range(t.R):
        n = int(t.counts[r])
        pos, rej = t.pos[start : start + n], t.rejected[start : start + n]
        start += n
        k = int(rej.sum())
        if n == 0:
            continue
        if np.any(rej[: n - k]) or np.any(pos[n - k :] != 0):
            return False
        if not np.array_equal(pos[: n - k], pos[0] + np.arange(n - k)):
            return False
    return True
