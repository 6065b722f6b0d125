"""NumPy oracles of Model Runner V2's verification kernels, written from docs/CONTRACT.md
§28-§35: the temperature and Gumbel-sampling kernels of ``sample/gumbel.py`` and the six
kernels of ``spec_decode/rejection_sampler_utils.py``.

Vectorised: over rows, blocks and vocabulary entries with NumPy; the rejection oracle steps
through the speculative steps (at most ``K``) with every request at once. Each function writes
in place into the buffers it is given (elements the contract leaves unwritten keep their value)
and returns a :class:`~.settlement.Settlement`: the decisions met within their error window
(docs/CONTRACT.md, "Model Runner V2's verification": "Exactness") and the absolute bound of every float it wrote.

The counter-based noise is reproduced bit for bit (the preface's "Noise"): murmur3 (uint32 hash
and its float32 and float64 uniforms) and Triton's Philox ``tl.rand``, in unsigned 64-bit NumPy
arithmetic masked to 32 bits. Every other float is the value of the contract's formula computed
in float64 from the inputs as stored, with the contract's bound beside it; integer outputs
(token ids, counts) are exact, and a decision whose margin is within its bound is a window
whose outcome ``choices`` may fix (the comparison passes the run's), else the nominal one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .settlement import Settlement, Window

__all__ = [
    "compute_cumulative_log_p",
    "compute_local_logits_stats",
    "compute_local_residual_mass",
    "gumbel_noise32",
    "gumbel_noise64",
    "gumbel_sample",
    "insert_resampled",
    "murmur3_hash32",
    "murmur3_uniform32",
    "murmur3_uniform64",
    "philox4x32_10",
    "philox_rand32",
    "rejection",
    "resample",
    "spec_step_seed",
    "temperature",
    "tl_rand32",
]

M32 = np.uint64(0xFFFFFFFF)
DRAFT_NOISE_SALT = 1 << 30
"""``_DRAFT_NOISE_SALT`` of ``sample/gumbel.py``: added to a drafting row's position."""
HI_DOMAIN = 0x9E3779B9
"""The domain of the high word of ``murmur3_uniform64``."""
TL_RAND_MIN = np.float32(4.6566127342e-10)
"""``_TL_RAND_MIN``: the least uniform ``tl_rand32(..., includes_zero=False)`` returns."""

# -- the error model of the preface to §28-§35 (relative unless said) -----------------------
EPS32 = 2.0**-24  # a correctly rounded float32 operation
DIV32 = 2.0**-22  # a float32 division (compiled: div.full.f32, within 2 ulp)
EXP_REL, EXP_ARG = 2.0**-20, 2.0**-22  # exp(x): EXP_REL + EXP_ARG * |x|
LOG_REL = 2.0**-20  # log, log1p: of the result's magnitude
SUM_BLOCK = 2.0**-15  # a tl.sum over one vocabulary block (depth <= 300)
SUM_SMALL = 2.0**-17  # a tl.sum over at most 64 block partials
NOISE32_ABS, NOISE32_REL = 2.0**-19, 2.0**-20
NOISE64_ABS = 2.0**-48


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _u64(x) -> np.ndarray:
    """Integers as uint64 bit patterns (int64 two's complement reinterpreted)."""
    a = np.asarray(x)
    if a.dtype == np.uint64:
        return a
    return np.asarray(a, dtype=np.int64).view(np.uint64)


def _ulp32(x) -> np.ndarray:
    a = np.abs(np.asarray(x, dtype=np.float64))
    out = np.spacing(np.where(np.isfinite(a), a, 0).astype(np.float32)).astype(np.float64)
    return np.where(np.isfinite(a), out, 0.0)


def _ulp_of(x, dtype) -> np.ndarray:
    a = np.abs(np.asarray(x, dtype=np.float64))
    fin = np.isfinite(a)
    return np.where(fin, np.spacing(np.where(fin, a, 0).astype(dtype)).astype(np.float64), 0.0)


def _exp_rel(x) -> np.ndarray:
    return EXP_REL + EXP_ARG * np.abs(x)


def _zero_where_inf(e, v) -> np.ndarray:
    return np.where(np.isfinite(v), e, 0.0)


def _check_index(idx, n: int, what: str) -> None:
    idx = np.asarray(idx)
    bad = (idx < 0) | (idx >= n)
    if bad.any():
        raise IndexError(f"{what}: index {int(idx[bad].flat[0])} outside [0, {n})")


def _n(value, default: int) -> int:
    return int(default if value is None else value)


def _flat_rows(arr, what: str) -> tuple[np.ndarray, int]:
    a = np.asarray(arr)
    if a.ndim != 2:
        raise ValueError(f"{what} must be 2-D")
    return a, int(a.shape[1])


def _choice(choices: Mapping[tuple, Any] | None, key: tuple, options: tuple, nominal: Any) -> Any:
    if choices is None or key not in choices:
        return nominal
    c = choices[key]
    if c not in options:
        raise ValueError(f"choice {c!r} for {key} is outside the contract's window {options}")
    return c


# --------------------------------------------------------------------------------------------
# the counter-based noise (the preface to §28-§35)
# --------------------------------------------------------------------------------------------


def _rotl32(v: np.ndarray, s: int) -> np.ndarray:
    return (v << np.uint32(s)) | (v >> np.uint32(32 - s))


# uint32 arrays: NumPy's products and sums of them wrap modulo 2**32, as the hash's do
def _mix(h: np.ndarray, key: np.ndarray) -> np.ndarray:
    key = _rotl32(key * np.uint32(0xCC9E2D51), 15) * np.uint32(0x1B873593)
    return _rotl32(h ^ key, 13) * np.uint32(5) + np.uint32(0xE6546B64)


def _fmix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def _words(x) -> tuple[np.ndarray, np.ndarray]:
    """The low and high 32-bit words of integers (their uint64 bit patterns), as uint32 arrays."""
    u = _u64(x)
    return (u & M32).astype(np.uint32), (u >> np.uint64(32)).astype(np.uint32)


def murmur3_hash32(seed, pos, offset, domain: int = 0) -> np.ndarray:
    """The preface's "Noise": the 32-bit hash of (seed, position, offset, domain), as uint32 (broadcast).
    Each word is mixed at its own shape (a row's seed and position once per row, not per lane)."""
    shape = np.broadcast_shapes(np.shape(seed), np.shape(pos), np.shape(offset))
    s_lo, s_hi = _words(seed)
    with np.errstate(over="ignore"):  # a 0-d operand computes as a NumPy scalar, which warns as it wraps
        h = _mix(np.asarray(np.uint32(domain & 0xFFFFFFFF)), s_lo)
        h = _mix(h, s_hi)
        h = _mix(h, _words(pos)[0])
        h = _mix(h, _words(offset)[0])
        h = np.asarray(_fmix(h ^ np.uint32(16)))
    return h if h.shape == shape else np.broadcast_to(h, shape).copy()


