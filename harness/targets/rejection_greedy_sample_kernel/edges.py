"""The extended tier of ``rejection_greedy_sample_kernel``: docs/CONTRACT.md §10.4.

Draft counts vLLM never passes where the kernel is still defined (every write by one program,
every access inside its buffer): the last processed request with more drafts than
``max_spec_len`` (its positions past the row and its bonus land in the rows after it: the
output then has ``output_rows`` rows), and a decreasing ``cu_num_draft_tokens`` (``d_r < 0``:
no draft is visited and the bonus lands ``-d_r`` slots before row ``r``, in the row of a
request no program writes). The oracles compute §10.1 on them unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
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
from ...targetkit.output_rows import (
    check_output_rows,
    check_writes,
    edge_features_of,
    fewer_output_rows,
)
from .layout import build

FEATURES = {
    "past_the_row": "the last processed request has more drafts than max_spec_len (writes past its row)",
    "decreasing_cu": "cu_num_draft_tokens decreases (d_r < 0): the bonus lands before the row",
}


def writes(case: Case) -> list[int]:
    """Every flat output index a program writes, in program order (duplicates kept), as
    §10.1 decides."""
    a = case.arrays
    rows = Rows.of(a["cu_num_draft_tokens"])
    L = case.scalars["max_spec_len"]
    greedy = a.get("is_greedy")
    rates = a.get("synthetic_conditional_rates")
    out: list[int] = []
    for r in range(rows.B):
        if greedy is not None and not greedy[r]:
            continue
        rejected = False
        for j in range(max(int(rows.d[r]), 0)):
            t = int(rows.s[r]) + j
            did = int(a["draft_token_ids"][t])
            if rates is not None:
                ok = bool(np.float64(a["uniform_probs"][t]) < np.float64(rates[j])) and did >= 0
            else:
                ok = did == int(np.int64(a["target_argmax"][t]).astype(np.int32))
            out.append(r * (L + 1) + j)
            if not ok:
                rejected = True
                break
        if not rejected:
            out.append(r * (L + 1) + int(rows.d[r]))
    return out


def validate(case: Case, dtypes: dict) -> None:
    """The extended tier: any counts whose reads stay inside the token arrays and whose writes
    are each made by one program inside the output (``output_rows`` rows)."""
    a = case.arrays
    cu = a.get("cu_num_draft_tokens")
    if not isinstance(cu, np.ndarray) or cu.dtype != I32 or cu.ndim != 1 or cu.size < 1:
        raise ContractViolation("arrays.cu_num_draft_tokens", "must be a 1-D int32 array of at least one request")
    rows = Rows.of(cu)
    B = rows.B
    L = check_int(case.scalars, "max_spec_len", 0, MAX_SPEC_LEN)
    out_rows = check_output_rows(case, B)
    if np.any(cu < 0) or int(cu[0]) < 0:
        raise ContractViolation("arrays.cu_num_draft_tokens", "must hold counts >= 0 at every end (the token reads)")
    n = int(cu.max())
    check_rows(a, "draft_token_ids", (I32,), n)
    check_rows(a, "target_argmax", (I64, I32), n)
    bonus = a.get("bonus_token_ids")
    if bonus is None or bonus.dtype not in (I32, I64) or bonus.shape not in ((B, 1), (B,)):
        raise ContractViolation("arrays.bonus_token_ids", "must be int32 or int64 of shape [B, 1] or [B]")
    check_array(a, "is_greedy", (BOOL,), (B,), optional=True)
    check_rows(a, "uniform_probs", (F64, F32), n, optional=True)
    rates = a.get("synthetic_conditional_rates")
    if rates is not None and (rates.dtype != F32 or rates.ndim != 1 or rates.size < max(rows.longest, 1)
                              or "uniform_probs" not in a):
        raise ContractViolation("arrays.synthetic_conditional_rates", "must be float32 [K >= every count] with uniforms")
    check_writes(writes(case), out_rows, L)


def body(c: Chooser, scale: Scale) -> Case:
    """A production case made an edge: its last request processed with ``max_spec_len + 1 + k``
    drafts (and rows enough for its writes), or a request ``r >= 1`` after an unprocessed one
    given ``d_r = -m`` (its bonus lands in that request's row)."""
    B = c.integer(1, 6)
    L = c.integer(1, 6)
    counts = [int(x) for x in c.array(np.int64, B, 0, L)]
    kind = c.choice(["past_the_row", "decreasing_cu"]) if B >= 2 else "past_the_row"
    seed = c.integer(0, (1 << 32) - 1)
    if kind == "past_the_row":
        counts[-1] = L + 1 + c.integer(0, 3)
        case = build(counts, L, V=c.choice([16, 1000]), seed=seed, greedy=c.choice(["none", "all_true"]),
                     match=c.choice([0.9, 1.0]), pad=0.0, synthetic=c.chance(0.2))  # fmt: skip
        need = (B - 1) * (L + 1) + counts[-1] + 1
        return case.replace(scalars={"output_rows": -(-need // (L + 1))})
    r = c.integer(1, B - 1)
    m = c.integer(1, L + 1)
    case = build(counts, L, V=c.choice([16, 1000]), seed=seed, greedy="mixed", synthetic=c.chance(0.2))
    cu = case.arrays["cu_num_draft_tokens"].astype(np.int64)
    d = np.diff(np.concatenate([[0], cu]))
    d[r] = -min(m, int(cu[r - 1]))
    if d[r] == 0:
        d[r] = 0
    greedy = case.arrays["is_greedy"].copy()
    greedy[r - 1], greedy[r] = False, True
    new_cu = np.cumsum(d).astype(np.int32)
    return case.replace(arrays={"cu_num_draft_tokens": new_cu, "is_greedy": greedy})


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


features_of = edge_features_of
"""The case's edges: ``past_the_row``, ``decreasing_cu``."""

shrink_candidates = fewer_output_rows
"""One output row fewer, down to ``B``."""
