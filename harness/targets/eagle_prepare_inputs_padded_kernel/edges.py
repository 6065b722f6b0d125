"""The extended tier of ``eagle_prepare_inputs_padded_kernel``: docs/CONTRACT.md §2.4.

Inputs vLLM's call sites do not produce where the kernel is still defined (it is int32
arithmetic on in-bounds reads): empty requests, a discarded request that still has drafts,
``valid > d + 1``, a decreasing ``cu_num_draft_tokens``, a request shorter than its drafts
need. The oracles compute §2.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale, request_count_ranges
from ...targetkit.base import ContractViolation, require_arrays
from .layout import build

FEATURES = {
    "empty_request": "a request without tokens (query_start_loc repeats): the index is qs - 1",
    "discarded_with_drafts": "valid = 0 with d > 0: rejected = d + 1",
    "valid_above_drafts": "valid > d + 1: a negative rejected count",
    "decreasing_cu": "cu_num_draft_tokens decreases (d < 0): rejected = 0",
    "short_query": "0 < qlen < d + 1: a request shorter than its drafts",
    "padded_launch": "a grid larger than num_reqs (extra programs write nothing; vLLM launches num_reqs, §2.2)",
}


KINDS = ("plain", "empty", "discarded_with_drafts", "valid_above_drafts", "decreasing_cu", "short_query")


def validate(case: Case, inputs: dict) -> None:
    """The extended tier: any int32 counts, ``query_start_loc`` from 0 and never decreasing."""
    a = case.arrays
    require_arrays(a, inputs)
    R = case.scalars.get("num_reqs")
    if not isinstance(R, int) or isinstance(R, bool) or R < 1:
        raise ContractViolation("scalars.num_reqs", "must be an int >= 1")
    cu, valid, qsl = (a[n] for n in inputs)
    if len(cu) != R or len(valid) != R:
        raise ContractViolation("arrays.cu_num_draft_tokens", "cu_num_draft_tokens and valid_sampled_tokens_count need num_reqs entries")
    q = qsl.astype(np.int64)
    if len(q) != R + 1 or q[0] != 0 or np.any(np.diff(q) < 0):
        raise ContractViolation("arrays.query_start_loc", "must be num_reqs + 1 entries, start at 0 and never decrease (extended tier)")
    grid = case.launch.get("grid_size")
    if grid is not None and (not isinstance(grid, int) or isinstance(grid, bool) or grid < R):
        raise ContractViolation("launch.grid_size", "must be null or an int >= num_reqs")


def features_of(case: Case) -> frozenset[str]:
    cu = case.arrays["cu_num_draft_tokens"].astype(np.int64)
    valid = case.arrays["valid_sampled_tokens_count"].astype(np.int64)
    qlen = np.diff(case.arrays["query_start_loc"].astype(np.int64))
    d = np.diff(np.concatenate([[0], cu]))
    R = case.scalars["num_reqs"]
    checks = {
        "padded_launch": (case.launch.get("grid_size") or R) > R,
        "empty_request": np.any(qlen == 0),
        "discarded_with_drafts": np.any((d > 0) & (valid == 0)),
        "valid_above_drafts": np.any((d > 0) & (valid > d + 1)),
        "decreasing_cu": np.any(d < 0),
        "short_query": np.any((qlen > 0) & (qlen < d + 1)),
    }
    return frozenset(k for k, v in checks.items() if v)


def _request(kind: str, d: int, pick: list[int]) -> tuple[int, int, int]:
    """``(d, valid, qlen)`` of one request of ``kind``; ``pick`` holds four small draws."""
    a, b, c, e = pick
    if kind == "empty":
        return 0, a % 2, 0
    if kind == "discarded_with_drafts":
        return max(d, 1), 0, max(d, 1) + 1 + (b % 3)
    if kind == "valid_above_drafts":
        d = max(d, 1)
        return d, d + 2 + (b % 4), d + 1 + (c % 3)
    if kind == "decreasing_cu":
        return -1 - (a % 3), b % 3, 1 + (c % 4)
    if kind == "short_query":
        d = max(d, 2)
        return d, 1 + (b % (d + 1)), 1 + (c % d)
    valid = a % 2 if d == 0 else 1 + (b % (d + 1))
    return d, valid, d + 1 + (e % 4)


def from_requests(reqs: list[tuple[int, int, int]], grid: int | None) -> Case:
    """A case from ``(d, valid, qlen)`` per request (the production target's builder)."""
    return build([r[0] for r in reqs], [r[1] for r in reqs], [r[2] - r[0] - 1 for r in reqs], grid)


def _one(c: Chooser) -> tuple[int, int, int]:
    """One request of any kind (plain ones too), drafts and the small draws it is built from."""
    kind = c.choice(KINDS)
    d = c.integer(0, 8)
    return _request(kind, d, c.array(np.int64, 4, 0, 63).tolist())


def body(c: Chooser, scale: Scale) -> Case:
    """A case of the extended tier: up to 16 requests (64 now and then) of every kind."""
    small = Scale(max_requests=min(scale.max_requests, 16), request_tail=min(scale.request_tail, 64))
    R = c.integer_of(request_count_ranges(small))
    reqs = c.repeat(R, _one)
    grid = c.optional(lambda c: c.integer(R + 1, R + 4))
    return from_requests(reqs, grid)


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Each request made plain in turn (one token, no draft), keeping the others."""
    cu = case.arrays["cu_num_draft_tokens"].astype(np.int64)
    d = np.diff(np.concatenate([[0], cu])).tolist()
    v = case.arrays["valid_sampled_tokens_count"].tolist()
    q = np.diff(case.arrays["query_start_loc"].astype(np.int64)).tolist()
    reqs = list(zip(d, v, q, strict=True))
    grid = case.launch.get("grid_size")
    for r, req in enumerate(reqs):
        if req != (0, 1, 1):
            yield from_requests(reqs[:r] + [(0, 1, 1)] + reqs[r + 1 :], grid)
