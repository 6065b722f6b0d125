"""How a case of ``rejection_random_sample_kernel`` is laid out (docs/CONTRACT.md §11): the
arrays by name, and the case built from draft counts, a vocabulary, table kinds and a seed.

Arrays: ``cu_num_draft_tokens`` (int32 ``[B]``), ``draft_token_ids`` (int32 ``[N]``),
``target_probs`` (float32 ``[N, V]``), ``draft_probs`` (float32 ``[N, V]``; absent: vLLM's
``None``, ``NO_DRAFT_PROBS``), ``bonus_token_ids`` (int32 ``[B, 1]``), ``recovered_token_ids``
(int32 ``[N]``), ``uniform_probs`` (float64 ``[N]``), ``is_greedy`` (bool ``[B]``) and, when
present, ``synthetic_conditional_rates`` (float32 ``[K]``: ``SYNTHETIC_MODE``). Scalars:
``max_spec_len``, ``vocab_size``. Output: ``output_token_ids`` (int32 ``[B, max_spec_len + 1]``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case
from ...generation.probabilities import near_quotient, sample_ids, table, uniforms
from ...targetkit.draft_rows import BOOL, F32, F64, I32, I64, cu_of, pad_tails

NAME = "rejection_random_sample_kernel"
"""The target's name (its registry key, folder and vLLM name)."""

PER_REQUEST = ("bonus_token_ids", "is_greedy")
PER_TOKEN = ("draft_token_ids", "draft_probs", "target_probs", "recovered_token_ids", "uniform_probs")

GREEDY_MODES = ("all_random", "mixed")
"""``is_greedy``: every request random (``temperature > 0``), or a mixed batch."""

WINDOW_ULPS = 3
"""The half-width, in float32 steps of the quotient, of the division window (docs/CONTRACT.md
§11.3): compiled Triton divides with ``div.full.f32``, at most 2 ulps from the exact quotient, so
within 2.5 float32 steps of the correctly rounded one; 3 steps cover it."""


def processed(case: Case) -> np.ndarray:
    """The requests the kernel handles: the random ones (``is_greedy`` false)."""
    return ~case.arrays["is_greedy"].astype(bool)


