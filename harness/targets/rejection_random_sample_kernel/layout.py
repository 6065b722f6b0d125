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
from ...targetkit.draft_rows import BOOL, F32, F64, I32, I64, cu_of

NAME = "rejection_random_sample_kernel"
"""The target's name (its registry key, folder and vLLM name)."""

PER_REQUEST = ("bonus_token_ids", "is_greedy")
PER_TOKEN = ("draft_token_ids", "draft_probs", "target_probs", "recovered_token_ids", "uniform_probs")

GREEDY_MODES = ("all_random", "mixed")
"""``is_greedy``: every request random (``temperature > 0``), or a mixed batch."""


def build(counts: Sequence[int], L: int, *, V: int, seed: int, target_kind: str = "random",  # noqa: N803
          draft_kind: str | None = "random", relation: str = "independent", greedy: str = "all_random",
          boundary: float = 0.0, pad: float = 0.0, synthetic: bool = False) -> Case:
    """A case of ``len(counts)`` requests with those draft counts (each ``<= L``), vocabulary
    ``V``. ``draft_kind`` None: ``NO_DRAFT_PROBS``. ``relation``: ``independent`` tables,
    ``equal`` (target = draft: quotients of exactly 1), ``close`` (target within an ulp or two
    of the draft). ``boundary``: the share of uniforms at the acceptance boundary of their draft
    (the float32 quotient or its float64 neighbours); ``pad``: the chance that a request's
    last drafts are ``-1``."""
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
    start = 0
    for n in counts:
        if n and rng.random() < pad:
            k = int(rng.integers(1, n + 1))
            ids[start + n - k : start + n] = -1
        start += n
    u = uniforms(rng, N)
    if boundary > 0 and N:
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
    return Case(kernel=NAME, arrays=arrays, scalars={"max_spec_len": int(L), "vocab_size": int(V)}, launch={})


__all__ = ["BOOL", "F32", "F64", "I32", "I64", "NAME", "build"]