def murmur3_uniform32(seed, pos, offset) -> np.ndarray:
    """The preface's "Noise": ``RN32(hi16 * 2**-16 + (lo16 + 0.5) * 2**-32)`` of the hash, float32."""
    r = murmur3_hash32(seed, pos, offset).astype(np.uint64)
    hi = (r >> np.uint64(16)).astype(np.float64)
    lo = (r & np.uint64(0xFFFF)).astype(np.float64)
    return (hi * 2.0**-16 + (lo + 0.5) * 2.0**-32).astype(np.float32)  # exact in float64, one rounding


def murmur3_uniform64(seed, pos, offset) -> np.ndarray:
    """The preface's "Noise": the float64 uniform of two hashes (domains 0 and 0x9E3779B9)."""
    lo = murmur3_hash32(seed, pos, offset).astype(np.uint64)
    hi = murmur3_hash32(seed, pos, offset, HI_DOMAIN).astype(np.uint64)
    r53 = ((hi << np.uint64(32)) | lo) >> np.uint64(11)
    u = (r53.astype(np.float64) + 0.5) * 2.0**-53
    return np.where(u == 1.0, u - 2.0**-53, u)


def spec_step_seed(seed, step) -> np.ndarray:
    """``seed ^ (int64(step) << 32)`` (int64, wrapping)."""
    return (_u64(seed) ^ (_u64(np.asarray(step, dtype=np.int64)) << np.uint64(32))).view(np.int64)


_PHILOX_A, _PHILOX_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_PHILOX_KA, _PHILOX_KB = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)


