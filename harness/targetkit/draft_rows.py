"""The request layout the rejection sampler's kernels share (docs/CONTRACT.md §10-§13).

Request ``r`` owns draft tokens ``[s_r, e_r)`` of an inclusive cumulative sum ``cu`` (no
leading zero): ``s_r = cu[r-1]`` (``0`` for ``r = 0``), ``e_r = cu[r]``, ``d_r = e_r - s_r``.
A case's per-request arrays have one row per request, its per-token arrays one row per draft
token; splitting a case into requests and joining a sub-list back rebuilds ``cu``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.case import Case
from ..core.errors import ContractViolation

MAX_SPEC_LEN = 128
"""vLLM's ``MAX_SPEC_LEN`` (``RejectionSampler.forward`` asserts ``max_spec_len`` <= it; the
expand kernel's ``MAX_NUM_TOKENS``)."""

MAX_VOCAB = 262144
"""The largest vocabulary of current models (Gemma 3's), the production extreme."""

I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
BOOL = np.dtype(np.bool_)


def cu_of(counts: Sequence[int]) -> np.ndarray:
    """``np.cumsum(counts)`` as int32, as ``_calc_spec_decode_metadata`` makes it."""
    return np.cumsum(np.asarray(counts, dtype=np.int64)).astype(np.int32)


@dataclass(frozen=True)
class Rows:
    """The rows of ``cu``: starts ``s``, counts ``d`` (int64), ``B`` requests, ``N = cu[-1]``."""

    cu: np.ndarray
    s: np.ndarray
    d: np.ndarray

    @classmethod
    def of(cls, cu: np.ndarray) -> Rows:
        c = np.asarray(cu, dtype=np.int64).reshape(-1)
        s = np.concatenate([[0], c[:-1]]).astype(np.int64) if c.size else np.zeros(0, np.int64)
        return cls(c, s, c - s)

    @property
    def B(self) -> int:  # noqa: N802 - the contract's name
        return int(self.cu.size)

    @property
    def N(self) -> int:  # noqa: N802
        return int(self.cu[-1]) if self.cu.size else 0

    @property
    def longest(self) -> int:
        return int(self.d.max()) if self.d.size else 0

    def owner(self) -> np.ndarray:
        """The request of every token ``0 .. N-1``."""
        return np.repeat(np.arange(self.B, dtype=np.int64), np.maximum(self.d, 0))


def check_cu(cu: Any, field: str = "arrays.cu_num_draft_tokens") -> Rows:
    """The rows of a production ``cu``: int32 ``[B]``, ``B >= 1``, non-negative counts."""
    if not isinstance(cu, np.ndarray) or cu.dtype != I32 or cu.ndim != 1:
        raise ContractViolation(field, "must be a 1-D int32 array")
    if cu.size < 1:
        raise ContractViolation(field, "needs at least one request")
    rows = Rows.of(cu)
    if cu[0] < 0 or np.any(rows.d < 0):
        raise ContractViolation(field, "must be a non-decreasing cumulative sum of draft counts >= 0")
    return rows


def check_array(arrays: Mapping[str, np.ndarray], name: str, dtypes: Sequence[np.dtype], shape: tuple[int, ...],
                optional: bool = False) -> np.ndarray | None:
    """``arrays[name]`` when it has one of ``dtypes`` and ``shape``; ``None`` when it is
    absent and ``optional``; else :class:`ContractViolation`."""
    a = arrays.get(name)
    if a is None:
        if optional:
            return None
        raise ContractViolation(f"arrays.{name}", "is required")
    if a.dtype not in dtypes:
        raise ContractViolation(f"arrays.{name}", f"must be {' or '.join(str(d) for d in dtypes)}")
    if a.shape != shape:
        raise ContractViolation(f"arrays.{name}", f"must have shape {list(shape)}")
    return a


def check_int(scalars: Mapping[str, Any], name: str, lo: int, hi: int) -> int:
    v = scalars.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ContractViolation(f"scalars.{name}", f"must be an int from {lo} to {hi}")
    return v


def check_draft_counts(case: Case) -> tuple[Rows, int]:
    """A rejection-sampler case's production draft counts: ``cu_num_draft_tokens`` as
    :func:`check_cu` checks it, and ``max_spec_len`` (0 to :data:`MAX_SPEC_LEN`) at least every
    request's count; the rows and ``max_spec_len``."""
    rows = check_cu(case.arrays.get("cu_num_draft_tokens"))
    L = check_int(case.scalars, "max_spec_len", 0, MAX_SPEC_LEN)  # noqa: N806
    if L < rows.longest:
        raise ContractViolation("scalars.max_spec_len", "must be at least every request's draft count")
    return rows, L


