"""Numba oracles of Model Runner V2's verification kernels, written from docs/CONTRACT.md
§28-§35, independent of ``vectorized_v2_verify``.

Plain loops, one program after another as the contract describes them: scalar uint64
arithmetic masked to 32 bits for the noise (murmur3, Philox), float64 sums lane by lane for the
contract's formulas, and the bounds of its preface to §28-§35 alongside. Every cast is explicit (Numba
does not follow NEP 50; an unsigned and a signed integer would meet in float64). Each function
has the keyword-only signature of its ``vectorized_v2_verify`` namesake, writes the same
buffers and returns a :class:`~.settlement.Settlement`; the Numba functions (each that Python calls
an :func:`~.entry.entry`) take flat arrays and their strides, the wrappers check every index first (an ``IndexError`` leaves the buffers
untouched) and turn the windows the loops record into :class:`~.settlement.Window` records.
"""

from __future__ import annotations

import numba
import numpy as np

from .entry import entry
from .settlement import Settlement, Window

__all__ = [
    "compute_cumulative_log_p",
    "compute_local_logits_stats",
    "compute_local_residual_mass",
    "gumbel_sample",
    "insert_resampled",
    "murmur3_hash32",
    "murmur3_uniform32",
    "murmur3_uniform64",
    "philox4x32_10",
    "philox_rand32",
    "rejection",
    "resample",
    "temperature",
]

_MASK = np.uint64(0xFFFFFFFF)
_INF = np.inf

# the error model of the preface to §28-§35
_EPS32 = 2.0**-24
_DIV32 = 2.0**-22
_EXP_REL = 2.0**-20
_EXP_ARG = 2.0**-22
_LOG_REL = 2.0**-20
_SUM_BLOCK = 2.0**-15
_SUM_SMALL = 2.0**-17


# --------------------------------------------------------------------------------------------
# noise (the preface to §28-§35)
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _rotl(v, s):
    return ((v << np.uint64(s)) | (v >> np.uint64(32 - s))) & _MASK


@numba.njit(cache=True)
def _mix(h, k):
    k = (k * np.uint64(0xCC9E2D51)) & _MASK
    k = _rotl(k, 15)
    k = (k * np.uint64(0x1B873593)) & _MASK
    h = _rotl(h ^ k, 13)
    return (h * np.uint64(5) + np.uint64(0xE6546B64)) & _MASK


@numba.njit(cache=True)
def _hash(seed, pos, off, domain):
    """murmur3 of uint64 bit patterns ``seed``, ``pos`` (low word), ``off`` (low word)."""
    h = np.uint64(domain) & _MASK
    h = _mix(h, seed & _MASK)
    h = _mix(h, (seed >> np.uint64(32)) & _MASK)
    h = _mix(h, pos & _MASK)
    h = _mix(h, off & _MASK)
    h = h ^ np.uint64(16)
    h = h ^ (h >> np.uint64(16))
    h = (h * np.uint64(0x85EBCA6B)) & _MASK
    h = h ^ (h >> np.uint64(13))
    h = (h * np.uint64(0xC2B2AE35)) & _MASK
    return h ^ (h >> np.uint64(16))


@numba.njit(cache=True)
def _uniform32(seed, pos, off):
    r = _hash(seed, pos, off, 0)
    hi = np.float64(r >> np.uint64(16))
    lo = np.float64(r & np.uint64(0xFFFF))
    return np.float32(hi / 65536.0 + (lo + 0.5) / 4294967296.0)


@numba.njit(cache=True)
def _uniform64(seed, pos, off):
    lo = _hash(seed, pos, off, 0)
    hi = _hash(seed, pos, off, 0x9E3779B9)
    r = ((hi << np.uint64(32)) | lo) >> np.uint64(11)
    u = (np.float64(r) + 0.5) / 9007199254740992.0
    if u == 1.0:
        u = 1.0 - 1.0 / 9007199254740992.0
    return u


@numba.njit(cache=True)
def _philox(seed, off):
    c0, _c1, _c2, _c3 = _philox4(off & _MASK, (off >> np.uint64(32)) & _MASK, np.uint64(0), np.uint64(0),
                                 seed & _MASK, (seed >> np.uint64(32)) & _MASK)  # fmt: skip
    x = np.int64(c0)
    if x >= 2**31:
        x = x - 2**32  # the int32 it is
    if x < 0:
        x = -x - 1  # ~x
    return np.float32(np.float32(x) * np.float32(4.6566127342e-10))


@numba.njit(cache=True)
def _philox4(c0, c1, c2, c3, k0, k1):
    for _ in range(10):
        prod_a = np.uint64(0xD2511F53) * c0
        prod_b = np.uint64(0xCD9E8D57) * c2
        n0 = (prod_b >> np.uint64(32)) ^ c1 ^ k0
        n2 = (prod_a >> np.uint64(32)) ^ c3 ^ k1
        c1 = prod_b & _MASK
        c3 = prod_a & _MASK
        c0 = n0
        c2 = n2
        k0 = (k0 + np.uint64(0x9E3779B9)) & _MASK
        k1 = (k1 + np.uint64(0xBB67AE85)) & _MASK
    return c0, c1, c2, c3


def philox4x32_10(counter, key) -> tuple[np.ndarray, ...]:
    """Philox4x32-10 of one counter ``(c0, c1, c2, c3)`` and key ``(k0, k1)`` (uint32 values)."""
    words = _philox4(*(np.uint64(int(v) & 0xFFFFFFFF) for v in (*counter, *key)))
    return tuple(np.uint32(int(w)) for w in words)


@numba.njit(cache=True)
def _rand_open(seed, off):
    u = _philox(seed, off)
    lo = np.float32(4.6566127342e-10)
    return u if u > lo else lo


@numba.njit(cache=True)
def _noise(u, fp64):
    """Gumbel noise of a uniform and its bound (the preface to §28-§35)."""
    if fp64:
        n = -np.log(-np.log(u))
        return n, 2.0**-48 * (1.0 + abs(n))
    v = np.float64(u)
    if v < 0.25:
        acc = 0.0
        power = 1.0
        for k in range(1, 9):  # -sum_k u**k * float32(1/k)
            power *= v
            acc += power * np.float64(np.float32(1.0 / k))
        inner = -acc
    else:
        inner = np.log(max(1.0 - v, 2.0**-24))
    n = -np.log(-inner)
    return n, 2.0**-19 + 2.0**-20 * abs(n)


@numba.njit(cache=True)
def _bits(x):
    """The uint64 bit pattern of an int64."""
    if x >= 0:
        return np.uint64(x)
    return np.uint64(18446744073709551615) - np.uint64(-(x + 1))


@numba.njit(cache=True)
def _step_seed(seed, step):
    return _bits(seed) ^ (_bits(np.int64(step)) << np.uint64(32))


@entry("out")
def _vec_hash(seed, pos, off, domain, out):
    for i in range(out.size):
        out[i] = _hash(_bits(seed[i]), _bits(pos[i]), _bits(off[i]), domain)


