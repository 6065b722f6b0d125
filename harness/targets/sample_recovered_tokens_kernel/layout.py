"""How a case of ``sample_recovered_tokens_kernel`` is laid out (docs/CONTRACT.md §13): the
arrays by name, and the case built from draft counts, a vocabulary, table kinds and a seed.

Arrays: ``cu_num_draft_tokens`` (int32 ``[B]``), ``draft_token_ids`` (int32 ``[N]``),
``target_probs`` (float32 ``[N, V]``), ``draft_probs`` (float32 ``[N, V]``; absent: vLLM's
``None``, ``NO_DRAFT_PROBS``), ``inv_q`` (float32 ``[B, V]``, or float64: ``USE_FP64_GUMBEL``).
Scalars: ``max_spec_len`` (the grid's second axis), ``vocab_size``. Launch: ``block_size``
(``BLOCK_SIZE``; ``null``: vLLM's 8192). Output: ``output_token_ids`` (int32 ``[N]``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case
from ...generation.probabilities import inv_noise, sample_ids, table
from ...targetkit.draft_rows import F32, F64, I32, cu_of, pad_tails

NAME = "sample_recovered_tokens_kernel"
"""The target's name (its registry key, folder and vLLM name)."""

BLOCK_SIZE = 8192
"""vLLM's ``BLOCK_SIZE`` (the dispatcher's)."""

PER_REQUEST = ("inv_q",)
PER_TOKEN = ("draft_token_ids", "draft_probs", "target_probs")


def build(counts: Sequence[int], L: int, *, V: int, seed: int, target_kind: str = "random",  # noqa: N803
          draft_kind: str | None = "random", relation: str = "independent", fp64: bool = False,
          noise: str = "exponential", block_size: int | None = None, pad: float = 0.0,
          one_hot: float = 0.0) -> Case:
    """A case of ``len(counts)`` requests with those draft counts (each ``<= L``), vocabulary
    ``V``. ``draft_kind`` None: ``NO_DRAFT_PROBS``; ``relation = "equal"``: target = draft
    (every residual 0: every score 0); ``noise = "ones"``: ``inv_q`` of ones (ties of equal
    probabilities survive); ``one_hot``: the share of target rows one-hot on their draft id
    (``NO_DRAFT_PROBS`` then scores 0 everywhere)."""
    rng = np.random.default_rng(seed)
    B, N = len(counts), int(sum(counts))
    drafter = table(rng, N, V, draft_kind or "random")
    target = drafter.copy() if relation == "equal" else table(rng, N, V, target_kind)
    ids = sample_ids(rng, drafter)
    if one_hot and N:
        hot = np.flatnonzero(rng.random(N) < one_hot)
        target[hot] = 0
        target[hot, ids[hot]] = 1
    pad_tails(rng, ids, counts, pad)
    arrays: dict[str, np.ndarray] = {
        "cu_num_draft_tokens": cu_of(counts),
        "draft_token_ids": ids.astype(I32),
        "target_probs": target.astype(F32),
        "inv_q": inv_noise(rng, B, V, F64 if fp64 else F32, noise),
    }
    if draft_kind is not None:
        arrays["draft_probs"] = drafter.astype(F32)
    return Case(kernel=NAME, arrays=arrays, scalars={"max_spec_len": int(L), "vocab_size": int(V)},
                launch={"block_size": block_size})


def tile_tie(counts: Sequence[int], L: int, *, V: int, seed: int, block_size: int | None = None,  # noqa: N803
             fp64: bool = False) -> Case:
    """Rows whose largest score sits on both sides of a tile boundary (``k*BS - 1`` and
    ``k*BS``, ``BS`` the block size): ``NO_DRAFT_PROBS``, every other entry smaller, ``inv_q``
    of ones. The first index of the maximum (``k*BS - 1``) wins."""
    rng = np.random.default_rng(seed)
    bs = BLOCK_SIZE if block_size is None else block_size
    B, N = len(counts), int(sum(counts))
    target = (rng.random((N, V)) * 0.25).astype(F32)
    tiles = max(1, (V - 1) // bs)
    for t in range(N):
        k = int(rng.integers(1, tiles + 1))
        target[t, k * bs - 1 : k * bs + 1] = np.float32(0.5)
    ids = np.where(rng.random(N) < 0.5, -1, rng.integers(0, V, size=N)).astype(I32)
    ids[target[np.arange(N), np.clip(ids, 0, V - 1)] == np.float32(0.5)] = -1
    return Case(kernel=NAME, arrays={
        "cu_num_draft_tokens": cu_of(counts), "draft_token_ids": ids, "target_probs": target,
        "inv_q": np.ones((B, V), dtype=F64 if fp64 else F32),
    }, scalars={"max_spec_len": int(L), "vocab_size": int(V)}, launch={"block_size": block_size})  # fmt: skip


__all__ = ["BLOCK_SIZE", "F32", "F64", "I32", "NAME", "build", "tile_tie"]