def philox4x32_10(counter, key) -> tuple[np.ndarray, ...]:
    """Philox4x32-10 of counter words ``(c0, c1, c2, c3)`` and key ``(k0, k1)`` (uint32 values,
    broadcast): the four output words, as Triton's ``philox`` computes them."""
    c0, c1, c2, c3, k0, k1 = (np.asarray(v, dtype=np.uint64) & M32 for v in (*counter, *key))
    c0, c1, c2, c3, k0, k1 = np.broadcast_arrays(c0, c1, c2, c3, k0, k1)
    for _ in range(10):
        p0, p2 = _PHILOX_A * c0, _PHILOX_B * c2
        c0, c1, c2, c3 = ((p2 >> np.uint64(32)) ^ c1 ^ k0, p2 & M32, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & M32)
        k0, k1 = (k0 + _PHILOX_KA) & M32, (k1 + _PHILOX_KB) & M32
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def philox_rand32(seed, offset) -> np.ndarray:
    """The preface's "Noise": Triton's ``tl.rand(seed, offset)`` for int64 ``seed`` and ``offset``: Philox4x32-10
    of counter (lo, hi, 0, 0) of the offset and key (lo, hi) of the seed; its first word as an
    int32 ``x``, ``(x < 0 ? ~x : x)`` converted to float32 and multiplied by
    ``float32(4.6566127342e-10)``."""
    s, o = np.broadcast_arrays(_u64(seed), _u64(offset))
    zero = np.zeros(o.shape, dtype=np.uint64)
    c0, _, _, _ = philox4x32_10((o & M32, o >> np.uint64(32), zero, zero), (s & M32, s >> np.uint64(32)))
    x = c0.view(np.int32)
    x = np.where(x < 0, ~x, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


def tl_rand32(seed, offset, includes_zero: bool = False) -> np.ndarray:
    """``tl_rand32``: :func:`philox_rand32`, raised to ``_TL_RAND_MIN`` unless ``includes_zero``."""
    u = philox_rand32(seed, offset)
    return u if includes_zero else np.maximum(u, TL_RAND_MIN)


_SERIES = [np.float64(np.float32(c)) for c in (1 / 7, 1 / 6, 1 / 5, 1 / 4, 1 / 3, 1 / 2, 1.0)]


def gumbel_noise32(u) -> tuple[np.ndarray, np.ndarray]:
    """The preface's "Noise": the float32 path's Gumbel noise ``-log(-L(u))`` (float64 value of the formula: the
    degree-8 series with float32 coefficients below 0.25, else ``log(max(1 - u, 2**-24))``) and
    its bound ``2**-19 + 2**-20 * |n|``."""
    u = np.asarray(u, dtype=np.float32).astype(np.float64)
    poly = np.full(u.shape, 0.125)
    for c in _SERIES:
        poly = c + u * poly
    series = -u * poly
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = np.log(np.maximum(1.0 - u, 2.0**-24))
        n = -np.log(-np.where(u < 0.25, series, direct))
    return n, NOISE32_ABS + NOISE32_REL * np.abs(n)


def gumbel_noise64(u) -> tuple[np.ndarray, np.ndarray]:
    """The preface's "Noise": the float64 path's noise ``-log(-log(u))`` and its bound ``2**-48 * (1 + |n|)``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        n = -np.log(-np.log(np.asarray(u, dtype=np.float64)))
    return n, NOISE64_ABS * (1.0 + np.abs(n))


# --------------------------------------------------------------------------------------------
# block argmax with windows (the preface to §28-§35)
# --------------------------------------------------------------------------------------------


def _block_argmax(g, lo, hi, exact, keys, kind_key, choices, settlement, dtype, token_base):
    """Per row of ``g`` (``[n, BLOCK]``, float64 reference values; ``lo``/``hi`` the interval the
    run's value may take; ``exact``: the interval is the point ``g``): the winning lane, its
    reference value and bound. A row whose winner is not settled records a window."""
    with np.errstate(invalid="ignore"):
        nominal = np.argmax(np.where(np.isnan(g), -np.inf, g), axis=1)
        mlo = np.max(np.where(np.isnan(lo), -np.inf, lo), axis=1)
        cand = hi >= mlo[:, None]
    n = g.shape[0]
    rows = np.arange(n)
    wide = cand.sum(axis=1) > 1
    wide &= ~np.all(np.where(cand, exact, True), axis=1)
    chosen = nominal.copy()
    for r in np.flatnonzero(wide):
        opts = tuple(int(token_base[r] + k) for k in np.flatnonzero(cand[r]))
        key = (*kind_key, *keys[r])
        c = _choice(choices, key, opts, int(token_base[r] + nominal[r]))
        chosen[r] = c - token_base[r]
        settlement.windows.append(Window("argmax", key, opts, c))
    val = g[rows, chosen]
    with np.errstate(invalid="ignore"):
        bound = np.where(np.isfinite(val), np.maximum(hi[rows, chosen] - val, val - lo[rows, chosen]), 0.0)
    bound = np.where(np.isnan(bound), np.inf, bound)
    bound = np.where(bound > 0, bound + 0.5 * _ulp_of(val, dtype), 0.0)  # an exact value is stored as it is
    return chosen, val, bound


def _gumbel_values(x, x_bound, mask, seed, pos, keys, noisy, use_fp64):
    """Gumbel-perturbed values ``x + n`` of lanes (``[n, BLOCK]``), their bounds, for rows
    ``noisy`` (others: ``x`` as is, exact); masked lanes ``-inf``."""
    if use_fp64:
        n, en = gumbel_noise64(murmur3_uniform64(seed[:, None], pos[:, None], keys))
        eps = 2.0**-53
    else:
        n, en = gumbel_noise32(murmur3_uniform32(seed[:, None], pos[:, None], keys))
        eps = EPS32
    with np.errstate(invalid="ignore"):
        g = np.where(noisy[:, None], x + n, x)
        e = np.where(noisy[:, None], x_bound + en + eps * np.abs(g), x_bound)
    g = np.where(mask, g, -np.inf)
    e = np.where(mask & np.isfinite(g), e, 0.0)
    return g, e


# --------------------------------------------------------------------------------------------
# §28 _temperature_kernel
# --------------------------------------------------------------------------------------------


def temperature(*, logits, expanded_idx_mapping, temperature, num_tokens=None, vocab_size=None,
                BLOCK_SIZE: int = 8192) -> Settlement:  # fmt: skip
    """§28: ``logits[t, :V] /= temperature[expanded_idx_mapping[t]]`` in float32 for rows whose
    temperature is neither 0 nor 1 (correctly rounded; compiled within 2 ulp: the bound)."""
    L, W = _flat_rows(logits, "logits")
    T = _n(num_tokens, L.shape[0])
    V = _n(vocab_size, W)
    nb = -(-V // BLOCK_SIZE)
    cols = min(V, nb * BLOCK_SIZE)
    st = Settlement(bounds={"logits": np.zeros(L.shape)})
    if T <= 0 or cols <= 0:
        return st
    s = np.asarray(expanded_idx_mapping)[:T].astype(np.int64)
    _check_index(s, len(temperature), "temperature read")
    if cols > W or T > L.shape[0]:
        raise IndexError("logits: the grid reaches past the table")
    temp = np.asarray(temperature)[s].astype(np.float32)
    rows = np.flatnonzero((temp != 0) & (temp != 1))
    q = L[rows, :cols].astype(np.float32) / temp[rows, None]
    L[rows, :cols] = q.astype(L.dtype)
    st.bounds["logits"][rows, :cols] = 2 * _ulp32(q)
    return st


# --------------------------------------------------------------------------------------------
# §29 _gumbel_sample_kernel
# --------------------------------------------------------------------------------------------


def gumbel_sample(*, local_argmax, local_max, logits, expanded_idx_mapping, seeds, pos, temperature,
                  apply_temperature: bool, is_drafting: bool, use_fp64: bool = False, logits_cache=None,
                  logits_cache_col=None, logits_cache_source=None, num_tokens=None, vocab_size=None,
                  BLOCK_SIZE: int = 1024, choices=None) -> Settlement:  # fmt: skip
    """§29: per row and vocabulary block, the Gumbel-max winner (its token id) and its perturbed
    value; the pre-temperature logits copied into the drafter's logits cache."""
    L, W = _flat_rows(logits, "logits")
    T = _n(num_tokens, L.shape[0])
    V = _n(vocab_size, W)
    nb = -(-V // BLOCK_SIZE)
    st = Settlement(bounds={"local_max": np.zeros(np.shape(local_max))})
    if T <= 0 or nb <= 0:
        return st
    eidx = np.asarray(expanded_idx_mapping)[:T].astype(np.int64)
    valid = eidx >= 0
    si = np.where(valid, eidx, 0)
    _check_index(si[valid], min(len(temperature), len(seeds)), "temperature/seeds read")
    temp = np.where(valid, np.asarray(temperature)[si].astype(np.float32), np.float32(0))
    seed = np.where(valid, np.asarray(seeds)[si].astype(np.int64), 0)
    p = np.asarray(pos)[:T].astype(np.int64)
    width = nb * BLOCK_SIZE
    tok = np.arange(width, dtype=np.int64)
    mask = tok < V
    if min(V, width) > W:
        raise IndexError("logits: the grid reaches past the table")
    x32 = np.full((T, width), -np.inf)
    x32[:, :V] = L[:T, :V].astype(np.float32)
    if logits_cache is not None:
        src = L if logits_cache_source is None else np.asarray(logits_cache_source)
        cols = np.asarray(logits_cache_col).astype(np.int64)
        col = cols[:T] if cols.ndim > 0 else np.full(T, int(cols))
        cache = logits_cache
        vr = np.flatnonzero(valid)
        _check_index(si[vr], cache.shape[0], "logits cache row")
        _check_index(col[vr], cache.shape[1], "logits cache column")
        cache[si[vr], col[vr], :V] = src[vr, :V]
        seed = spec_step_seed(seed, col)
    divide = (temp != 0) & bool(apply_temperature)
    with np.errstate(invalid="ignore", divide="ignore"):
        x = np.where(divide[:, None], x32 / np.where(divide, temp, 1).astype(np.float64)[:, None], x32)
        xb = np.where(divide[:, None], DIV32 * np.abs(x), 0.0)
    xb = _zero_where_inf(xb, x)
    pe = p + DRAFT_NOISE_SALT if is_drafting else p
    g, e = _gumbel_values(x, xb, mask[None, :], seed, pe, tok[None, :], temp != 0, use_fp64)
    gb = g.reshape(T * nb, BLOCK_SIZE)
    eb = e.reshape(T * nb, BLOCK_SIZE)
    keys = [("row", t, "block", b) for t in range(T) for b in range(nb)]
    base = np.tile(np.arange(nb, dtype=np.int64) * BLOCK_SIZE, T)
    dtype = np.float64 if use_fp64 else np.float32
    idx, val, bound = _block_argmax(gb, gb - eb, gb + eb, eb == 0, keys, (), choices, st, dtype, base)
    la = np.asarray(local_argmax)
    lm = np.asarray(local_max)
    if la.shape[0] < T or la.shape[1] < nb or lm.shape[0] < T or lm.shape[1] < nb:
        raise IndexError("local_argmax/local_max: smaller than the grid")
    la[:T, :nb] = (base + idx).reshape(T, nb)
    lm[:T, :nb] = val.reshape(T, nb).astype(lm.dtype)
    st.bounds["local_max"][:T, :nb] = bound.reshape(T, nb)
    return st


# --------------------------------------------------------------------------------------------
# log-sum-exp of block statistics (§30.1, used by §31-§33)
# --------------------------------------------------------------------------------------------


def _lse(maxes, sums) -> tuple[np.ndarray, np.ndarray]:
    """``M + log(sum_b s_b * exp(m_b - M))`` of rows of block statistics, and its bound."""
    m = np.asarray(maxes, dtype=np.float64)
    s = np.asarray(sums, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        M = np.max(m, axis=-1)
        x = m - M[..., None]
        p = s * np.exp(x)
        p = np.where(s == 0, 0.0, p)
        Z = np.sum(p, axis=-1)
        lz = np.log(Z)
        lse = M + lz
        spread = np.sum(np.where(p > 0, p * np.abs(x), 0.0), axis=-1) / Z
        e = SUM_SMALL + EXP_ARG * 2 * spread + LOG_REL * np.abs(lz) + EPS32 * np.abs(lse)
    return lse, np.where(np.isfinite(e), e, np.inf)


def _stats_rows(stat, rows, nb):
    a = np.asarray(stat)
    return a[rows, :nb]


# --------------------------------------------------------------------------------------------
# §30 _compute_local_logits_stats_kernel
# --------------------------------------------------------------------------------------------


def _bonus(elp, num_logits):
    """Rows whose next row starts a request (or the last row): §30.1's bonus rows."""
    nxt = np.zeros(num_logits, dtype=np.int64)
    nxt[:-1] = np.asarray(elp)[1:num_logits]
    return nxt == 0


def _sumexp(x, mask):
    """Per row: ``m = max x`` over the lanes, ``sum exp(x - m)`` (0 if ``m = -inf``), the spread
    ``sum exp(x - m) * |x - m|``; float64."""
    xm = np.where(mask, x, -np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.max(xm, axis=-1)
        d = xm - m[..., None]
        t = np.where(np.isfinite(d), np.exp(d), 0.0)
        S = np.where(m > -np.inf, t.sum(axis=-1), 0.0)
        spread = np.where(t > 0, t * np.abs(d), 0.0)
    return m, S, spread


def compute_local_logits_stats(*, target_local_argmax, target_local_max, target_local_sumexp, draft_local_max,
                               draft_local_sumexp, target_logits, draft_logits, expanded_idx_mapping,
                               expanded_local_pos, temperature, num_logits=None, vocab_size=None,
                               BLOCK_SIZE: int = 8192) -> Settlement:  # fmt: skip
    """§30: per non-bonus row and 8192-wide block: a greedy row's argmax and maximum, a random
    row's maximum and summed exponentials, and (with draft logits) the draft's."""
    tl_, W = _flat_rows(target_logits, "target_logits")
    n = _n(num_logits, tl_.shape[0])
    V = _n(vocab_size, W)
    nb = -(-V // BLOCK_SIZE)
    shape = np.shape(target_local_max)
    st = Settlement(bounds={k: np.zeros(np.shape(b)) for k, b in (
        ("target_local_max", target_local_max), ("target_local_sumexp", target_local_sumexp),
        ("draft_local_max", draft_local_max), ("draft_local_sumexp", draft_local_sumexp))})  # fmt: skip
    if n <= 0 or nb <= 0:
        return st
    if min(V, nb * BLOCK_SIZE) > W:
        raise IndexError("target_logits: the grid reaches past the table")
    elp = np.asarray(expanded_local_pos)[:n].astype(np.int64)
    rows = np.flatnonzero(~_bonus(elp, n))
    s = np.asarray(expanded_idx_mapping)[rows].astype(np.int64)
    _check_index(s, len(temperature), "temperature read")
    temp = np.asarray(temperature)[s].astype(np.float32)
    width = nb * BLOCK_SIZE
    mask = (np.arange(width) < V).reshape(nb, BLOCK_SIZE)
    x = np.full((len(rows), width), -np.inf, dtype=np.float32)
    x[:, :V] = tl_[rows, :V].astype(np.float32)
    xb = x.reshape(len(rows), nb, BLOCK_SIZE).astype(np.float64)
    if shape[0] < n or shape[1] < nb:
        raise IndexError("block statistics: smaller than the grid")
    greedy = temp == 0
    g, r = rows[greedy], rows[~greedy]
    if g.size:
        blk = xb[greedy]
        arg = np.argmax(np.where(np.isnan(blk), -np.inf, blk), axis=-1)  # first of the maxima
        np.asarray(target_local_argmax)[g, :nb] = np.arange(nb) * BLOCK_SIZE + arg
        np.asarray(target_local_max)[g, :nb] = np.max(blk, axis=-1).astype(np.float32)
    if r.size:
        m, S, spread = _sumexp(xb[~greedy], mask[None])
        np.asarray(target_local_max)[r, :nb] = m.astype(np.float32)
        np.asarray(target_local_sumexp)[r, :nb] = S.astype(np.float32)
        st.bounds["target_local_sumexp"][r, :nb] = SUM_BLOCK * S + 2 * EXP_ARG * spread.sum(-1) + 0.5 * _ulp32(S)
        if draft_logits is not None:
            dl = np.asarray(draft_logits)
            sr = s[~greedy]
            steps = elp[r]
            _check_index(sr, dl.shape[0], "draft_logits row")
            _check_index(steps, dl.shape[1], "draft_logits step")
            if min(V, width) > dl.shape[2]:
                raise IndexError("draft_logits: the grid reaches past the table")
            d32 = np.full((len(r), width), -np.inf, dtype=np.float32)
            d32[:, :V] = dl[sr, steps, :V].astype(np.float32)
            tr = temp[~greedy]
            with np.errstate(invalid="ignore", divide="ignore"):
                q32 = (d32 / tr[:, None]).reshape(len(r), nb, BLOCK_SIZE)  # correctly rounded
                q = (d32.astype(np.float64) / tr[:, None]).reshape(len(r), nb, BLOCK_SIZE)
            qm = np.max(np.where(mask[None], q32, -np.inf), axis=-1)
            m_d, S_d, spread_d = _sumexp(q, mask[None])
            with np.errstate(invalid="ignore"):
                extra = np.where(np.isfinite(q), np.exp(q - m_d[..., None]) * (np.abs(q) + np.abs(m_d[..., None])), 0.0)
            np.asarray(draft_local_max)[r, :nb] = qm
            np.asarray(draft_local_sumexp)[r, :nb] = S_d.astype(np.float32)
            st.bounds["draft_local_max"][r, :nb] = 2 * _ulp32(qm)
            st.bounds["draft_local_sumexp"][r, :nb] = (SUM_BLOCK * S_d + 2 * EXP_ARG * spread_d.sum(-1)
                                                       + 2 * DIV32 * np.where(mask[None], extra, 0).sum(-1)
                                                       + 0.5 * _ulp32(S_d))  # fmt: skip
    return st


# --------------------------------------------------------------------------------------------
# log-probabilities of drafted tokens (§31, §33)
# --------------------------------------------------------------------------------------------


class _Stats:
    """The block statistics of §30 as inputs: per logits row, the target's (and draft's)
    log-sum-exp with its bound, over the first ``P`` blocks."""

    def __init__(self, tmax, tsum, dmax, dsum, P: int) -> None:
        self.t_lse, self.t_e = _lse(np.asarray(tmax)[:, :P], np.asarray(tsum)[:, :P])
        if dmax is not None:
            self.d_lse, self.d_e = _lse(np.asarray(dmax)[:, :P], np.asarray(dsum)[:, :P])
        else:
            self.d_lse = self.d_e = None


def _logprobs(rows, tokens, valid, s, steps, temp, target_logits, draft_logits, stats: _Stats):
    """Target and draft log-probabilities of ``tokens`` at logits ``rows`` (draft: state rows
    ``s``, steps ``steps``, divided by ``temp``) with bounds; ``valid`` false reads nothing and
    gives ``-inf``. Without draft logits the draft's is 0."""
    tl_ = np.asarray(target_logits)
    tk = np.where(valid, tokens, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        tlog = np.where(valid, tl_[rows, tk].astype(np.float32).astype(np.float64), -np.inf)
        tlp = tlog - stats.t_lse[rows]
        et = _zero_where_inf(stats.t_e[rows] + EPS32 * np.abs(tlp), tlp)
        if draft_logits is None:
            return tlp, et, np.zeros(len(rows)), np.zeros(len(rows)), stats.t_lse[rows], np.zeros(len(rows))
        dl = np.asarray(draft_logits)
        dlog32 = np.where(valid, dl[s, steps, tk].astype(np.float32), np.float32(-np.inf))
        q = dlog32.astype(np.float64) / temp
        dlp = q - stats.d_lse[rows]
        ed = _zero_where_inf(stats.d_e[rows] + DIV32 * np.abs(q) + EPS32 * np.abs(dlp), dlp)
    return tlp, et, dlp, ed, stats.t_lse[rows], stats.d_lse[rows]


def _requests(num_reqs, cu_num_logits, idx_mapping, temperature):
    cu = np.asarray(cu_num_logits).astype(np.int64)
    B = _n(num_reqs, len(cu) - 1)
    s = np.asarray(idx_mapping)[:B].astype(np.int64)
    _check_index(s, len(temperature), "temperature read")
    return B, cu[:B], cu[1:B + 1], s, np.asarray(temperature)[s].astype(np.float32)


# --------------------------------------------------------------------------------------------
# §31 _compute_cumulative_log_p_kernel
# --------------------------------------------------------------------------------------------


def compute_cumulative_log_p(*, cumulative_log_p, target_logits, target_local_max, target_local_sumexp,
                             draft_sampled, draft_logits, draft_local_max, draft_local_sumexp, cu_num_logits,
                             idx_mapping, temperature, vocab_num_blocks, num_reqs=None,
                             PADDED_VOCAB_NUM_BLOCKS=None) -> Settlement:  # fmt: skip
    """§31: per random request, the running ``min(log_p + (log p(x) - log q(x)), 0)`` over its
    drafts (a ``-1`` draft carries the last value), one value per draft row."""
    out = np.asarray(cumulative_log_p)
    st = Settlement(bounds={"cumulative_log_p": np.zeros(out.shape)})
    B, start, end, s, temp = _requests(num_reqs, cu_num_logits, idx_mapping, temperature)
    P = min(int(vocab_num_blocks), _n(PADDED_VOCAB_NUM_BLOCKS, vocab_num_blocks))
    stats = _Stats(target_local_max, target_local_sumexp, None if draft_logits is None else draft_local_max,
                   draft_local_sumexp, P)  # fmt: skip
    nd = end - start - 1
    live = temp != 0
    ds = np.asarray(draft_sampled).astype(np.int64)
    log_p = np.zeros(B)
    err = np.zeros(B)
    for i in range(int(max(nd.max(initial=0), 0))):
        on = live & (i < nd)
        if not on.any():
            break
        r = np.flatnonzero(on)
        rows = start[r] + i
        tok = ds[rows + 1]
        valid = tok >= 0
        tlp, et, dlp, ed, _, _ = _logprobs(rows, tok, valid, s[r], np.full(len(r), i), temp[r].astype(np.float64),
                                           target_logits, draft_logits, stats)  # fmt: skip
        with np.errstate(invalid="ignore"):
            new = np.minimum(log_p[r] + (tlp - dlp), 0.0)
            new_err = err[r] + et + ed + EPS32 * (np.abs(tlp - dlp) + np.abs(new))
        log_p[r] = np.where(valid, new, log_p[r])
        err[r] = np.where(valid, new_err, err[r])
        if rows.max(initial=-1) >= len(out):
            raise IndexError("cumulative_log_p write: past the buffer")
        out[rows] = log_p[r].astype(np.float32)
        st.bounds["cumulative_log_p"][rows] = err[r] + 0.5 * _ulp32(log_p[r])
    return st


# --------------------------------------------------------------------------------------------
# §32 _compute_local_residual_mass_kernel
# --------------------------------------------------------------------------------------------


def compute_local_residual_mass(*, local_residual_mass, cumulative_log_p, target_logits, target_local_max,
                                target_local_sumexp, draft_logits, draft_local_max, draft_local_sumexp,
                                draft_sampled, expanded_idx_mapping, expanded_local_pos, temperature,
                                vocab_num_blocks, num_logits=None, vocab_size=None, BLOCK_SIZE: int = 8192,
                                PADDED_VOCAB_NUM_BLOCKS=None) -> Settlement:  # fmt: skip
    """§32: per draft row past the first whose next draft is real, and per block, the partial
    residual mass ``sum max(p * M_b(x) - M_s(x), 0)`` with ``p = exp(cumulative_log_p[row-1])``."""
    out = np.asarray(local_residual_mass)
    st = Settlement(bounds={"local_residual_mass": np.zeros(out.shape)})
    tl_, W = _flat_rows(target_logits, "target_logits")
    n = _n(num_logits, tl_.shape[0])
    V = _n(vocab_size, W)
    nb = -(-V // BLOCK_SIZE)
    if n <= 0 or nb <= 0:
        return st
    P = min(int(vocab_num_blocks), _n(PADDED_VOCAB_NUM_BLOCKS, vocab_num_blocks))
    elp = np.asarray(expanded_local_pos)[:n].astype(np.int64)
    ds = np.asarray(draft_sampled).astype(np.int64)
    on = (elp != 0) & ~_bonus(elp, n)
    nxt = np.zeros(n, dtype=np.int64)  # the next row's draft (read only where ``on``)
    m = min(n, len(ds) - 1)
    nxt[:m] = ds[1:m + 1]
    on &= nxt >= 0
    rows = np.flatnonzero(on)
    s = np.asarray(expanded_idx_mapping)[rows].astype(np.int64)
    _check_index(s, len(temperature), "temperature read")
    temp = np.asarray(temperature)[s].astype(np.float32)
    rows, s, temp = rows[temp != 0], s[temp != 0], temp[temp != 0]
    if rows.size == 0:
        return st
    stats = _Stats(target_local_max, target_local_sumexp, draft_local_max, draft_local_sumexp, P)
    width = nb * BLOCK_SIZE
    mask = np.arange(width) < V
    dl = np.asarray(draft_logits)
    t = np.full((len(rows), width), -np.inf)
    t[:, :V] = tl_[rows, :V].astype(np.float32)
    d = np.full((len(rows), width), -np.inf)
    d[:, :V] = dl[s, elp[rows], :V].astype(np.float32)
    T64 = temp.astype(np.float64)[:, None]
    clp = np.asarray(cumulative_log_p)[rows - 1].astype(np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        tlp = t - stats.t_lse[rows][:, None]
        q = d / T64
        dlp = q - stats.d_lse[rows][:, None]
        et = stats.t_e[rows][:, None] + EPS32 * np.abs(tlp)
        ed = stats.d_e[rows][:, None] + DIV32 * np.abs(q) + EPS32 * np.abs(dlp)
        p = np.exp(clp)[:, None]
        a = p * np.exp(tlp)
        b = np.exp(dlp)
        a = np.where(np.isfinite(tlp) | (tlp > 0), a, 0.0)
        b = np.where(np.isfinite(dlp) | (dlp > 0), b, 0.0)
        term = np.maximum(a - b, 0.0)
        da = a * (_exp_rel(clp)[:, None] + _exp_rel(tlp) + et + EPS32)
        db = b * (_exp_rel(dlp) + ed)
        dterm = np.where(a > 0, da, 0.0) + np.where(b > 0, db, 0.0) + EPS32 * np.abs(a - b)
        dterm = np.where(mask[None] & ((a > 0) | (b > 0)), dterm, 0.0)
        term = np.where(mask[None], term, 0.0)
    partial = term.reshape(len(rows), nb, BLOCK_SIZE).sum(-1)
    bound = dterm.reshape(len(rows), nb, BLOCK_SIZE).sum(-1) + SUM_BLOCK * partial + 0.5 * _ulp32(partial)
    if out.shape[0] < n or out.shape[1] < nb:
        raise IndexError("local_residual_mass: smaller than the grid")
    out[rows, :nb] = partial.astype(np.float32)
    st.bounds["local_residual_mass"][rows, :nb] = bound
    return st


# --------------------------------------------------------------------------------------------
# §33 _rejection_kernel
# --------------------------------------------------------------------------------------------


def _global_argmax(tmax, targ, rows, P):
    m = np.asarray(tmax)[rows, :P].astype(np.float64)
    m = np.where(np.isnan(m), -np.inf, m)
    b = np.argmax(m, axis=1)
    return np.asarray(targ)[rows, b].astype(np.int64)


def rejection(*, sampled, num_sampled, target_rejected_logsumexp, draft_rejected_logsumexp, target_logits,
              target_local_argmax, target_local_max, target_local_sumexp, draft_sampled, draft_logits,
              draft_local_max, draft_local_sumexp, cu_num_logits, idx_mapping, temperature, seed, pos,
              vocab_num_blocks, synthetic_conditional_rates=None, cumulative_log_p=None, local_residual_mass=None,
              fly_entropy=None, fly_entropy_threshold: float = 0.3, use_block_verification: bool = False,
              fly_window_size: int = 0, num_reqs=None, PADDED_VOCAB_NUM_BLOCKS=None,
              choices=None) -> Settlement:  # fmt: skip
    """§33: per request, its drafts verified in order (greedy, synthetic, standard, block or FLy
    rules), the accepted length, the tokens written, and the log-sum-exps the resampling reads."""
    out = np.asarray(sampled)
    st = Settlement(bounds={"target_rejected_logsumexp": np.zeros(np.shape(target_rejected_logsumexp)),
                            "draft_rejected_logsumexp": np.zeros(np.shape(draft_rejected_logsumexp))})
    B, start, end, s, temp = _requests(num_reqs, cu_num_logits, idx_mapping, temperature)
    if B <= 0:
        return st
    P = min(int(vocab_num_blocks), _n(PADDED_VOCAB_NUM_BLOCKS, vocab_num_blocks))
    has_draft = draft_logits is not None
    syn = synthetic_conditional_rates is not None
    block = bool(use_block_verification)
    fly = int(fly_window_size)
    stats = _Stats(target_local_max, target_local_sumexp, draft_local_max if has_draft else None,
                   draft_local_sumexp, P)  # fmt: skip
    ds_all = np.asarray(draft_sampled).astype(np.int64)
    pos_all = np.asarray(pos).astype(np.int64)
    seed_r = np.asarray(seed)[s].astype(np.int64)
    greedy = temp == 0
    nd = end - start - 1
    acc = np.zeros(B, dtype=np.int64)
    pending = np.full(B, -1, dtype=np.int64)
    rej_arg = np.zeros(B, dtype=np.int64)
    t_lse = np.zeros(B)
    d_lse = np.zeros(B)
    t_e = np.zeros(B)
    d_e = np.zeros(B)
    verifying = np.ones(B, dtype=bool)
    thr = np.float32(fly_entropy_threshold)
    tl_ = np.asarray(target_logits)
    for i in range(int(max(nd.max(initial=0), 0))):
        on = i < nd
        rows_all = start + i
        ds = np.where(on, ds_all[np.where(on, rows_all + 1, 0)], 0)
        valid = ds >= 0
        dsc = np.maximum(ds, 0)
        if fly == 0:
            verifying &= np.where(~greedy & on, valid, True)
        act = on & verifying
        if not act.any():
            continue
        r = np.flatnonzero(act)
        rows = rows_all[r]
        step_seed = spec_step_seed(seed_r[r], i) if block else seed_r[r]
        u = tl_rand32(step_seed, pos_all[rows])
        accepted = np.zeros(len(r), dtype=bool)
        can_defer = np.zeros(len(r), dtype=bool)
        targ = np.zeros(len(r), dtype=np.int64)
        g = greedy[r]
        if g.any():
            gr = np.flatnonzero(g)
            targ[gr] = _global_argmax(target_local_max, target_local_argmax, rows[gr], P)
            if syn:
                accepted[gr] = u[gr] < np.float32(np.asarray(synthetic_conditional_rates)[i])
            else:
                accepted[gr] = targ[gr] == dsc[r][gr]
            accepted[gr] &= valid[r][gr]
            if fly > 0:
                tlog = np.where(valid[r][gr], tl_[rows[gr], dsc[r][gr]].astype(np.float32), -np.inf)
                can_defer[gr] = valid[r][gr] & (tlog > -np.inf)
        rnd = np.flatnonzero(~g)
        if rnd.size and block:
            rr = r[rnd]
            rw = rows[rnd]
            clp = np.asarray(cumulative_log_p)[rw].astype(np.float32).astype(np.float64)
            pr = np.exp(clp)
            with np.errstate(invalid="ignore"):
                epr = np.where(pr > 0, pr * _exp_rel(clp), 0.0)  # exp(-inf) = 0 exactly
            nxt = np.where(i < nd[rr] - 1, ds_all[np.minimum(rw + 2, len(ds_all) - 1)], -1)
            h = pr.copy()
            eh = epr.copy()
            has_next = nxt >= 0
            if has_next.any():
                k = np.flatnonzero(has_next)
                nr = rw[k] + 1
                if has_draft:
                    parts = np.asarray(local_residual_mass)[nr, :P].astype(np.float32).astype(np.float64)
                    R = parts.sum(-1)
                    eR = SUM_SMALL * np.abs(parts).sum(-1)
                else:
                    with np.errstate(invalid="ignore", over="ignore"):
                        xl = tl_[nr, nxt[k]].astype(np.float32) - stats.t_lse[nr]
                        mb = np.exp(xl)
                        emb = np.where(mb > 0, mb * (_exp_rel(xl) + stats.t_e[nr] + EPS32 * np.abs(xl)), 0.0)
                    R = pr[k] * (1.0 - mb)
                    eR = epr[k] * np.abs(1.0 - mb) + pr[k] * emb + EPS32 * (np.abs(R) + pr[k])
                den = R + 1.0 - pr[k]
                eden = eR + epr[k] + EPS32 * (np.abs(R + 1.0) + np.abs(den))
                with np.errstate(invalid="ignore", divide="ignore"):
                    hk = np.where(den > 0, R / den, 1.0)
                    ehk = np.where(np.abs(den) > eden,
                                   DIV32 * np.abs(hk) + (eR + np.abs(hk) * eden) / np.maximum(np.abs(den) - eden, 1e-300),
                                   np.inf)  # fmt: skip
                h[k], eh[k] = hk, ehk
            u64 = u[rnd].astype(np.float64)
            acc_now = u64 <= h
            margin = h - u64
            for j in np.flatnonzero(~(np.abs(margin) > eh)):
                key = ("req", int(rr[j]), "step", i)
                acc_now[j] = _choice(choices, key, (False, True), bool(acc_now[j]))
                st.windows.append(Window("accept", key, (False, True), bool(acc_now[j]), float(margin[j]), float(eh[j])))
            acc[rr] = np.where(acc_now, i + 1, acc[rr])
            out[rr, i] = dsc[rr]
        elif rnd.size:
            rr = r[rnd]
            rw = rows[rnd]
            tlp, et, dlp, ed, st_lse, sd_lse = _logprobs(rw, dsc[rr], valid[rr], s[rr], np.full(len(rr), i),
                                                         temp[rr].astype(np.float64), target_logits,
                                                         draft_logits if has_draft else None, stats)  # fmt: skip
            upd = np.ones(len(rr), dtype=bool) if fly == 0 else pending[rr] < 0
            t_lse[rr] = np.where(upd, st_lse, t_lse[rr])
            t_e[rr] = np.where(upd, stats.t_e[rw], t_e[rr])
            if has_draft:
                d_lse[rr] = np.where(upd, sd_lse, d_lse[rr])
                d_e[rr] = np.where(upd, stats.d_e[rw], d_e[rr])
            if syn:
                a_now = u[rnd] < np.float32(np.asarray(synthetic_conditional_rates)[i])
            else:
                lu = np.log(u[rnd].astype(np.float64))
                with np.errstate(invalid="ignore"):
                    rhs = lu + dlp
                    margin = tlp - rhs
                    em = et + ed + LOG_REL * np.abs(lu) + EPS32 * np.abs(rhs)
                    a_now = tlp > rhs
                    settled = ~np.isfinite(margin) | np.isnan(margin) | (np.abs(margin) > em)
                for j in np.flatnonzero(~settled):
                    key = ("req", int(rr[j]), "step", i)
                    a_now[j] = _choice(choices, key, (False, True), bool(a_now[j]))
                    st.windows.append(Window("accept", key, (False, True), bool(a_now[j]), float(margin[j]), float(em[j])))
            accepted[rnd] = a_now
            if fly > 0:
                accepted[rnd] &= valid[rr]
                can_defer[rnd] = valid[rr] & (tlp > -np.inf) & (dlp > -np.inf)
        # the bookkeeping of the non-block rules (greedy rows of every method included)
        book = g | (not block)
        if book.any():
            k = np.flatnonzero(book)
            rk = r[k]
            a = accepted[k]
            if fly > 0:
                pend = pending[rk] >= 0
                confirm = pend & a & (i - pending[rk] == fly)
                new_verifying = np.where(pend, a, True)
                acc[rk] = np.where(confirm | (~pend & a), i + 1, acc[rk])
                pending[rk] = np.where(confirm, -1, pending[rk])
                rej = ~pend & ~a
                if rej.any():
                    q = np.flatnonzero(rej)
                    rej_arg[rk[q]] = targ[k[q]]
                    ent = np.asarray(fly_entropy)[rows[k[q]]].astype(np.float32)
                    cont = can_defer[k[q]] & (i + fly < nd[rk[q]]) & (ent >= thr)
                    new_verifying[q] = cont
                    pending[rk[q]] = np.where(cont, i, pending[rk[q]])
                verifying[rk] = new_verifying
                out[rk, i] = dsc[rk]
            else:
                verifying[rk] = a
                acc[rk] += a
                out[rk, i] = np.where(g[k] & ~a, targ[k], dsc[rk])
    if fly > 0:
        k = np.flatnonzero(greedy & (acc < nd))
        out[k, acc[k]] = rej_arg[k]
    np.asarray(num_sampled)[:B] = acc.astype(np.asarray(num_sampled).dtype)
    if block:
        k = np.flatnonzero(~greedy & (acc < nd))
        rw = start[k] + acc[k]
        t_lse[k], t_e[k] = stats.t_lse[rw], stats.t_e[rw]
        if has_draft:
            d_lse[k], d_e[k] = stats.d_lse[rw], stats.d_e[rw]
    np.asarray(target_rejected_logsumexp)[:B] = t_lse.astype(np.float32)
    np.asarray(draft_rejected_logsumexp)[:B] = d_lse.astype(np.float32)
    st.bounds["target_rejected_logsumexp"][:B] = t_e + 0.5 * _ulp32(t_lse)
    st.bounds["draft_rejected_logsumexp"][:B] = d_e + 0.5 * _ulp32(d_lse)
    return st


# --------------------------------------------------------------------------------------------
# §34 _resample_kernel
# --------------------------------------------------------------------------------------------


def resample(*, resampled_local_argmax, resampled_local_max, target_logits, target_rejected_logsumexp, draft_logits,
             draft_rejected_logsumexp, rejected_step, cu_num_logits, expanded_idx_mapping, draft_sampled, temperature,
             seed, pos, cumulative_log_p=None, use_fp64: bool = False, use_block_verification: bool = False,
             num_reqs=None, vocab_size=None, BLOCK_SIZE: int = 1024, choices=None) -> Settlement:  # fmt: skip
    """§34: per request whose rejected (or bonus) token must be drawn, per 1024-wide block, the
    Gumbel-max winner over the residual logits (the target's for a bonus or placeholder row;
    ``max(p - q, 0)`` in log space with draft logits; the target's less the rejected token
    without) and its perturbed value."""
    tl_, W = _flat_rows(target_logits, "target_logits")
    V = _n(vocab_size, W)
    nb = -(-V // BLOCK_SIZE)
    lm = np.asarray(resampled_local_max)
    st = Settlement(bounds={"resampled_local_max": np.zeros(lm.shape)})
    cu = np.asarray(cu_num_logits).astype(np.int64)
    B = _n(num_reqs, len(cu) - 1)
    if B <= 0 or nb <= 0:
        return st
    ri = np.asarray(rejected_step)[:B].astype(np.int64)
    rti = cu[:B] + ri
    eidx = np.asarray(expanded_idx_mapping).astype(np.int64)
    _check_index(rti, len(eidx), "expanded_idx_mapping read")
    s = eidx[rti]
    _check_index(s, len(temperature), "temperature read")
    temp = np.asarray(temperature)[s].astype(np.float32)
    bonus = rti == cu[1:B + 1] - 1
    r = np.flatnonzero(~((temp == 0) & ~bonus))
    if r.size == 0:
        return st
    ds = np.asarray(draft_sampled).astype(np.int64)
    rd = np.where(bonus[r], 0, ds[np.where(bonus[r], 0, rti[r] + 1)])
    plain = bonus[r] | (rd < 0)
    width = nb * BLOCK_SIZE
    tok = np.arange(width, dtype=np.int64)
    mask = tok < V
    if min(V, width) > W:
        raise IndexError("target_logits: the grid reaches past the table")
    t = np.full((len(r), width), -np.inf)
    t[:, :V] = tl_[rti[r], :V].astype(np.float32)
    lo, hi, x = t.copy(), t.copy(), t.copy()
    if draft_logits is not None and (~plain).any():
        k = np.flatnonzero(~plain)
        rk = r[k]
        dl = np.asarray(draft_logits)
        d = np.full((len(k), width), -np.inf)
        d[:, :V] = dl[s[rk], ri[rk], :V].astype(np.float32)
        T64 = temp[rk].astype(np.float64)[:, None]
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            tlse = np.asarray(target_rejected_logsumexp)[rk].astype(np.float32).astype(np.float64)[:, None]
            dlse = np.asarray(draft_rejected_logsumexp)[rk].astype(np.float32).astype(np.float64)[:, None]
            tlp = t[k] - tlse
            etlp = EPS32 * (np.abs(tlp) + np.abs(t[k]))
            if use_block_verification:
                ltau = np.where(ri[rk] > 0, np.asarray(cumulative_log_p)[np.maximum(rti[rk] - 1, 0)]
                                .astype(np.float32).astype(np.float64), 0.0)[:, None]  # fmt: skip
                tlp = tlp + ltau
                etlp = etlp + EPS32 * np.abs(tlp)
            q = d / T64
            dlp = q - dlse
            dd = dlp - tlp
            edd = etlp + DIV32 * np.abs(q) + EPS32 * (np.abs(dlp) + np.abs(dd))
            ratio = np.exp(dd)
            er = _exp_rel(dd) + edd
            below = ratio < 1.0
            res = np.where(below, tlp + np.log1p(-ratio), -np.inf)
            # a -inf target logit: -inf (settled); a -inf draft logit: ratio 0, z = lp_t exactly
            no_draft = np.isfinite(tlp) & (dlp == -np.inf)
            er = np.where(no_draft, 0.0, er)
            near = np.isfinite(tlp) & np.isfinite(dd) & (np.abs(1.0 - ratio) <= ratio * er)
            gap = 1.0 - ratio * (1.0 + er)
            el1p = np.where(no_draft, 0.0, ratio * er / np.where(gap > 0, gap, np.nan) + LOG_REL * np.abs(np.log1p(-ratio)))
            eres = etlp + el1p + EPS32 * np.abs(res)
            top = tlp + etlp + np.log1p(-np.minimum(ratio * (1.0 - er), 1.0))
            fin = np.isfinite(res)
            lo_k = np.where(near, -np.inf, np.where(fin, res - eres, -np.inf))
            hi_k = np.where(near, top, np.where(fin, res + eres, -np.inf))
            settled_inf = ~near & ~fin
            lo_k = np.where(settled_inf, -np.inf, lo_k)
            hi_k = np.where(settled_inf, -np.inf, hi_k)
        x[k], lo[k], hi[k] = res, lo_k, np.where(np.isnan(hi_k), np.inf, hi_k)
    elif (~plain).any():
        k = np.flatnonzero(~plain)
        drop = tok[None, :] == rd[k][:, None]
        x[k] = np.where(drop, -np.inf, x[k])
        lo[k], hi[k] = x[k], x[k]
    seed_r = np.asarray(seed)[s[r]].astype(np.int64)
    pos_r = np.asarray(pos)[rti[r]].astype(np.int64)
    noisy = temp[r] != 0
    with np.errstate(invalid="ignore"):
        e0 = np.where(np.isfinite(x), np.maximum(hi - x, x - lo), 0.0)
        e0 = np.where(np.isnan(e0), np.inf, e0)
        g, e = _gumbel_values(x, np.zeros_like(x), mask[None], seed_r, pos_r, tok[None, :], noisy, use_fp64)
        n_ = g - x  # the noise where finite
        glo = np.where(mask[None], lo + np.where(np.isfinite(n_), n_, 0) - e, -np.inf)
        ghi = np.where(mask[None], hi + np.where(np.isfinite(n_), n_, 0) + e, -np.inf)
    exact = (e0 == 0) & (e == 0)
    glo = np.where(exact, g, glo)
    ghi = np.where(exact, g, ghi)
    R = len(r)
    gb = g.reshape(R * nb, BLOCK_SIZE)
    keys = [("req", int(q), "block", b) for q in r for b in range(nb)]
    base = np.tile(np.arange(nb, dtype=np.int64) * BLOCK_SIZE, R)
    dtype = np.float64 if use_fp64 else np.float32
    idx, val, bound = _block_argmax(gb, glo.reshape(R * nb, BLOCK_SIZE), ghi.reshape(R * nb, BLOCK_SIZE),
                                    exact.reshape(R * nb, BLOCK_SIZE), keys, (), choices, st, dtype, base)  # fmt: skip
    la = np.asarray(resampled_local_argmax)
    if la.shape[0] < B or la.shape[1] < nb or lm.shape[0] < B or lm.shape[1] < nb:
        raise IndexError("resampled_local_argmax/max: smaller than the grid")
    la[r, :nb] = (base + idx).reshape(R, nb)
    lm[r, :nb] = val.reshape(R, nb).astype(lm.dtype)
    st.bounds["resampled_local_max"][r, :nb] = bound.reshape(R, nb)
    return st


# --------------------------------------------------------------------------------------------
# §35 _insert_resampled_kernel
# --------------------------------------------------------------------------------------------


def insert_resampled(*, sampled, num_sampled, resampled_local_argmax, resampled_local_max, cu_num_logits,
                     expanded_idx_mapping, temperature, resample_num_blocks, num_reqs=None,
                     PADDED_RESAMPLE_NUM_BLOCKS=None) -> Settlement:  # fmt: skip
    """§35: every request's count goes up by one; a request whose last token is drawn (random,
    or its bonus) gets the block winner with the greatest value (first of equals; NaN as
    ``-inf``) at ``sampled[r, num_sampled[r]]``."""
    ns_buf = np.asarray(num_sampled)
    cu = np.asarray(cu_num_logits).astype(np.int64)
    B = _n(num_reqs, len(cu) - 1)
    st = Settlement()
    if B <= 0:
        return st
    ns = ns_buf[:B].astype(np.int64)
    rti = cu[:B] + ns
    eidx = np.asarray(expanded_idx_mapping).astype(np.int64)
    _check_index(rti, len(eidx), "expanded_idx_mapping read")
    s = eidx[rti]
    _check_index(s, len(temperature), "temperature read")
    temp = np.asarray(temperature)[s].astype(np.float32)
    bonus = rti == cu[1:B + 1] - 1
    P = min(int(resample_num_blocks), _n(PADDED_RESAMPLE_NUM_BLOCKS, resample_num_blocks))
    r = np.flatnonzero(~((temp == 0) & ~bonus))
    if r.size:
        m = np.asarray(resampled_local_max)[r, :P].astype(np.float64)
        b = np.argmax(np.where(np.isnan(m), -np.inf, m), axis=1)
        np.asarray(sampled)[r, ns[r]] = np.asarray(resampled_local_argmax)[r, b]
    ns_buf[:B] = (ns + 1).astype(np.int32).astype(ns_buf.dtype)
    return st
