"""The extended tier of ``expand_kernel``: docs/CONTRACT.md §12.4.

Replace values and counts vLLM never passes (every element written by at most one program):
``replace_from``, ``replace_to`` in the int64 range outside int32 (compared in int64, or in
float32 after rounding; the stored value truncated or rounded as §12.1 says), and a decreasing
``cu_num_tokens`` (a row with ``n_r <= 0`` writes nothing) whose written ranges do not
overlap and lie inside the output. The oracles compute §12.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.base import ContractViolation
from ...targetkit.draft_rows import MAX_SPEC_LEN, Rows, check_int, cu_of
from .layout import DTYPES, I64, build

FEATURES = {
    "replace_past_int32": "replace_from or replace_to outside int32 (an int64 kernel argument)",
    "decreasing_cu": "cu_num_tokens decreases (a row with n_r < 0 writes nothing)",
}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def written(case: Case) -> list[int]:
    """Every output index a program writes (duplicates kept), as §12.1 decides."""
    rows = Rows.of(case.arrays["cu_num_tokens"])
    m = case.launch.get("max_num_tokens")
    M = MAX_SPEC_LEN if m is None else int(m)
    out: list[int] = []
    for r in range(rows.B):
        out += range(int(rows.s[r]), int(rows.s[r]) + max(0, min(int(rows.d[r]), M)))
    return out


def validate(case: Case, dtypes: dict) -> None:
    a = case.arrays
    cu = a.get("cu_num_tokens")
    if not isinstance(cu, np.ndarray) or cu.dtype != np.int32 or cu.ndim != 1 or cu.size < 1:
        raise ContractViolation("arrays.cu_num_tokens", "must be a 1-D int32 array of at least one request")
    x = a.get("input")
    if x is None or x.dtype not in DTYPES or x.shape != (cu.size,):
        raise ContractViolation("arrays.input", "must be float32, int32 or int64 of shape [B]")
    check_int(case.scalars, "replace_from", INT64_MIN, INT64_MAX)
    check_int(case.scalars, "replace_to", INT64_MIN, INT64_MAX)
    n = check_int(case.scalars, "num_tokens", 0, 1 << 20)
    m = case.launch.get("max_num_tokens")
    if m is not None and (not isinstance(m, int) or isinstance(m, bool) or not 1 <= m <= 1024 or m & (m - 1)):
        raise ContractViolation("launch.max_num_tokens", "must be null (vLLM's 128) or a power of two from 1 to 1024")
    w = written(case)
    if len(set(w)) != len(w):
        raise ContractViolation("arrays.cu_num_tokens", "two requests' ranges overlap (two programs would write one element)")
    if w and (min(w) < 0 or max(w) >= n):
        raise ContractViolation("scalars.num_tokens", "a written range lies outside the output")


def features_of(case: Case) -> frozenset[str]:
    s = case.scalars
    rows = Rows.of(case.arrays["cu_num_tokens"])
    wide = any(not -(2**31) <= s[k] < 2**31 for k in ("replace_from", "replace_to"))
    return frozenset(k for k, v in {"replace_past_int32": wide, "decreasing_cu": bool(np.any(rows.d < 0))}.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """A case with int64-range replace values (int64 data holding ``replace_from`` now and
    then), or a last request whose count is negative (nothing follows it to overlap)."""
    B = c.integer(1, 8)
    counts = [int(x) for x in c.array(np.int64, B, 0, 8)]
    seed = c.integer(0, (1 << 32) - 1)
    if c.boolean():
        case = build(counts, use=c.choice(["any_float", "any_int64", "any_int32"]), seed=seed)
        frm = c.choice([2**31, -(2**31) - 1, 2**40 + 1, INT64_MIN, INT64_MAX, 0])
        to = c.choice([2**31, -(2**31) - 1, 2**53 + 1, INT64_MIN, INT64_MAX, 7])
        x = case.arrays["input"].copy()
        if x.dtype == I64 and B > 1:
            x[: B // 2] = frm
        elif x.dtype == np.float32:
            x[: B // 2] = np.float32(frm)
        return case.replace(arrays={"input": x}, scalars={"replace_from": int(frm), "replace_to": int(to)})
    counts.append(-c.integer(1, 8))
    case = build([max(n, 0) for n in counts], use=c.choice(["temperature", "top_k", "any_int64"]), seed=seed)
    cu = np.cumsum(counts)
    cu[cu < 0] = 0  # counts stay >= 0 at every end: the decrease is at the last request
    return case.replace(arrays={"cu_num_tokens": cu.astype(np.int32)},
                        scalars={"num_tokens": int(sum(max(n, 0) for n in counts))})


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    s = case.scalars
    for k in ("replace_from", "replace_to"):
        if not -(2**31) <= s[k] < 2**31:
            yield case.replace(scalars={k: 0})
    rows = Rows.of(case.arrays["cu_num_tokens"])
    if np.any(rows.d < 0):
        yield case.replace(arrays={"cu_num_tokens": cu_of(np.maximum(rows.d, 0))})