def window_bounds(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lo, hi, defined)`` of the division window of ``p / q`` (float32 tables' entries at the
    drafted ids): ``lo`` and ``hi`` are the correctly rounded float32 quotient moved
    :data:`WINDOW_ULPS` float32 steps down and up, as float64; ``defined`` where ``q > 0`` and the
    quotient is finite and ``>= 0`` (elsewhere every division decides alike: §11.1's IEEE cases).
    A uniform ``u`` with ``max(lo, 0) < u <= hi`` may be decided either way by a division within
    2 ulps; any other ``u`` is decided alike by every such division."""
    p32, q32 = np.asarray(p, dtype=F32), np.asarray(q, dtype=F32)
    with np.errstate(all="ignore"):
        quot = np.divide(p32, q32, dtype=F32)
        defined = (q32 > 0) & np.isfinite(quot) & (quot >= 0)
        lo, hi = quot.copy(), quot.copy()
        for _ in range(WINDOW_ULPS):
            lo = np.nextafter(lo, np.float32(-np.inf))
            hi = np.nextafter(hi, np.float32(np.inf))
    return lo.astype(F64), hi.astype(F64), defined


def in_window(u: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Where the uniforms ``u`` lie in the division window of ``p / q`` (:func:`window_bounds`)."""
    lo, hi, defined = window_bounds(p, q)
    u64 = np.asarray(u, dtype=F64)
    return defined & (u64 > np.maximum(lo, 0.0)) & (u64 <= hi)


def drafted(arrays: dict[str, np.ndarray], V: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # noqa: N803
    """``(tokens, p, q)``: the draft positions of ``arrays`` that read both tables (a draft id in
    ``[0, V)`` of a random request, with ``draft_probs`` given and no synthetic rates), and their
    target and draft probabilities. Empty when no position divides."""
    ids = arrays["draft_token_ids"].astype(I64)
    draft = arrays.get("draft_probs")
    none = np.zeros(0, dtype=I64)
    if draft is None or "synthetic_conditional_rates" in arrays or ids.size == 0:
        return none, none.astype(F32), none.astype(F32)
    cu = arrays["cu_num_draft_tokens"].astype(I64)
    starts = np.concatenate([[0], cu[:-1]])
    request = np.searchsorted(cu, np.arange(ids.size), side="right")
    keep = (ids >= 0) & (ids < V) & (request < cu.size)
    keep[keep] &= ~arrays["is_greedy"][request[keep]]
    keep[keep] &= np.arange(ids.size)[keep] >= starts[request[keep]]
    t = np.flatnonzero(keep)
    rows_t, rows_d = arrays["target_probs"].reshape(-1, V), draft.reshape(-1, V)
    return t, rows_t[t, ids[t]], rows_d[t, ids[t]]


def clear_window(arrays: dict[str, np.ndarray], V: int) -> np.ndarray:  # noqa: N803
    """``arrays``' uniforms with every one that lies in its draft's division window moved to the
    window's lower end (``max(lo, 0)``: accepted by every division within 2 ulps), so that the
    case's decisions are the same on every backend; the others unchanged."""
    u = arrays["uniform_probs"].copy()
    t, p, q = drafted(arrays, V)
    if t.size:
        lo, _, _ = window_bounds(p, q)
        at = in_window(u[t], p, q)
        u[t[at]] = np.maximum(lo[at], 0.0).astype(u.dtype)
    return u


def build(counts: Sequence[int], L: int, *, V: int, seed: int, target_kind: str = "random",  # noqa: N803
          draft_kind: str | None = "random", relation: str = "independent", greedy: str = "all_random",
          boundary: float = 0.0, pad: float = 0.0, synthetic: bool = False, window: bool = False) -> Case:
    """A case of ``len(counts)`` requests with those draft counts (each ``<= L``), vocabulary
    ``V``. ``draft_kind`` None: ``NO_DRAFT_PROBS``. ``relation``: ``independent`` tables,
    ``equal`` (target = draft: quotients of exactly 1), ``close`` (target within an ulp or two
    of the draft). ``boundary``: the share of uniforms at the acceptance boundary of their draft
    (the float32 quotient or its float64 neighbours); ``pad``: the chance that a request's
    last drafts are ``-1``. ``window`` False (the production tier, §11.2): with draft
    probabilities, boundary draws are skipped and no uniform lies in its draft's division
    window (:func:`clear_window`); True (the extended tier, §11.4): boundary draws of ``p / q``
    too."""
    rng = np.random.default_rng(seed)
    B, N = len(counts), int(sum(counts))
    drafter = table(rng, N, V, draft_kind or "random")
    target = table(rng, N, V, target_kind)
    if relation == "equal":
        target = drafter.copy()
    elif relation == "close":
        steps = rng.integers(-2, 3, size=drafter.shape)
        target = drafter.copy()
        for _ in range(2):
            target = np.where(steps > 0, np.nextafter(target, np.float32(np.inf)),
                              np.where(steps < 0, np.nextafter(target, np.float32(0)), target)).astype(F32)
            steps = np.sign(steps) * (np.abs(steps) - 1)
        target = np.maximum(target, np.float32(0))
    ids = sample_ids(rng, drafter)
    pad_tails(rng, ids, counts, pad)
    u = uniforms(rng, N)
    if boundary > 0 and N and (draft_kind is None or window):
        safe = np.clip(ids, 0, V - 1)
        p = target[np.arange(N), safe]
        q = None if draft_kind is None else drafter[np.arange(N), safe]
        at = rng.random(N) < boundary
        u[at] = near_quotient(rng, p, q, F64)[at]
    arrays: dict[str, np.ndarray] = {
        "cu_num_draft_tokens": cu_of(counts),
        "draft_token_ids": ids.astype(I32),
        "target_probs": target.astype(F32),
        "bonus_token_ids": rng.integers(0, V, size=(B, 1)).astype(I32),
        "recovered_token_ids": rng.integers(0, V, size=N).astype(I32),
        "uniform_probs": u.astype(F64),
        "is_greedy": (rng.random(B) < 0.4) if greedy == "mixed" else np.zeros(B, dtype=BOOL),
    }
    if draft_kind is not None:
        arrays["draft_probs"] = drafter.astype(F32)
    if synthetic:
        arrays["synthetic_conditional_rates"] = np.sort(rng.random(max(L, 1)).astype(F32))[::-1].copy()
    if not window:
        arrays["uniform_probs"] = clear_window(arrays, V)
    return Case(kernel=NAME, arrays=arrays, scalars={"max_spec_len": int(L), "vocab_size": int(V)}, launch={})


__all__ = ["BOOL", "F32", "F64", "I32", "I64", "NAME", "WINDOW_ULPS", "build", "clear_window", "drafted", "in_window",
           "processed", "window_bounds"]
