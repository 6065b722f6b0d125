"""Probability tables, uniforms and noise for the rejection sampler's kernels (CONTRACT §11, §13).

Every draw is a function of a NumPy generator, so a case rebuilt from its seed is the same on
any machine. Tables are float32 ``[rows, V]``, the shapes vLLM's softmax gives; a *kind* names
the form of a row:

- ``peaked``: one token holds nearly all the mass (a confident model);
- ``flat``: every entry ``float32(1 / V)`` (ties everywhere);
- ``sparse``: a few positive entries, the rest exact zeros (top-k, top-p and masks);
- ``tied``: a handful of distinct values, repeated across the row;
- ``subnormal``: zeros, subnormals and a few normal entries;
- ``random``: a normalised random row.
"""

from __future__ import annotations

import numpy as np

KINDS = ("peaked", "flat", "sparse", "tied", "subnormal", "random")
"""The kinds of probability row, the plainest first."""

TINY32 = float(np.finfo(np.float32).tiny)


def table(rng: np.random.Generator, rows: int, V: int, kind: str) -> np.ndarray:  # noqa: N803
    """A float32 ``[rows, V]`` table of rows of ``kind`` (see the module's docstring)."""
    if rows == 0 or V == 0:
        return np.zeros((rows, V), dtype=np.float32)
    if kind == "flat":
        return np.full((rows, V), np.float32(1.0) / np.float32(V), dtype=np.float32)
    if kind == "peaked":
        t = rng.random((rows, V)) * 1e-3 / V
        top = rng.integers(0, V, size=rows)
        t[np.arange(rows), top] = 1.0 - t.sum(axis=1) + t[np.arange(rows), top]
        return t.astype(np.float32)
    if kind == "sparse":
        t = np.zeros((rows, V))
        k = int(min(V, 1 + rng.integers(0, 8)))
        for r in range(rows):
            cols = rng.choice(V, size=k, replace=False) if V <= 1 << 16 else rng.integers(0, V, size=k)
            t[r, cols] = rng.random(k) + 1e-3
        t /= np.maximum(t.sum(axis=1, keepdims=True), 1e-30)
        return t.astype(np.float32)
    if kind == "tied":
        values = np.float32(rng.choice([0.0, 0.25, 0.5, 1.0 / 3.0, 0.125, 1.0]))
        levels = np.array([0.0, 0.125, 0.25, 1.0 / 3.0, 0.5, values], dtype=np.float32)
        return levels[rng.integers(0, levels.size, size=(rows, V))]
    if kind == "subnormal":
        t = np.zeros((rows, V), dtype=np.float32)
        sub = rng.random((rows, V)) < 0.5
        t[sub] = (rng.integers(1, 1 << 23, size=int(sub.sum())).astype(np.int32)).view(np.float32)
        normal = rng.random((rows, V)) < 0.1
        t[normal] = rng.random(int(normal.sum())).astype(np.float32)
        return t
    t = rng.exponential(size=(rows, V))
    return (t / t.sum(axis=1, keepdims=True)).astype(np.float32)


def sample_ids(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One id per row of ``probs`` drawn from it (a uniform id where a row has no mass), int32:
    the drafted tokens, whose draft probability is then positive."""
    out = np.empty(probs.shape[0], dtype=np.int32)
    for r, row in enumerate(probs.astype(np.float64)):
        total = row.sum()
        if not total > 0 or not np.isfinite(total):
            out[r] = rng.integers(0, probs.shape[1])
            continue
        c = np.cumsum(row / total)
        out[r] = min(int(np.searchsorted(c, rng.random(), side="right")), probs.shape[1] - 1)
    return out


def uniforms(rng: np.random.Generator, n: int) -> np.ndarray:
    """``torch.rand``'s float64 uniforms in ``[0, 1)`` (multiples of ``2**-53``), now and then
    an exact 0."""
    u = rng.integers(0, 1 << 53, size=n).astype(np.float64) * 2.0**-53
    u[rng.random(n) < 0.02] = 0.0
    return u


def near_quotient(rng: np.random.Generator, p: np.ndarray, q: np.ndarray | None, dtype: np.dtype) -> np.ndarray:
    """Uniforms at the acceptance boundary of ``p / q`` (float32 quotient; ``p`` alone when
    ``q`` is None): the quotient itself in ``dtype`` (accepts), or one ulp of ``dtype`` above
    (rejects) or below (accepts); where the quotient is no finite value in ``[0, 1]``, a plain
    uniform."""
    with np.errstate(all="ignore"):
        quot = p.astype(np.float32) if q is None else np.divide(p, q, dtype=np.float32)
    u = quot.astype(dtype)
    step = rng.integers(-1, 2, size=u.size)
    u = np.where(step > 0, np.nextafter(u, dtype.type(np.inf)), np.where(step < 0, np.nextafter(u, dtype.type(-np.inf)), u))
    ok = np.isfinite(quot) & (quot >= 0) & (quot <= 1) & (u >= 0) & (u < 1)
    plain = uniforms(rng, u.size).astype(dtype)
    return np.where(ok, u, plain).astype(dtype)


def inv_noise(rng: np.random.Generator, rows: int, V: int, dtype: np.dtype, kind: str = "exponential") -> np.ndarray:  # noqa: N803
    """``1 / q`` for exponential noise ``q`` (``torch.empty(...).exponential_().reciprocal()``):
    positive and finite, of ``dtype`` (float32, or float64 for ``use_fp64_gumbel``).
    ``kind = "ones"`` makes every entry 1 (ties of equal probabilities survive the noise)."""
    dtype = np.dtype(dtype)
    if kind == "ones":
        return np.ones((rows, V), dtype=dtype)
    q = rng.exponential(size=(rows, V)).astype(dtype)
    q = np.maximum(q, np.finfo(dtype).tiny * 4) if dtype == np.float64 else np.maximum(q, np.float32(1e-30))
    return (dtype.type(1) / q).astype(dtype)
