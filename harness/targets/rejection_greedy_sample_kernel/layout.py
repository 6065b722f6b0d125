"""How a case of ``rejection_greedy_sample_kernel`` is laid out (docs/CONTRACT.md §10): the
arrays by name, and the case built from draft counts, a vocabulary and a seed.

Arrays: ``cu_num_draft_tokens`` (int32 ``[B]``), ``draft_token_ids`` (int32 ``[N]``),
``target_argmax`` (int64 ``[N]``), ``bonus_token_ids`` (int32 ``[B, 1]``), and, when present,
``is_greedy`` (bool ``[B]``; absent: vLLM's ``None``, every request greedy), ``uniform_probs``
(float64 ``[N]``) and ``synthetic_conditional_rates`` (float32 ``[K]``; present: ``SYNTHETIC_MODE``).
Scalar: ``max_spec_len``. Output: ``output_token_ids`` (int32 ``[B, max_spec_len + 1]``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case
from ...generation.probabilities import uniforms
from ...targetkit.draft_rows import BOOL, F32, F64, I32, I64, cu_of, pad_tails

NAME = "rejection_greedy_sample_kernel"
"""The target's name (its registry key, folder and vLLM name)."""

PER_REQUEST = ("bonus_token_ids", "is_greedy")
PER_TOKEN = ("draft_token_ids", "target_argmax", "uniform_probs")
OPTIONAL = ("is_greedy", "uniform_probs", "synthetic_conditional_rates")

GREEDY_MODES = ("none", "mixed", "all_true")
"""``is_greedy``: ``none`` (absent: vLLM's all-greedy batch), ``mixed`` (``temperature == 0``
of a mixed batch), ``all_true`` (a tensor, every request greedy)."""


def processed(case: Case) -> np.ndarray:
    """The requests the kernel handles: every one when ``is_greedy`` is absent, else the greedy ones."""
    g = case.arrays.get("is_greedy")
    return np.ones(len(case.arrays["cu_num_draft_tokens"]), dtype=bool) if g is None else g.astype(bool)


def draft_ids(rng: np.random.Generator, argmax: np.ndarray, counts: Sequence[int], V: int, match: float,  # noqa: N803
              pad: float) -> np.ndarray:
    """Draft ids that equal the argmax with probability ``match`` (runs of acceptance), else
    another id; a request's last drafts are ``-1`` padding with probability ``pad``."""
    same = rng.random(argmax.size) < match
    other = (argmax + 1 + rng.integers(0, max(V - 1, 1), size=argmax.size)) % max(V, 1)
    ids = np.where(same, argmax, other).astype(np.int32)
    pad_tails(rng, ids, counts, pad)
    return ids


def build(counts: Sequence[int], L: int, *, V: int, seed: int, greedy: str = "none",  # noqa: N803
          match: float = 0.8, pad: float = 0.1, synthetic: bool = False, rates: str = "any",
          ids: str = "any") -> Case:
    """A case of ``len(counts)`` requests with those draft counts (each ``<= L``), vocabulary
    ``V``; ``ids = "top"`` draws argmax and bonus ids from the top of the vocabulary."""
    rng = np.random.default_rng(seed)
    B, N = len(counts), int(sum(counts))
    lo = max(0, V - 64) if ids == "top" else 0
    argmax = rng.integers(lo, V, size=N).astype(np.int64)
    arrays: dict[str, np.ndarray] = {
        "cu_num_draft_tokens": cu_of(counts),
        "draft_token_ids": draft_ids(rng, argmax, counts, V, match, pad),
        "target_argmax": argmax,
        "bonus_token_ids": rng.integers(lo, V, size=(B, 1)).astype(np.int32),
    }
    if greedy == "mixed":
        arrays["is_greedy"] = rng.random(B) < 0.5
    elif greedy == "all_true":
        arrays["is_greedy"] = np.ones(B, dtype=BOOL)
    if synthetic or greedy == "mixed":
        arrays["uniform_probs"] = uniforms(rng, N)
    if synthetic:
        K = max(L, *counts, 1)
        if rates == "edges":
            r = rng.choice(np.array([0.0, 1.0, 0.5], dtype=F32), size=K)
        else:
            r = np.sort(rng.random(K).astype(F32))[::-1].copy()
        arrays["synthetic_conditional_rates"] = r.astype(F32)
        if rng.random() < 0.3:  # uniforms exactly at the rates (u < c is strict)
            pos = np.concatenate([np.arange(n) for n in counts]) if N else np.zeros(0, np.int64)
            at = rng.random(N) < 0.5
            arrays["uniform_probs"][at] = arrays["synthetic_conditional_rates"][pos[at]].astype(F64)
    return Case(kernel=NAME, arrays=arrays, scalars={"max_spec_len": int(L)}, launch={})


__all__ = ["BOOL", "F32", "F64", "I32", "I64", "NAME", "build", "processed"]