@entry("out")
def _vec_u32(seed, pos, off, out):
    for i in range(out.size):
        out[i] = _uniform32(_bits(seed[i]), _bits(pos[i]), _bits(off[i]))


@entry("out")
def _vec_u64(seed, pos, off, out):
    for i in range(out.size):
        out[i] = _uniform64(_bits(seed[i]), _bits(pos[i]), _bits(off[i]))


@entry("out")
def _vec_philox(seed, off, out):
    for i in range(out.size):
        out[i] = _philox(_bits(seed[i]), _bits(off[i]))


def _three(seed, pos, off):
    s, p, o = np.broadcast_arrays(np.asarray(seed, np.int64), np.asarray(pos, np.int64), np.asarray(off, np.int64))
    return np.ascontiguousarray(s).ravel(), np.ascontiguousarray(p).ravel(), np.ascontiguousarray(o).ravel(), s.shape


def murmur3_hash32(seed, pos, offset, domain: int = 0) -> np.ndarray:
    """The preface's murmur3 hash (uint32), element by element."""
    s, p, o, shape = _three(seed, pos, offset)
    out = np.zeros(s.size, np.uint64)
    _vec_hash(s, p, o, np.uint64(domain), out)
    return out.astype(np.uint32).reshape(shape)


def murmur3_uniform32(seed, pos, offset) -> np.ndarray:
    s, p, o, shape = _three(seed, pos, offset)
    out = np.zeros(s.size, np.float32)
    _vec_u32(s, p, o, out)
    return out.reshape(shape)


def murmur3_uniform64(seed, pos, offset) -> np.ndarray:
    s, p, o, shape = _three(seed, pos, offset)
    out = np.zeros(s.size, np.float64)
    _vec_u64(s, p, o, out)
    return out.reshape(shape)


def philox_rand32(seed, offset) -> np.ndarray:
    s, o, _, shape = _three(seed, offset, 0)
    out = np.zeros(s.size, np.float32)
    _vec_philox(s, o, out)
    return out.reshape(shape)


# --------------------------------------------------------------------------------------------
# shared loop helpers
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _ulp32(x):
    if not np.isfinite(x):
        return 0.0
    a = np.float32(abs(x))
    return np.float64(np.nextafter(a, np.float32(np.inf)) - a)


@numba.njit(cache=True)
def _ulp64(x):
    if not np.isfinite(x):
        return 0.0
    a = abs(x)
    return np.nextafter(a, np.inf) - a


@numba.njit(cache=True)
def _argmax_lanes(g, lo, hi, exact, n, forced, cand):
    """Winner of lanes ``[0, n)``: the first maximum of ``g`` unless ``forced >= 0``; whether it
    is a window (the candidates marked in ``cand``)."""
    best = 0
    mlo = -np.inf
    for k in range(n):
        if g[k] > g[best] or (np.isnan(g[best]) and not np.isnan(g[k])):
            best = k
        if lo[k] > mlo:
            mlo = lo[k]
    count = 0
    all_exact = True
    for k in range(n):
        c = hi[k] >= mlo
        cand[k] = c
        if c:
            count += 1
            if not exact[k]:
                all_exact = False
    window = count > 1 and not all_exact
    if window and forced >= 0:
        best = forced
    return best, window


@numba.njit(cache=True)
def _lse_row(maxes, sums, base, P):
    """``M + log(sum s_b exp(m_b - M))`` of ``P`` statistics from ``base``, and its bound."""
    M = -np.inf
    for b in range(P):
        if maxes[base + b] > M:
            M = maxes[base + b]
    Z = 0.0
    spread = 0.0
    for b in range(P):
        s = np.float64(sums[base + b])
        if s != 0.0:
            x = np.float64(maxes[base + b]) - M
            p = s * np.exp(x)
            Z += p
            if p > 0:
                spread += p * abs(x)
    lz = np.log(Z)
    lse = M + lz
    e = _SUM_SMALL + 2 * _EXP_ARG * spread / Z + _LOG_REL * abs(lz) + _EPS32 * abs(lse)
    if not np.isfinite(e):
        e = np.inf
    return lse, e


# --------------------------------------------------------------------------------------------
# §28 temperature
# --------------------------------------------------------------------------------------------


@entry("L", "bound")
def _temperature(L, W, T, V, nb, BS, eidx, temp, bound):
    for t in range(T):
        tt = np.float32(temp[eidx[t]])
        if tt == 0 or tt == 1:
            continue
        for b in range(nb):
            for k in range(BS):
                v = b * BS + k
                if v < V:
                    q = np.float32(np.float32(L[t * W + v]) / tt)
                    L[t * W + v] = q
                    bound[t * W + v] = 2 * _ulp32(q)


def _n(v, d) -> int:
    return int(d if v is None else v)


def _check(idx, n: int, what: str) -> None:
    idx = np.asarray(idx)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"{what}: index outside [0, {n})")


