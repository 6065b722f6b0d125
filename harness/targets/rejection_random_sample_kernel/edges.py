"""The extended tier of ``rejection_random_sample_kernel``: docs/CONTRACT.md §11.4.

Draft counts vLLM never passes where the kernel is still defined (every write by one program,
every read inside its table): the last random request with more drafts than ``max_spec_len``
(its positions past the row and its bonus land in the rows after it: the output then has
``output_rows`` rows), and a decreasing ``cu_num_draft_tokens`` (``d_r < 0``: no draft is
visited and the bonus lands ``-d_r`` slots before row ``r``, in a greedy request's row, which no
program writes). And uniforms vLLM does produce, but where the contract fixes the decision only
for a correctly rounded division: with draft probabilities, a uniform within 3 float32 steps of
its draft's quotient ``p / q`` (on it, or one float64 ulp off: the division window of §11.3). The
oracles compute §11.1 on them unchanged; a compiled run may decide a window's uniform either way
(``RejectionRandom.settle``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.probabilities import KINDS
from ...generation.strategies import Scale
from ...targetkit.base import ContractViolation
from ...targetkit.draft_rows import (
    BOOL,
    F32,
    F64,
    I32,
    I64,
    MAX_SPEC_LEN,
    Rows,
    check_array,
    check_int,
    check_rows,
)
from ...targetkit.output_rows import check_output_rows, check_writes, fewer_output_rows
from .layout import build, drafted, in_window

FEATURES = {
    "past_the_row": "the last random request has more drafts than max_spec_len (writes past its row)",
    "decreasing_cu": "cu_num_draft_tokens decreases (d_r < 0): the bonus lands before the row",
    "division_window": "with draft probabilities, a visited uniform within 3 float32 steps of p / q (on it, or one ulp off)",
}


def writes(case: Case) -> list[int]:
    """Every flat output index a program writes, in program order (duplicates kept), as
    §11.1 decides."""
    a = case.arrays
    rows = Rows.of(a["cu_num_draft_tokens"])
    L, V = case.scalars["max_spec_len"], case.scalars["vocab_size"]
    rates = a.get("synthetic_conditional_rates")
    draft = a.get("draft_probs")
    target = a["target_probs"].reshape(-1)
    out: list[int] = []
    for r in range(rows.B):
        if a["is_greedy"][r]:
            continue
        rejected = False
        for j in range(max(int(rows.d[r]), 0)):
            t = int(rows.s[r]) + j
            did = int(a["draft_token_ids"][t])
            u = np.float64(a["uniform_probs"][t])
            if did < 0:
                ok = False
            elif rates is not None:
                ok = bool(u < np.float64(rates[j]))
            else:
                p = target[t * V + did]
                q = np.float32(1) if draft is None else draft.reshape(-1)[t * V + did]
                with np.errstate(all="ignore"):
                    ok = bool(q > 0) and bool(np.float64(np.float32(p) / np.float32(q)) >= u)
            out.append(r * (L + 1) + j)
            if not ok:
                rejected = True
                break
        if not rejected:
            out.append(r * (L + 1) + int(rows.d[r]))
    return out


def validate(case: Case, dtypes: dict) -> None:
    """The extended tier: any counts whose reads stay inside the token arrays and tables and
    whose writes are each made by one program inside the output (``output_rows`` rows)."""
    a = case.arrays
    cu = a.get("cu_num_draft_tokens")
    if not isinstance(cu, np.ndarray) or cu.dtype != I32 or cu.ndim != 1 or cu.size < 1:
        raise ContractViolation("arrays.cu_num_draft_tokens", "must be a 1-D int32 array of at least one request")
    rows = Rows.of(cu)
    B = rows.B
    L = check_int(case.scalars, "max_spec_len", 0, MAX_SPEC_LEN)
    V = check_int(case.scalars, "vocab_size", 1, 1 << 20)
    out_rows = check_output_rows(case, B)
    if np.any(cu < 0):
        raise ContractViolation("arrays.cu_num_draft_tokens", "must hold counts >= 0 at every end (the token reads)")
    n = int(cu.max())
    ids = check_rows(a, "draft_token_ids", (I32,), n)
    check_rows(a, "target_probs", (F32,), n, (V,))
    check_rows(a, "draft_probs", (F32,), n, (V,), optional=True)
    bonus = a.get("bonus_token_ids")
    if bonus is None or bonus.dtype not in (I32, I64) or bonus.shape not in ((B, 1), (B,)):
        raise ContractViolation("arrays.bonus_token_ids", "must be int32 or int64 of shape [B, 1] or [B]")
    check_rows(a, "recovered_token_ids", (I32,), n)
    check_rows(a, "uniform_probs", (F64, F32), n)
    check_array(a, "is_greedy", (BOOL,), (B,))
    rates = a.get("synthetic_conditional_rates")
    if rates is not None and (rates.dtype != F32 or rates.ndim != 1 or rates.size < max(rows.longest, 1)):
        raise ContractViolation("arrays.synthetic_conditional_rates", "must be float32 [K >= every count]")
    if np.any(ids >= V):
        raise ContractViolation("arrays.draft_token_ids", "must be below vocab_size")
    check_writes(writes(case), out_rows, L)


def features_of(case: Case) -> frozenset[str]:
    rows = Rows.of(case.arrays["cu_num_draft_tokens"])
    t, p, q = drafted(case.arrays, case.scalars["vocab_size"])
    checks = {"past_the_row": rows.longest > case.scalars["max_spec_len"], "decreasing_cu": bool(np.any(rows.d < 0)),
              "division_window": bool(np.any(in_window(case.arrays["uniform_probs"][t], p, q)))}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """A production case made an edge: its last request random with ``max_spec_len + 1 + k``
    drafts (and rows enough for its writes), a request ``r >= 1`` after a greedy one given
    ``d_r = -m`` (its bonus lands in that request's row), or uniforms on the acceptance
    boundary of ``p / q`` with draft probabilities (the division window of §11.3)."""
    B = c.integer(1, 6)
    L = c.integer(1, 6)
    counts = [int(x) for x in c.array(np.int64, B, 0, L)]
    kind = c.choice(["past_the_row", "decreasing_cu", "division_window"] if B >= 2 else ["past_the_row", "division_window"])
    seed = c.integer(0, (1 << 32) - 1)
    if kind == "division_window":
        return build(counts, L, V=c.choice([16, 100]), seed=seed, target_kind=c.choice(KINDS),
                     draft_kind=c.choice(KINDS), relation=c.choice(["independent", "equal", "close"]),
                     greedy=c.choice(["all_random", "mixed"]), boundary=c.choice([0.5, 1.0]), window=True)
    kinds = {"target_kind": c.choice(KINDS), "draft_kind": c.choice([*KINDS, None]),
             "relation": c.choice(["independent", "equal"]), "boundary": c.choice([0.0, 0.5])}
    if kind == "past_the_row":
        counts[-1] = L + 1 + c.integer(0, 3)
        case = build(counts, L, V=c.choice([16, 100]), seed=seed, **kinds)
        greedy = case.arrays["is_greedy"].copy()
        greedy[-1] = False
        need = (B - 1) * (L + 1) + counts[-1] + 1
        return case.replace(arrays={"is_greedy": greedy}, scalars={"output_rows": -(-need // (L + 1))})
    r = c.integer(1, B - 1)
    m = c.integer(1, L + 1)
    case = build(counts, L, V=c.choice([16, 100]), seed=seed, greedy="mixed", **kinds)
    cu = case.arrays["cu_num_draft_tokens"].astype(np.int64)
    d = np.diff(np.concatenate([[0], cu]))
    d[r] = -min(m, int(cu[r - 1]))
    greedy = case.arrays["is_greedy"].copy()
    greedy[r - 1], greedy[r] = True, False
    return case.replace(arrays={"cu_num_draft_tokens": np.cumsum(d).astype(np.int32), "is_greedy": greedy})


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


shrink_candidates = fewer_output_rows
"""One output row fewer, down to ``B``."""