def split(case: Case, per_request: Sequence[str], per_token: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """``case`` as one piece per request: its rows of the per-request and per-token arrays
    (those the case has), by name."""
    rows = Rows.of(case.arrays["cu_num_draft_tokens"])
    pieces = []
    for r in range(rows.B):
        s, e = int(rows.s[r]), int(rows.cu[r])
        piece = {n: case.arrays[n][r : r + 1] for n in per_request if n in case.arrays}
        piece |= {n: case.arrays[n][s:e] for n in per_token if n in case.arrays}
        piece["__count__"] = np.array([e - s])
        pieces.append(piece)
    return pieces


def join(case: Case, pieces: list[dict[str, np.ndarray]], per_request: Sequence[str],
         per_token: Sequence[str]) -> Case:
    """``case`` rebuilt from a sub-list of its :func:`split` pieces (``cu`` recomputed)."""
    arrays: dict[str, np.ndarray] = {"cu_num_draft_tokens": cu_of([int(p["__count__"][0]) for p in pieces])}
    for n in [*per_request, *per_token]:
        if n in case.arrays:
            arrays[n] = np.concatenate([p[n] for p in pieces]) if pieces else case.arrays[n][:0]
    return case.replace(arrays=arrays)


def check_rows(arrays: Mapping[str, np.ndarray], name: str, dtypes: Sequence[np.dtype], n: int,
               tail: tuple[int, ...] = (), optional: bool = False) -> np.ndarray | None:
    """As :func:`check_array` for a per-token array of the extended tier: at least ``n`` rows
    (the largest ``cu``; a decreasing ``cu`` leaves later rows unread), each of shape ``tail``."""
    a = arrays.get(name)
    if a is None:
        if optional:
            return None
        raise ContractViolation(f"arrays.{name}", "is required")
    if a.dtype not in dtypes:
        raise ContractViolation(f"arrays.{name}", f"must be {' or '.join(str(d) for d in dtypes)}")
    if a.ndim != 1 + len(tail) or a.shape[0] < n or a.shape[1:] != tail:
        raise ContractViolation(f"arrays.{name}", f"must have at least {n} rows of shape {list(tail)}")
    return a


class DraftRowMoves:
    """The request moves of a target laid out in draft rows (a mixin, put before the target's
    base class): :meth:`split_requests` / :meth:`join_requests` by :attr:`per_request` and
    :attr:`per_token` (:func:`split`, :func:`join`), and a shrink move that narrows
    ``max_spec_len`` to the longest request."""

    per_request: tuple[str, ...] = ()
    """The arrays of one row per request."""
    per_token: tuple[str, ...] = ()
    """The arrays of one row per draft token."""

    def split_requests(self, case: Case) -> list[Any]:
        return split(case, self.per_request, self.per_token)

    def join_requests(self, case: Case, pieces: list[Any]) -> Case:
        return join(case, pieces, self.per_request, self.per_token)

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        rows = Rows.of(case.arrays["cu_num_draft_tokens"])
        if case.scalars["max_spec_len"] > rows.longest:
            yield case.replace(scalars={"max_spec_len": rows.longest})


def pad_tails(rng: np.random.Generator, ids: np.ndarray, counts: Sequence[int], pad: float) -> np.ndarray:
    """``ids`` (one per draft token, in request order) with, per request of ``counts`` that has
    drafts and with probability ``pad``, its last ``k`` drafts (``1 <= k <= its count``) made
    ``-1`` (vLLM's padding id), in place; ``rng`` draws one uniform per such request, then ``k``."""
    start = 0
    for n in counts:
        if n and rng.random() < pad:
            k = int(rng.integers(1, n + 1))
            ids[start + n - k : start + n] = -1
        start += n
    return ids


def cut_at_token(case: Case, t: int, per_request: Sequence[str], per_token: Sequence[str]) -> Case:
    """``case`` up to draft token ``t``: the requests before ``t``'s, then ``t``'s own with its
    drafts up to ``t`` (the per-token arrays' first ``t + 1`` rows: views, not copies);
    ``max_spec_len`` the longest count left."""
    rows = Rows.of(case.arrays["cu_num_draft_tokens"])
    r = int(np.searchsorted(rows.cu, t, side="right"))
    d = rows.d[: r + 1].copy()
    d[r] = t - rows.s[r] + 1
    arrays = {"cu_num_draft_tokens": cu_of(d.tolist())}
    arrays |= {n: case.arrays[n][: r + 1] for n in per_request if n in case.arrays}
    arrays |= {n: case.arrays[n][: t + 1] for n in per_token if n in case.arrays}
    return case.replace(arrays=arrays, scalars={"max_spec_len": int(d.max())})


def cut_at_request(case: Case, r: int, per_request: Sequence[str], per_token: Sequence[str]) -> Case:
    """``case`` up to request ``r``, every request before it without drafts (their tokens
    dropped): ``r``'s drafts are the only tokens left."""
    rows = Rows.of(case.arrays["cu_num_draft_tokens"])
    s, e = int(rows.s[r]), int(rows.cu[r])
    arrays = {"cu_num_draft_tokens": cu_of([0] * r + [e - s])}
    arrays |= {n: case.arrays[n][: r + 1] for n in per_request if n in case.arrays}
    arrays |= {n: case.arrays[n][s:e] for n in per_token if n in case.arrays}
    return case.replace(arrays=arrays, scalars={"max_spec_len": e - s})


def evened(case: Case, per_request: Sequence[str]) -> Case:
    """``case`` with its tokens regrouped into requests alike: as many of ``max_spec_len``
    drafts as fit, the last request the rest (its last token the case's last); each per-request
    array its last row, repeated."""
    rows = Rows.of(case.arrays["cu_num_draft_tokens"])
    K = max(rows.longest, 1)  # noqa: N806
    n = rows.N
    q = (n - 1) // K if n else 0
    d = [K] * q + [n - K * q]
    arrays = {"cu_num_draft_tokens": cu_of(d)}
    arrays |= {m: np.repeat(case.arrays[m][-1:], len(d), axis=0) for m in per_request if m in case.arrays}
    return case.replace(arrays=arrays, scalars={"max_spec_len": max(d)})
