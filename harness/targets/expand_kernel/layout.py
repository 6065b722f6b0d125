"""How a case of ``expand_kernel`` is laid out (docs/CONTRACT.md §12): the arrays by name,
and the case built from token counts, a kind of data and a seed.

Arrays: ``input`` (float32, int32 or int64 ``[B]``) and ``cu_num_tokens`` (int32 ``[B]``).
Scalars: ``replace_from``, ``replace_to``, ``num_tokens`` (the output's length; vLLM's is
``cu[B-1]``). Launch: ``max_num_tokens`` (``MAX_NUM_TOKENS``; ``null``: vLLM's 128).
Output: ``output`` (``input``'s dtype, ``[num_tokens]``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case
from ...targetkit.draft_rows import F32, I32, I64, cu_of

NAME = "expand_kernel"
"""The target's name (its registry key, folder and vLLM name)."""

PER_REQUEST = ("input",)
DTYPES = (F32, I32, I64)

USES = ("temperature", "top_k", "top_p")
"""vLLM's three calls (``apply_sampling_constraints``): temperatures (float32, greedy ``0``
replaced by ``1``), top-k (int32 ``1 .. V``, ``0 -> 0``), top-p (float32 ``(0, 1]``, ``0 -> 0``)."""

SPECIAL32 = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -1e-45, 1.0, -1.0, 3.4028235e38], dtype=F32)


def values(rng: np.random.Generator, use: str, B: int, V: int = 32000) -> tuple[np.ndarray, int, int]:  # noqa: N803
    """``(input, replace_from, replace_to)`` of one of vLLM's :data:`USES`, or of ``any_float``
    (any float32, NaN, ``±0``, infinities, subnormals), ``any_int32`` or ``any_int64`` data."""
    if use == "temperature":
        t = rng.choice([0.0, 0.01, 0.5, 0.7, 1.0, 1.3, 2.0], size=B).astype(F32)
        return t, 0, 1
    if use == "top_k":
        return rng.choice([V, V, 1, 5, 50, V - 1], size=B).astype(I32), 0, 0
    if use == "top_p":
        return rng.choice([1.0, 0.9, 0.95, 0.5, 1e-6], size=B).astype(F32), 0, 0
    frm = int(rng.choice([0, 1, -1, 7, int(rng.integers(-(2**31), 2**31))]))
    to = int(rng.choice([0, 1, -1, 2**31 - 1, -(2**31), int(rng.integers(-(2**31), 2**31))]))
    if use == "any_float":
        x = np.where(rng.random(B) < 0.5, rng.choice(SPECIAL32, size=B),
                     rng.standard_normal(B).astype(F32) * np.float32(1e3)).astype(F32)
        x[rng.random(B) < 0.3] = np.float32(frm)
        return x, frm, to
    dt = I32 if use == "any_int32" else I64
    info = np.iinfo(dt)
    x = rng.integers(info.min, info.max, size=B, dtype=dt, endpoint=True)
    x[rng.random(B) < 0.3] = frm
    return x.astype(dt), frm, to


def build(counts: Sequence[int], *, use: str, seed: int, M: int | None = None, extra: int = 0,  # noqa: N803
          V: int = 32000) -> Case:
    """A case of ``len(counts)`` requests of those token counts, data of ``use``, an output
    ``extra`` elements longer than ``cu[B-1]`` and ``MAX_NUM_TOKENS`` ``M`` (None: 128)."""
    rng = np.random.default_rng(seed)
    x, frm, to = values(rng, use, len(counts), V)
    cu = cu_of(counts)
    return Case(
        kernel=NAME,
        arrays={"input": x, "cu_num_tokens": cu},
        scalars={"replace_from": frm, "replace_to": to, "num_tokens": int(cu[-1]) + int(extra)},
        launch={"max_num_tokens": M},
    )


__all__ = ["DTYPES", "F32", "I32", "I64", "NAME", "USES", "build"]
