"""The extended tier of ``sample_recovered_tokens_kernel``: docs/CONTRACT.md §13.4.

Inputs vLLM never passes where the kernel is still defined (every read inside its table):
requests with more drafts than ``max_spec_len`` (positions ``j >= L`` are not processed and
their tokens stay untouched), and ``vocab_size`` smaller than the tables' width (it is only the
row length of the flat indices), ``0`` included (nothing is read, ``-1`` is written). The
oracles compute §13.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.probabilities import KINDS
from ...generation.strategies import Scale
from ...targetkit.base import ContractViolation
from ...targetkit.draft_rows import F32, F64, I32, MAX_SPEC_LEN, check_array, check_cu, check_int
from .layout import BLOCK_SIZE, build

FEATURES = {
    "past_max_spec_len": "a request with more drafts than max_spec_len (its later tokens untouched)",
    "vocab_below_width": "vocab_size smaller than the tables' width (rows overlap in the flat index)",
    "vocab_zero": "vocab_size 0: nothing read, -1 written",
}


def validate(case: Case, dtypes: dict) -> None:
    a = case.arrays
    rows = check_cu(a.get("cu_num_draft_tokens"))
    B, N = rows.B, rows.N
    check_int(case.scalars, "max_spec_len", 0, MAX_SPEC_LEN)
    V = check_int(case.scalars, "vocab_size", 0, 1 << 20)
    check_array(a, "draft_token_ids", (I32,), (N,))
    t = a.get("target_probs")
    if t is None or t.dtype != F32 or t.ndim != 2 or t.shape[0] != N or t.shape[1] < V:
        raise ContractViolation("arrays.target_probs", "must be float32 [N, W] with W >= vocab_size")
    d = a.get("draft_probs")
    if d is not None and (d.dtype != F32 or d.shape != t.shape):
        raise ContractViolation("arrays.draft_probs", "must be float32 of target_probs' shape")
    q = a.get("inv_q")
    if q is None or q.dtype not in (F32, F64) or q.ndim != 2 or q.shape[0] != B or q.shape[1] < V:
        raise ContractViolation("arrays.inv_q", "must be float32 or float64 [B, W] with W >= vocab_size")
    b = case.launch.get("block_size")
    if b is not None and (not isinstance(b, int) or isinstance(b, bool) or not 1 <= b <= BLOCK_SIZE or b & (b - 1)):
        raise ContractViolation("launch.block_size", "must be null (vLLM's 8192) or a power of two from 1 to 8192")
    if V and _nan_scores(case):
        raise ContractViolation("arrays.target_probs", "no score p * inv_q may be NaN (§13.4)")


def _nan_scores(case: Case) -> bool:
    """Whether a processed token has a NaN score, the tables read flat with rows of ``V``."""
    a = case.arrays
    V, L = case.scalars["vocab_size"], case.scalars["max_spec_len"]
    cu = a["cu_num_draft_tokens"].astype(np.int64)
    s = np.concatenate([[0], cu[:-1]])
    tf, qf = a["target_probs"].reshape(-1), a["inv_q"].reshape(-1)
    df = a["draft_probs"].reshape(-1) if "draft_probs" in a else None
    v = np.arange(V)
    for r in range(cu.size):
        for j in range(min(int(cu[r] - s[r]), L)):
            t = int(s[r]) + j
            p = tf[t * V + v]
            with np.errstate(all="ignore"):
                if df is None:
                    did = int(a["draft_token_ids"][t])
                    p = np.where(v == did, np.float32(0), p)
                else:
                    p = np.fmax(p - df[t * V + v], np.float32(0))
                sc = p.astype(qf.dtype) * qf[r * V + v]
            if np.isnan(sc).any():
                return True
    return False


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    cu = a["cu_num_draft_tokens"].astype(np.int64)
    d = np.diff(np.concatenate([[0], cu]))
    V = case.scalars["vocab_size"]
    checks = {
        "past_max_spec_len": bool(np.any(d > case.scalars["max_spec_len"])),
        "vocab_below_width": V < a["target_probs"].shape[1],
        "vocab_zero": V == 0,
    }
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """A production case made an edge: ``max_spec_len`` below the largest count, or a
    ``vocab_size`` below the tables' width (0 now and then)."""
    B = c.integer(1, 6)
    K = c.integer(1, 8)
    counts = [int(x) for x in c.array(np.int64, B, 0, K)]
    W = c.choice([2, 16, 100])
    case = build(counts, max(counts), V=W, seed=c.integer(0, (1 << 32) - 1), target_kind=c.choice(KINDS),
                 draft_kind=c.choice([*KINDS, None]), fp64=c.chance(0.3), block_size=c.choice([None, 4]))
    if c.boolean() and max(counts) > 0:
        return case.replace(scalars={"max_spec_len": c.integer(0, max(counts) - 1)})
    return case.replace(scalars={"vocab_size": c.integer(0, W - 1)})


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    W = case.arrays["target_probs"].shape[1]
    if case.scalars["vocab_size"] < W:
        yield case.replace(scalars={"vocab_size": W})