def temperature(*, logits, expanded_idx_mapping, temperature, num_tokens=None, vocab_size=None,
                BLOCK_SIZE: int = 8192) -> Settlement:  # fmt: skip
    """§28, in loops."""
    L = np.asarray(logits)
    T, V = _n(num_tokens, L.shape[0]), _n(vocab_size, L.shape[1])
    nb = -(-V // BLOCK_SIZE)
    bound = np.zeros(L.shape)
    if T > 0 and nb > 0:
        e = np.asarray(expanded_idx_mapping)[:T].astype(np.int64)
        _check(e, len(temperature), "temperature read")
        if T > L.shape[0] or min(V, nb * BLOCK_SIZE) > L.shape[1]:
            raise IndexError("logits: the grid reaches past the table")
        flat = L.reshape(-1)
        work = flat.astype(np.float32)
        _temperature(work, L.shape[1], T, V, nb, BLOCK_SIZE, e, np.asarray(temperature, np.float32), bound.reshape(-1))
        flat[:] = work.astype(L.dtype)
    return Settlement(bounds={"logits": bound})


# --------------------------------------------------------------------------------------------
# §29 Gumbel sample
# --------------------------------------------------------------------------------------------


@entry("bound", "cand", "la", "lm", "windows")
def _gumbel(L, W, T, V, nb, BS, eidx, seeds, pos, temp, apply, drafting, fp64, has_cache, col, forced,
            la, LAW, lm, LMW, bound, windows, cand):  # fmt: skip
    g = np.empty(BS)
    lo = np.empty(BS)
    hi = np.empty(BS)
    ex = np.empty(BS, dtype=np.bool_)
    c = np.empty(BS, dtype=np.bool_)
    eps = 2.0**-53 if fp64 else _EPS32
    for t in range(T):
        s = eidx[t]
        tt = np.float32(0.0)
        seed = np.int64(0)
        if s >= 0:
            tt = np.float32(temp[s])
            seed = seeds[s]
        sb = _bits(seed)
        if has_cache:
            sb = _step_seed(seed, col[t])
        p = pos[t]
        if drafting:
            p = p + (1 << 30)
        for b in range(nb):
            for k in range(BS):
                v = b * BS + k
                if v >= V:
                    g[k] = -np.inf
                    lo[k] = -np.inf
                    hi[k] = -np.inf
                    ex[k] = True
                    continue
                x = np.float64(np.float32(L[t * W + v]))
                xe = 0.0
                if tt != 0 and apply:
                    x = x / np.float64(tt)
                    if np.isfinite(x):
                        xe = _DIV32 * abs(x)
                if tt != 0:
                    if fp64:
                        n, ne = _noise(_uniform64(sb, _bits(p), np.uint64(v)), True)
                    else:
                        n, ne = _noise(_uniform32(sb, _bits(p), np.uint64(v)), False)
                    val = x + n
                    e = xe + ne + eps * abs(val)
                else:
                    val = x
                    e = xe
                if not np.isfinite(val):
                    e = 0.0
                g[k] = val
                lo[k] = val - e
                hi[k] = val + e
                ex[k] = e == 0.0
            f = forced[t * nb + b]
            if f >= 0:
                f -= b * BS
            best, win = _argmax_lanes(g, lo, hi, ex, BS, f, c)
            windows[t * nb + b] = win
            if win:
                for k in range(BS):
                    cand[(t * nb + b) * BS + k] = c[k]
            la[t * LAW + b] = b * BS + best
            val = g[best]
            lm[t * LMW + b] = val
            e = max(hi[best] - val, val - lo[best]) if np.isfinite(val) else 0.0
            if e > 0:  # an exact value is stored as it is
                e += 0.5 * (_ulp64(val) if fp64 else _ulp32(val))
            bound[t * LMW + b] = e


def _forced(choices, keys, n) -> np.ndarray:
    out = np.full(n, -1, dtype=np.int64)
    if choices:
        for i, key in enumerate(keys):
            if key in choices:
                out[i] = int(choices[key])
    return out


@entry("cache", "col", "eidx")
def _copy_to_cache(cache, src, eidx, col, V):  # noqa: N803
    for t in range(eidx.shape[0]):  # the copy: row by row
        if eidx[t] >= 0:
            for v in range(V):
                cache[eidx[t], col[t], v] = src[t, v]


def _finish_windows(st: Settlement, windows, cand, keys, BS: int, block_base, forced, chosen_tokens) -> None:
    for i in np.flatnonzero(windows):
        opts = tuple(int(block_base[i] + k) for k in np.flatnonzero(cand[i * BS:(i + 1) * BS]))
        if forced[i] >= 0 and int(forced[i]) not in opts:
            raise ValueError(f"choice {int(forced[i])} for {keys[i]} is outside the contract's window {opts}")
        st.windows.append(Window("argmax", keys[i], opts, int(chosen_tokens[i])))


def gumbel_sample(*, local_argmax, local_max, logits, expanded_idx_mapping, seeds, pos, temperature,
                  apply_temperature: bool, is_drafting: bool, use_fp64: bool = False, logits_cache=None,
                  logits_cache_col=None, logits_cache_source=None, num_tokens=None, vocab_size=None,
                  BLOCK_SIZE: int = 1024, choices=None) -> Settlement:  # fmt: skip
    """§29, in loops."""
    L = np.asarray(logits)
    T, V = _n(num_tokens, L.shape[0]), _n(vocab_size, L.shape[1])
    nb = -(-V // BLOCK_SIZE)
    la, lm = np.asarray(local_argmax), np.asarray(local_max)
    st = Settlement(bounds={"local_max": np.zeros(lm.shape)})
    if T <= 0 or nb <= 0:
        return st
    if min(V, nb * BLOCK_SIZE) > L.shape[1] or la.shape[0] < T or la.shape[1] < nb or lm.shape[1] < nb:
        raise IndexError("gumbel_sample: the grid reaches past a buffer")
    eidx = np.asarray(expanded_idx_mapping)[:T].astype(np.int64)
    _check(eidx[eidx >= 0], min(len(temperature), len(seeds)), "temperature/seeds read")
    col = np.zeros(T, np.int64)
    if logits_cache is not None:
        cols = np.asarray(logits_cache_col).astype(np.int64)
        col = cols[:T].copy() if cols.ndim else np.full(T, int(cols), np.int64)
        cache = np.asarray(logits_cache)
        src = L if logits_cache_source is None else np.asarray(logits_cache_source)
        valid = eidx >= 0
        _check(eidx[valid], cache.shape[0], "logits cache row")
        _check(col[valid], cache.shape[1], "logits cache column")
        _copy_to_cache(cache, src, eidx, col, V)
    keys = [("row", t, "block", b) for t in range(T) for b in range(nb)]
    forced = _forced(choices, keys, T * nb)
    windows = np.zeros(T * nb, np.bool_)
    cand = np.zeros(T * nb * BLOCK_SIZE, np.bool_)
    la_w = np.zeros(la.shape, np.int64)
    lm_w = np.zeros(lm.shape, np.float64)
    bound = st.bounds["local_max"]
    _gumbel(np.ascontiguousarray(L).reshape(-1), L.shape[1], T, V, nb, BLOCK_SIZE, eidx,
            np.asarray(seeds, np.int64), np.asarray(pos, np.int64)[:T], np.asarray(temperature, np.float32),
            bool(apply_temperature), bool(is_drafting), bool(use_fp64), logits_cache is not None, col, forced,
            la_w.reshape(-1), la.shape[1], lm_w.reshape(-1), lm.shape[1], bound.reshape(-1), windows, cand)  # fmt: skip
    la[:T, :nb] = la_w[:T, :nb]
    lm[:T, :nb] = lm_w[:T, :nb].astype(lm.dtype)
    base = np.tile(np.arange(nb, dtype=np.int64) * BLOCK_SIZE, T)
    _finish_windows(st, windows, cand, keys, BLOCK_SIZE, base, forced, la_w[:T, :nb].reshape(-1))
    return st


# --------------------------------------------------------------------------------------------
# §30 statistics
# --------------------------------------------------------------------------------------------


@entry("b_dmax", "b_dsum", "b_tsum", "dmax", "dsum", "targ", "tmax", "tsum")
def _stats(tl, W, n, V, nb, BS, eidx, elp, temp, has_draft, dl, D0, D1, targ, tmax, tsum, dmax, dsum, SW,
           b_tsum, b_dmax, b_dsum):  # fmt: skip
    for j in range(n):
        if j + 1 >= n or elp[j + 1] == 0:
            continue  # the bonus row
        s = eidx[j]
        tt = np.float32(temp[s])
        for b in range(nb):
            lo_v = b * BS
            hi_v = min(V, lo_v + BS)
            m = -np.inf
            arg = 0
            for v in range(lo_v, hi_v):
                x = np.float32(tl[j * W + v])
                if x > m:
                    m = x
                    arg = v - lo_v
            if hi_v <= lo_v:
                arg = 0
            if tt == 0:
                targ[j * SW + b] = lo_v + arg
                tmax[j * SW + b] = m
                continue
            tmax[j * SW + b] = m
            S = 0.0
            spread = 0.0
            if m > -np.inf:
                for v in range(lo_v, hi_v):
                    d = np.float64(np.float32(tl[j * W + v])) - np.float64(m)
                    if np.isfinite(d):
                        t_ = np.exp(d)
                        S += t_
                        spread += t_ * abs(d)
            tsum[j * SW + b] = S
            b_tsum[j * SW + b] = _SUM_BLOCK * S + 2 * _EXP_ARG * spread + 0.5 * _ulp32(S)
            if has_draft:
                base = s * D0 + elp[j] * D1
                qm32 = np.float32(-np.inf)
                qm = -np.inf
                for v in range(lo_v, hi_v):
                    q32 = np.float32(np.float32(dl[base + v]) / tt)
                    if q32 > qm32:
                        qm32 = q32
                    q = np.float64(np.float32(dl[base + v])) / np.float64(tt)
                    if q > qm:
                        qm = q
                dmax[j * SW + b] = qm32
                b_dmax[j * SW + b] = 2 * _ulp32(qm32)
                Sd = 0.0
                ed = 0.0
                if qm > -np.inf:
                    for v in range(lo_v, hi_v):
                        q = np.float64(np.float32(dl[base + v])) / np.float64(tt)
                        d = q - qm
                        if np.isfinite(d):
                            t_ = np.exp(d)
                            Sd += t_
                            ed += t_ * (2 * _EXP_ARG * abs(d) + 2 * _DIV32 * (abs(q) + abs(qm)))
                dsum[j * SW + b] = Sd
                b_dsum[j * SW + b] = _SUM_BLOCK * Sd + ed + 0.5 * _ulp32(Sd)


def compute_local_logits_stats(*, target_local_argmax, target_local_max, target_local_sumexp, draft_local_max,
                               draft_local_sumexp, target_logits, draft_logits, expanded_idx_mapping,
                               expanded_local_pos, temperature, num_logits=None, vocab_size=None,
                               BLOCK_SIZE: int = 8192) -> Settlement:  # fmt: skip
    """§30, in loops."""
    tl_ = np.asarray(target_logits)
    n, V = _n(num_logits, tl_.shape[0]), _n(vocab_size, tl_.shape[1])
    nb = -(-V // BLOCK_SIZE)
    outs = [np.asarray(x) for x in (target_local_argmax, target_local_max, target_local_sumexp, draft_local_max,
                                    draft_local_sumexp)]  # fmt: skip
    names = ("target_local_max", "target_local_sumexp", "draft_local_max", "draft_local_sumexp")
    st = Settlement(bounds={k: np.zeros(o.shape) for k, o in zip(names, outs[1:], strict=True)})
    if n <= 0 or nb <= 0:
        return st
    SW = outs[1].shape[1]
    if min(V, nb * BLOCK_SIZE) > tl_.shape[1] or any(o.shape[0] < n or o.shape[1] < nb for o in outs):
        raise IndexError("compute_local_logits_stats: the grid reaches past a buffer")
    eidx = np.asarray(expanded_idx_mapping)[:n].astype(np.int64)
    elp = np.asarray(expanded_local_pos)[:n].astype(np.int64)
    _check(eidx, len(temperature), "temperature read")
    has_draft = draft_logits is not None
    dl = np.asarray(draft_logits) if has_draft else np.zeros((1, 1, 1), np.float32)
    if has_draft:
        read = np.zeros(n, np.bool_)  # the rows past which a request goes on (not bonus rows)
        read[:-1] = elp[1:] != 0
        _check(eidx[read], dl.shape[0], "draft_logits row")
        _check(elp[read], dl.shape[1], "draft_logits step")
    work = [np.array(o, dtype=np.float64 if o.dtype.kind == "f" else np.int64).reshape(-1) for o in outs]
    _stats(np.ascontiguousarray(tl_).reshape(-1), tl_.shape[1], n, V, nb, BLOCK_SIZE, eidx, elp,
           np.asarray(temperature, np.float32), has_draft, np.ascontiguousarray(dl).reshape(-1),
           dl.shape[1] * dl.shape[2], dl.shape[2], *work, SW,
           st.bounds["target_local_sumexp"].reshape(-1), st.bounds["draft_local_max"].reshape(-1),
           st.bounds["draft_local_sumexp"].reshape(-1))  # fmt: skip
    for o, w in zip(outs, work, strict=True):
        o.reshape(-1)[:] = w.astype(o.dtype)
    return st


# --------------------------------------------------------------------------------------------
# log-probabilities from statistics (§31-§33)
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _logprob_pair(row, tok, valid, s, step, tt, tl, W, has_draft, dl, D0, D1, tmax, tsum, dmax, dsum, SW, P):
    """(tlp, its bound, dlp, its bound, target lse, draft lse, their bounds) at ``row``."""
    t_lse, t_e = _lse_row(tmax, tsum, row * SW, P)
    tlog = np.float64(np.float32(tl[row * W + tok])) if valid else -np.inf
    tlp = tlog - t_lse
    etl = t_e + _EPS32 * abs(tlp) if np.isfinite(tlp) else 0.0
    if not has_draft:
        return tlp, etl, 0.0, 0.0, t_lse, t_e, 0.0, 0.0
    d_lse, d_e = _lse_row(dmax, dsum, row * SW, P)
    q = np.float64(np.float32(dl[s * D0 + step * D1 + tok])) / np.float64(tt) if valid else -np.inf
    dlp = q - d_lse
    edl = d_e + _DIV32 * abs(q) + _EPS32 * abs(dlp) if np.isfinite(dlp) else 0.0
    return tlp, etl, dlp, edl, t_lse, t_e, d_lse, d_e


class _Tables:
    """Flat views and strides of the tables §31-§34 read."""

    def __init__(self, target_logits, draft_logits, tmax, tsum, dmax, dsum) -> None:
        tl_ = np.asarray(target_logits)
        self.tl, self.W = np.ascontiguousarray(tl_, dtype=np.float32).reshape(-1), tl_.shape[1]
        self.has_draft = draft_logits is not None
        dl = np.asarray(draft_logits) if self.has_draft else np.zeros((1, 1, 1), np.float32)
        self.dl, self.D0, self.D1 = np.ascontiguousarray(dl, dtype=np.float32).reshape(-1), dl.shape[1] * dl.shape[2], dl.shape[2]
        tm = np.asarray(tmax)
        self.SW = tm.shape[1]
        self.tmax = np.ascontiguousarray(tm, dtype=np.float32).reshape(-1)
        self.tsum = np.ascontiguousarray(tsum, dtype=np.float32).reshape(-1)
        self.dmax = np.ascontiguousarray(dmax if dmax is not None else tm, dtype=np.float32).reshape(-1)
        self.dsum = np.ascontiguousarray(dsum if dsum is not None else tsum, dtype=np.float32).reshape(-1)


# --------------------------------------------------------------------------------------------
# §31 cumulative log p
# --------------------------------------------------------------------------------------------


@entry("bound", "out")
def _cumulative(out, bound, tl, W, has_draft, dl, D0, D1, tmax, tsum, dmax, dsum, SW, P, ds, cu, idx, temp, B):
    for r in range(B):
        s = idx[r]
        tt = np.float32(temp[s])
        if tt == 0:
            continue
        start = cu[r]
        nd = cu[r + 1] - start - 1
        log_p = 0.0
        err = 0.0
        for i in range(nd):
            row = start + i
            tok = ds[row + 1]
            if tok >= 0:
                tlp, etl, dlp, edl, _a, _b, _c, _d = _logprob_pair(row, tok, True, s, i, tt, tl, W, has_draft, dl, D0,
                                                                   D1, tmax, tsum, dmax, dsum, SW, P)  # fmt: skip
                new = log_p + (tlp - dlp)
                if new > 0.0:
                    new = 0.0
                err = err + etl + edl + _EPS32 * (abs(tlp - dlp) + abs(new))
                log_p = new
            out[row] = log_p
            bound[row] = err + 0.5 * _ulp32(log_p)


def _request_checks(num_reqs, cu_num_logits, idx_mapping, temperature):
    cu = np.asarray(cu_num_logits).astype(np.int64)
    B = _n(num_reqs, len(cu) - 1)
    idx = np.asarray(idx_mapping)[:B].astype(np.int64)
    _check(idx, len(temperature), "temperature read")
    return B, cu, idx


def compute_cumulative_log_p(*, cumulative_log_p, target_logits, target_local_max, target_local_sumexp,
                             draft_sampled, draft_logits, draft_local_max, draft_local_sumexp, cu_num_logits,
                             idx_mapping, temperature, vocab_num_blocks, num_reqs=None,
                             PADDED_VOCAB_NUM_BLOCKS=None) -> Settlement:  # fmt: skip
    """§31, in loops."""
    out = np.asarray(cumulative_log_p)
    st = Settlement(bounds={"cumulative_log_p": np.zeros(out.shape)})
    B, cu, idx = _request_checks(num_reqs, cu_num_logits, idx_mapping, temperature)
    P = min(int(vocab_num_blocks), _n(PADDED_VOCAB_NUM_BLOCKS, vocab_num_blocks))
    tb = _Tables(target_logits, draft_logits, target_local_max, target_local_sumexp,
                 draft_local_max if draft_logits is not None else None, draft_local_sumexp)  # fmt: skip
    work = out.astype(np.float64)
    _cumulative(work, st.bounds["cumulative_log_p"], tb.tl, tb.W, tb.has_draft, tb.dl, tb.D0, tb.D1, tb.tmax, tb.tsum,
                tb.dmax, tb.dsum, tb.SW, P, np.asarray(draft_sampled, np.int64), cu, idx,
                np.asarray(temperature, np.float32), B)  # fmt: skip
    written = st.bounds["cumulative_log_p"] != 0
    out[written] = work[written].astype(out.dtype)
    return st


# --------------------------------------------------------------------------------------------
# §32 residual mass
# --------------------------------------------------------------------------------------------


@entry("bound", "out")
def _residual(out, bound, OW, clp, tl, W, dl, D0, D1, tmax, tsum, dmax, dsum, SW, P, ds, eidx, elp, temp, n, V, nb,
              BS):  # fmt: skip
    for j in range(n):
        if elp[j] == 0 or j + 1 >= n or elp[j + 1] == 0:
            continue
        if ds[j + 1] < 0:
            continue
        s = eidx[j]
        tt = np.float32(temp[s])
        if tt == 0:
            continue
        t_lse, t_e = _lse_row(tmax, tsum, j * SW, P)
        d_lse, d_e = _lse_row(dmax, dsum, j * SW, P)
        c = np.float64(np.float32(clp[j - 1]))
        p = np.exp(c)
        ep = _EXP_REL + _EXP_ARG * abs(c)
        for b in range(nb):
            total = 0.0
            err = 0.0
            for v in range(b * BS, min(V, b * BS + BS)):
                tlp = np.float64(np.float32(tl[j * W + v])) - t_lse
                q = np.float64(np.float32(dl[s * D0 + elp[j] * D1 + v])) / np.float64(tt)
                dlp = q - d_lse
                a = p * np.exp(tlp) if np.isfinite(tlp) else 0.0
                bb = np.exp(dlp) if np.isfinite(dlp) else 0.0
                if a - bb > 0:
                    total += a - bb
                if a > 0:
                    err += a * (ep + _EXP_REL + _EXP_ARG * abs(tlp) + t_e + _EPS32 * abs(tlp) + _EPS32)
                if bb > 0:
                    err += bb * (_EXP_REL + _EXP_ARG * abs(dlp) + d_e + _DIV32 * abs(q) + _EPS32 * abs(dlp))
                if a > 0 or bb > 0:
                    err += _EPS32 * abs(a - bb)
            out[j * OW + b] = total
            bound[j * OW + b] = err + _SUM_BLOCK * total + 0.5 * _ulp32(total)


def compute_local_residual_mass(*, local_residual_mass, cumulative_log_p, target_logits, target_local_max,
                                target_local_sumexp, draft_logits, draft_local_max, draft_local_sumexp,
                                draft_sampled, expanded_idx_mapping, expanded_local_pos, temperature,
                                vocab_num_blocks, num_logits=None, vocab_size=None, BLOCK_SIZE: int = 8192,
                                PADDED_VOCAB_NUM_BLOCKS=None) -> Settlement:  # fmt: skip
    """§32, in loops."""
    out = np.asarray(local_residual_mass)
    st = Settlement(bounds={"local_residual_mass": np.zeros(out.shape)})
    tl_ = np.asarray(target_logits)
    n, V = _n(num_logits, tl_.shape[0]), _n(vocab_size, tl_.shape[1])
    nb = -(-V // BLOCK_SIZE)
    if n <= 0 or nb <= 0:
        return st
    if out.shape[0] < n or out.shape[1] < nb:
        raise IndexError("local_residual_mass: smaller than the grid")
    P = min(int(vocab_num_blocks), _n(PADDED_VOCAB_NUM_BLOCKS, vocab_num_blocks))
    tb = _Tables(target_logits, draft_logits, target_local_max, target_local_sumexp, draft_local_max, draft_local_sumexp)
    work = out.astype(np.float64).reshape(-1)
    bound = st.bounds["local_residual_mass"]
    _residual(work, bound.reshape(-1), out.shape[1], np.asarray(cumulative_log_p, np.float32), tb.tl, tb.W, tb.dl,
              tb.D0, tb.D1, tb.tmax, tb.tsum, tb.dmax, tb.dsum, tb.SW, P, np.asarray(draft_sampled, np.int64),
              np.asarray(expanded_idx_mapping, np.int64), np.asarray(expanded_local_pos, np.int64),
              np.asarray(temperature, np.float32), n, V, nb, BLOCK_SIZE)  # fmt: skip
    written = bound != 0
    out[written] = work.reshape(out.shape)[written].astype(out.dtype)
    return st


# --------------------------------------------------------------------------------------------
# §33 rejection
# --------------------------------------------------------------------------------------------


@entry("d_out", "db_out", "num_sampled", "sampled", "t_out", "tb_out", "win_bound", "win_chosen", "win_margin", "win_req", "win_step")
def _rejection(sampled, SS, num_sampled, t_out, d_out, tb_out, db_out, tl, W, targ, has_draft, dl, D0, D1, tmax, tsum,
               dmax, dsum, SW, P, ds, cu, idx, temp, seeds, pos, syn, rates, block, clp, rm, RMW, fly, fe, thr, B,
               forced, win_req, win_step, win_margin, win_bound, win_chosen):  # fmt: skip
    nwin = 0
    for r in range(B):
        s = idx[r]
        start = cu[r]
        nd = cu[r + 1] - start - 1
        seed = seeds[s]
        tt = np.float32(temp[s])
        greedy = tt == 0
        acc = 0
        pending = -1
        rej_arg = 0
        t_lse = 0.0
        d_lse = 0.0
        t_e = 0.0
        d_e = 0.0
        verifying = True
        for i in range(nd):
            row = start + i
            d_raw = ds[row + 1]
            valid = d_raw >= 0
            dtok = d_raw if valid else 0
            if not greedy and fly == 0:
                verifying = verifying and valid
            if not verifying:
                continue
            target_argmax = 0
            can_defer = False
            accepted = False
            sd = _step_seed(seed, i) if block else _bits(seed)
            u = _rand_open(sd, _bits(pos[row]))
            if greedy:
                bmax = -np.inf
                bi = 0
                for b in range(P):
                    m = tmax[row * SW + b]
                    if np.isnan(m):
                        m = -np.inf
                    if m > bmax:
                        bmax = m
                        bi = b
                target_argmax = targ[row * SW + bi]
                if syn:
                    accepted = u < np.float32(rates[i])
                else:
                    accepted = target_argmax == dtok
                accepted = accepted and valid
                if fly > 0:
                    can_defer = valid and np.float32(tl[row * W + dtok]) > -np.inf
            elif block:
                c = np.float64(np.float32(clp[row]))
                pr = np.exp(c)
                epr = pr * (_EXP_REL + _EXP_ARG * abs(c)) if pr > 0 else 0.0  # exp(-inf) = 0 exactly
                nxt = ds[row + 2] if i < nd - 1 else -1
                h = pr
                eh = epr
                if nxt >= 0:
                    if has_draft:
                        R = 0.0
                        absR = 0.0
                        for b in range(P):
                            x = np.float64(np.float32(rm[(row + 1) * RMW + b]))
                            R += x
                            absR += abs(x)
                        eR = _SUM_SMALL * absR
                    else:
                        l_lse, l_e = _lse_row(tmax, tsum, (row + 1) * SW, P)
                        xl = np.float64(np.float32(tl[(row + 1) * W + nxt])) - l_lse
                        mb = np.exp(xl)
                        emb = mb * (_EXP_REL + _EXP_ARG * abs(xl) + l_e + _EPS32 * abs(xl)) if mb > 0 else 0.0
                        R = pr * (1.0 - mb)
                        eR = epr * abs(1.0 - mb) + pr * emb + _EPS32 * (abs(R) + pr)
                    den = R + 1.0 - pr
                    eden = eR + epr + _EPS32 * (abs(R + 1.0) + abs(den))
                    h = R / den if den > 0 else 1.0
                    if abs(den) > eden:
                        eh = _DIV32 * abs(h) + (eR + abs(h) * eden) / (abs(den) - eden)
                    else:
                        eh = np.inf
                uu = np.float64(u)
                ok = uu <= h
                if not (abs(h - uu) > eh):
                    f = forced[r * 64 + i] if i < 64 else -1
                    if f >= 0:
                        ok = f == 1
                    win_req[nwin] = r
                    win_step[nwin] = i
                    win_margin[nwin] = h - uu
                    win_bound[nwin] = eh
                    win_chosen[nwin] = ok
                    nwin += 1
                if ok:
                    acc = i + 1
                sampled[r * SS + i] = dtok
            else:
                tlp, etl, dlp, edl, st_l, st_e, sd_l, sd_e = _logprob_pair(row, dtok, valid, s, i, tt, tl, W, has_draft,
                                                                          dl, D0, D1, tmax, tsum, dmax, dsum, SW, P)  # fmt: skip
                if fly == 0 or pending < 0:
                    t_lse = st_l
                    t_e = st_e
                    d_lse = sd_l if has_draft else 0.0
                    d_e = sd_e if has_draft else 0.0
                if syn:
                    accepted = u < np.float32(rates[i])
                else:
                    lu = np.log(np.float64(u))
                    rhs = lu + dlp
                    accepted = tlp > rhs
                    margin = tlp - rhs
                    em = etl + edl + _LOG_REL * abs(lu) + _EPS32 * abs(rhs)
                    if np.isfinite(margin) and abs(margin) <= em:
                        f = forced[r * 64 + i] if i < 64 else -1
                        if f >= 0:
                            accepted = f == 1
                        win_req[nwin] = r
                        win_step[nwin] = i
                        win_margin[nwin] = margin
                        win_bound[nwin] = em
                        win_chosen[nwin] = accepted
                        nwin += 1
                if fly > 0:
                    accepted = accepted and valid
                    can_defer = valid and tlp > -np.inf and dlp > -np.inf
            if (not block) or greedy:
                if fly > 0:
                    if pending >= 0:
                        verifying = accepted
                        if accepted and i - pending == fly:
                            acc = i + 1
                            pending = -1
                    elif accepted:
                        acc = i + 1
                    else:
                        rej_arg = target_argmax
                        verifying = can_defer and i + fly < nd and np.float32(fe[row]) >= thr
                        if verifying:
                            pending = i
                    sampled[r * SS + i] = dtok
                else:
                    verifying = accepted
                    if accepted:
                        acc += 1
                    sampled[r * SS + i] = target_argmax if (greedy and not accepted) else dtok
        if fly > 0 and greedy and acc < nd:
            sampled[r * SS + acc] = rej_arg
        num_sampled[r] = acc
        if block and not greedy and acc < nd:
            t_lse, t_e = _lse_row(tmax, tsum, (start + acc) * SW, P)
            if has_draft:
                d_lse, d_e = _lse_row(dmax, dsum, (start + acc) * SW, P)
        t_out[r] = t_lse
        d_out[r] = d_lse
        tb_out[r] = t_e + 0.5 * _ulp32(t_lse)
        db_out[r] = d_e + 0.5 * _ulp32(d_lse)
    return nwin


def rejection(*, sampled, num_sampled, target_rejected_logsumexp, draft_rejected_logsumexp, target_logits,
              target_local_argmax, target_local_max, target_local_sumexp, draft_sampled, draft_logits,
              draft_local_max, draft_local_sumexp, cu_num_logits, idx_mapping, temperature, seed, pos,
              vocab_num_blocks, synthetic_conditional_rates=None, cumulative_log_p=None, local_residual_mass=None,
              fly_entropy=None, fly_entropy_threshold: float = 0.3, use_block_verification: bool = False,
              fly_window_size: int = 0, num_reqs=None, PADDED_VOCAB_NUM_BLOCKS=None,
              choices=None) -> Settlement:  # fmt: skip
    """§33, in loops."""
    B, cu, idx = _request_checks(num_reqs, cu_num_logits, idx_mapping, temperature)
    out = np.asarray(sampled)
    st = Settlement(bounds={"target_rejected_logsumexp": np.zeros(np.shape(target_rejected_logsumexp)),
                            "draft_rejected_logsumexp": np.zeros(np.shape(draft_rejected_logsumexp))})
    if B <= 0:
        return st
    P = min(int(vocab_num_blocks), _n(PADDED_VOCAB_NUM_BLOCKS, vocab_num_blocks))
    has_draft = draft_logits is not None
    tb = _Tables(target_logits, draft_logits, target_local_max, target_local_sumexp,
                 draft_local_max if has_draft else None, draft_local_sumexp)  # fmt: skip
    forced = np.full(B * 64, -1, np.int64)
    for key, val in (choices or {}).items():
        if key[0] == "req" and key[3] < 64:
            forced[key[1] * 64 + key[3]] = int(bool(val))
    n_dec = int(max(1, (cu[1:B + 1] - cu[:B]).sum()))
    win = [np.zeros(n_dec, np.int64), np.zeros(n_dec, np.int64), np.zeros(n_dec), np.zeros(n_dec),
           np.zeros(n_dec, np.bool_)]  # fmt: skip
    work = out.astype(np.int64).reshape(-1)
    ns = np.zeros(B, np.int64)
    t_o, d_o, tb_o, db_o = np.zeros(B), np.zeros(B), np.zeros(B), np.zeros(B)
    empty = np.zeros(1, np.float32)
    nwin = _rejection(work, out.shape[1], ns, t_o, d_o, tb_o, db_o, tb.tl, tb.W,
                      np.ascontiguousarray(target_local_argmax, dtype=np.int64).reshape(-1), has_draft, tb.dl, tb.D0,
                      tb.D1, tb.tmax, tb.tsum, tb.dmax, tb.dsum, tb.SW, P, np.asarray(draft_sampled, np.int64), cu, idx,
                      np.asarray(temperature, np.float32), np.asarray(seed, np.int64), np.asarray(pos, np.int64),
                      synthetic_conditional_rates is not None,
                      empty if synthetic_conditional_rates is None else np.asarray(synthetic_conditional_rates, np.float32),
                      bool(use_block_verification), empty if cumulative_log_p is None else np.asarray(cumulative_log_p, np.float32),
                      empty if local_residual_mass is None else np.ascontiguousarray(local_residual_mass, np.float32).reshape(-1),
                      1 if local_residual_mass is None else np.shape(local_residual_mass)[1], int(fly_window_size),
                      empty if fly_entropy is None else np.asarray(fly_entropy, np.float32), np.float32(fly_entropy_threshold),
                      B, forced, *win)  # fmt: skip
    out.reshape(-1)[:] = work.astype(out.dtype)
    np.asarray(num_sampled)[:B] = ns.astype(np.asarray(num_sampled).dtype)
    np.asarray(target_rejected_logsumexp)[:B] = t_o.astype(np.float32)
    np.asarray(draft_rejected_logsumexp)[:B] = d_o.astype(np.float32)
    st.bounds["target_rejected_logsumexp"][:B] = tb_o
    st.bounds["draft_rejected_logsumexp"][:B] = db_o
    for k in range(nwin):
        st.windows.append(Window("accept", ("req", int(win[0][k]), "step", int(win[1][k])), (False, True),
                                 bool(win[4][k]), float(win[2][k]), float(win[3][k])))  # fmt: skip
    return st


# --------------------------------------------------------------------------------------------
# §34 resample
# --------------------------------------------------------------------------------------------


@entry("bound", "cand", "la", "lm", "todo", "windows")
def _resample(la, lm, OW, bound, tl, W, has_draft, dl, D0, D1, tlse, dlse, ri, cu, eidx, ds, temp, seeds, pos, clp,
              block, fp64, B, V, nb, BS, forced, windows, cand, todo):  # fmt: skip
    g = np.empty(BS)
    lo = np.empty(BS)
    hi = np.empty(BS)
    ex = np.empty(BS, dtype=np.bool_)
    c = np.empty(BS, dtype=np.bool_)
    eps = 2.0**-53 if fp64 else _EPS32
    for r in range(B):
        k_ = ri[r]
        row = cu[r] + k_
        s = eidx[row]
        tt = np.float32(temp[s])
        bonus = row == cu[r + 1] - 1
        if tt == 0 and not bonus:
            continue
        todo[r] = True
        rd = 0 if bonus else ds[row + 1]
        plain = bonus or rd < 0
        sb = _bits(seeds[s])
        pb = _bits(pos[row])
        for b in range(nb):
            for k in range(BS):
                v = b * BS + k
                if v >= V:
                    g[k] = -np.inf
                    lo[k] = -np.inf
                    hi[k] = -np.inf
                    ex[k] = True
                    continue
                t = np.float64(np.float32(tl[row * W + v]))
                x = t
                xlo = t
                xhi = t
                if not plain:
                    if has_draft:
                        tlp = t - np.float64(np.float32(tlse[r]))
                        et = _EPS32 * (abs(tlp) + abs(t))
                        if block and k_ > 0:
                            tlp = tlp + np.float64(np.float32(clp[row - 1]))
                            et = et + _EPS32 * abs(tlp)
                        q = np.float64(np.float32(dl[s * D0 + k_ * D1 + v])) / np.float64(tt)
                        dlp = q - np.float64(np.float32(dlse[r]))
                        dd = dlp - tlp
                        edd = et + _DIV32 * abs(q) + _EPS32 * (abs(dlp) + abs(dd))
                        ratio = np.exp(dd)
                        er = _EXP_REL + _EXP_ARG * abs(dd) + edd
                        x = tlp + np.log1p(-ratio) if ratio < 1.0 else -np.inf
                        if tlp == -np.inf or np.isnan(dd):
                            x, xlo, xhi = -np.inf, -np.inf, -np.inf
                        elif dlp == -np.inf:  # ratio 0: z = lp_t exactly
                            x = tlp
                            xlo = tlp - et - _EPS32 * abs(tlp)
                            xhi = tlp + et + _EPS32 * abs(tlp)
                        elif abs(1.0 - ratio) <= ratio * er:
                            xlo = -np.inf
                            xhi = tlp + et + np.log1p(-min(ratio * (1.0 - er), 1.0))
                            if np.isnan(xhi):
                                xhi = np.inf
                        elif np.isfinite(x):
                            gap = 1.0 - ratio * (1.0 + er)
                            e = et + ratio * er / gap + _LOG_REL * abs(np.log1p(-ratio)) + _EPS32 * abs(x)
                            if not gap > 0:
                                e = np.inf
                            xlo = x - e
                            xhi = x + e
                        else:
                            xlo = -np.inf
                            xhi = -np.inf
                    elif v == rd:
                        x, xlo, xhi = -np.inf, -np.inf, -np.inf
                if tt != 0:
                    if fp64:
                        n, ne = _noise(_uniform64(sb, pb, np.uint64(v)), True)
                    else:
                        n, ne = _noise(_uniform32(sb, pb, np.uint64(v)), False)
                    val = x + n
                    e_n = ne + eps * abs(val)
                    g[k] = val
                    lo[k] = xlo + n - e_n
                    hi[k] = xhi + n + e_n
                    ex[k] = False
                    if not np.isfinite(val) and xhi == -np.inf:
                        lo[k] = -np.inf
                        hi[k] = -np.inf
                        ex[k] = True
                else:
                    g[k] = x
                    lo[k] = xlo
                    hi[k] = xhi
                    ex[k] = xlo == xhi
            f = forced[r * nb + b]
            if f >= 0:
                f -= b * BS
            best, w = _argmax_lanes(g, lo, hi, ex, BS, f, c)
            windows[r * nb + b] = w
            if w:
                for k in range(BS):
                    cand[(r * nb + b) * BS + k] = c[k]
            la[r * OW + b] = b * BS + best
            val = g[best]
            lm[r * OW + b] = val
            e = max(hi[best] - val, val - lo[best]) if np.isfinite(val) else 0.0
            if np.isnan(e):
                e = np.inf
            if e > 0:
                e += 0.5 * (_ulp64(val) if fp64 else _ulp32(val))
            bound[r * OW + b] = e


def resample(*, resampled_local_argmax, resampled_local_max, target_logits, target_rejected_logsumexp, draft_logits,
             draft_rejected_logsumexp, rejected_step, cu_num_logits, expanded_idx_mapping, draft_sampled, temperature,
             seed, pos, cumulative_log_p=None, use_fp64: bool = False, use_block_verification: bool = False,
             num_reqs=None, vocab_size=None, BLOCK_SIZE: int = 1024, choices=None) -> Settlement:  # fmt: skip
    """§34, in loops."""
    la, lm = np.asarray(resampled_local_argmax), np.asarray(resampled_local_max)
    st = Settlement(bounds={"resampled_local_max": np.zeros(lm.shape)})
    cu = np.asarray(cu_num_logits).astype(np.int64)
    B = _n(num_reqs, len(cu) - 1)
    tb = _Tables(target_logits, draft_logits, np.zeros((1, 1)), np.zeros((1, 1)), None, None)
    V = _n(vocab_size, tb.W)
    nb = -(-V // BLOCK_SIZE)
    if B <= 0 or nb <= 0:
        return st
    ri = np.asarray(rejected_step)[:B].astype(np.int64)
    eidx = np.asarray(expanded_idx_mapping, np.int64)
    _check(cu[:B] + ri, len(eidx), "expanded_idx_mapping read")
    _check(eidx[cu[:B] + ri], len(temperature), "temperature read")
    if min(V, nb * BLOCK_SIZE) > tb.W or la.shape[0] < B or la.shape[1] < nb:
        raise IndexError("resample: the grid reaches past a buffer")
    keys = [("req", r, "block", b) for r in range(B) for b in range(nb)]
    forced = _forced(choices, keys, B * nb)
    windows = np.zeros(B * nb, np.bool_)
    cand = np.zeros(B * nb * BLOCK_SIZE, np.bool_)
    todo = np.zeros(B, np.bool_)
    la_w = np.zeros(la.shape, np.int64)
    lm_w = np.zeros(lm.shape)
    bound = st.bounds["resampled_local_max"]
    empty = np.zeros(1, np.float32)
    _resample(la_w.reshape(-1), lm_w.reshape(-1), la.shape[1], bound.reshape(-1), tb.tl, tb.W, tb.has_draft, tb.dl,
              tb.D0, tb.D1, np.asarray(target_rejected_logsumexp, np.float32),
              np.asarray(draft_rejected_logsumexp, np.float32), ri, cu, eidx, np.asarray(draft_sampled, np.int64),
              np.asarray(temperature, np.float32), np.asarray(seed, np.int64), np.asarray(pos, np.int64),
              empty if cumulative_log_p is None else np.asarray(cumulative_log_p, np.float32),
              bool(use_block_verification), bool(use_fp64), B, V, nb, BLOCK_SIZE, forced, windows, cand, todo)  # fmt: skip
    r = np.flatnonzero(todo)
    la[r, :nb] = la_w[r, :nb]
    lm[r, :nb] = lm_w[r, :nb].astype(lm.dtype)
    base = np.tile(np.arange(nb, dtype=np.int64) * BLOCK_SIZE, B)
    _finish_windows(st, windows, cand, keys, BLOCK_SIZE, base, forced, la_w[:B, :nb].reshape(-1))
    return st


# --------------------------------------------------------------------------------------------
# §35 insert
# --------------------------------------------------------------------------------------------


@entry("ns", "sampled")
def _insert(sampled, SS, ns, la, lm, RW, cu, eidx, temp, P, B):
    for r in range(B):
        k = ns[r]
        row = cu[r] + k
        s = eidx[row]
        ns[r] = np.int32(k + 1)
        if np.float32(temp[s]) == 0 and row != cu[r + 1] - 1:
            continue
        best = 0
        bv = -np.inf
        for b in range(P):
            v = lm[r * RW + b]
            if np.isnan(v):
                v = -np.inf
            if v > bv:
                bv = v
                best = b
        sampled[r * SS + k] = la[r * RW + best]


def insert_resampled(*, sampled, num_sampled, resampled_local_argmax, resampled_local_max, cu_num_logits,
                     expanded_idx_mapping, temperature, resample_num_blocks, num_reqs=None,
                     PADDED_RESAMPLE_NUM_BLOCKS=None) -> Settlement:  # fmt: skip
    """§35, in loops."""
    cu = np.asarray(cu_num_logits).astype(np.int64)
    B = _n(num_reqs, len(cu) - 1)
    if B <= 0:
        return Settlement()
    out = np.asarray(sampled)
    nsb = np.asarray(num_sampled)
    ns = nsb[:B].astype(np.int64)
    eidx = np.asarray(expanded_idx_mapping, np.int64)
    _check(cu[:B] + ns, len(eidx), "expanded_idx_mapping read")
    _check(eidx[cu[:B] + ns], len(temperature), "temperature read")
    P = min(int(resample_num_blocks), _n(PADDED_RESAMPLE_NUM_BLOCKS, resample_num_blocks))
    work = out.astype(np.int64).reshape(-1)
    la = np.ascontiguousarray(resampled_local_argmax, np.int64)
    _insert(work, out.shape[1], ns, la.reshape(-1), np.ascontiguousarray(resampled_local_max, np.float64).reshape(-1),
            la.shape[1], cu, eidx, np.asarray(temperature, np.float32), P, B)  # fmt: skip
    out.reshape(-1)[:] = work.astype(out.dtype)
    nsb[:B] = ns.astype(np.int32).astype(nsb.dtype)
    return Settlement()
