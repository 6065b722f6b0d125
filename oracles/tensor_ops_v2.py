"""Torch oracles of Model Runner V2's verification (docs/CONTRACT.md §28-§35), written from the
contract, to run on the GPU beside the kernel where a case is too large for the host: the
production-scale cases of the device campaign's scale lane (a table past ``2**31`` elements,
8 GiB and more), checked a block of rows at a time so that no whole table is copied.

Each oracle takes a block of rows as the contract reads them and returns, for that block, the
expected values and each element's bound (float64; ``0`` where the contract fixes the element
bit for bit): the caller compares ``abs(actual - expected) <= bound`` on the device, exactly
where the bound is 0.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

__all__ = ["block_lse", "cumulative_log_p", "greedy_argmax", "gumbel_mismatches", "gumbel_sample_rows",
           "gumbel_sample_winners", "lane_noise", "lane_uniform", "local_draft_stats_rows", "local_logits_stats_rows", "local_residual_mass_rows", "murmur3_hash32",
           "resample_rows", "temperature_rows", "tl_rand32", "uniform_noise"]


def temperature_rows(logits: torch.Tensor, temperature: torch.Tensor, vocab_size: int | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """§28.1 for a block of rows: ``logits`` float32 ``[rows, W]`` as given (before the kernel),
    ``temperature`` float32 ``[rows]`` (each row's ``T_s``, gathered through
    ``expanded_idx_mapping``). A row of ``T = 0`` or ``T = 1`` is untouched; another row's
    columns ``v < V`` become ``float32(logits[t, v]) / T``, the correctly rounded float32
    quotient, within 2 ulp of it (a compiled division, §28.1); columns at and past ``V`` stay.
    Returns the expected rows and each element's bound (float64)."""
    W = logits.shape[1]
    V = W if vocab_size is None else min(int(vocab_size), W)
    t = temperature.to(torch.float32)[:, None]
    divided = (t != 0) & (t != 1)  # per row; columns at and past V are not
    q = logits.to(torch.float32) / torch.where(divided, t, 1.0)  # IEEE: correctly rounded
    expected = torch.where(divided, q, logits)
    expected[:, V:] = logits[:, V:]
    up = torch.nextafter(q, torch.full((), float("inf"), dtype=q.dtype, device=q.device))
    ulp = up.sub_(q).abs_().to(torch.float64)  # one float32 step at the quotient
    bound = torch.where((ulp < float("inf")) & divided, 2 * ulp, 0.0)
    bound[:, V:] = 0.0
    return expected, bound


SUM_BLOCK = 2.0**-15
"""A ``tl.sum`` of one block's non-negative terms: relative error (docs/CONTRACT.md, "Exactness")."""
EXP_ARG = 2.0**-22
"""``exp(x)``: the part of its relative error that grows with ``abs(x)``."""
DIV = 2.0**-22
"""A float32 division compiled (``div.full.f32``): relative error."""


def _ulp32(x: torch.Tensor) -> torch.Tensor:
    """One float32 step at ``abs(x)`` (float64; 0 where ``x`` is not finite)."""
    a = x.abs().to(torch.float32)
    up = torch.nextafter(a, torch.full_like(a, float("inf")))
    step = (up.to(torch.float64) - a.to(torch.float64))
    return torch.where(torch.isfinite(step) & torch.isfinite(a), step, torch.zeros_like(step))


def _sumexp(x: torch.Tensor, owned: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Over the last axis of float64 ``x``: ``m = max x``, ``S = sum exp(x - m)`` (0 where ``m``
    is ``-inf``), the spread ``sum exp(x - m) * abs(x - m)``, and ``exp(x - m)`` itself (NaN
    where ``x - m`` is: the terms of ``S`` are 0 there). ``owned``: ``x`` may be overwritten."""
    inf = float("inf")
    m = x.amax(-1)
    d = x.sub_(m[..., None]) if owned else x - m[..., None]
    ed = d.exp()  # d <= 0 or NaN (a max of -inf, or a NaN in the row): exp(-inf) is 0 already
    e = ed.nan_to_num(nan=0.0, posinf=inf, neginf=-inf)
    S = torch.where(m > float("-inf"), e.sum(-1), 0.0)
    spread = d.abs_().mul_(e).nan_to_num_(nan=0.0, posinf=inf, neginf=-inf).sum(-1)  # 0 |d| is NaN at d = -inf
    return m, S, spread, ed


def local_logits_stats_rows(target: torch.Tensor, greedy: torch.Tensor, bonus: torch.Tensor, draft: torch.Tensor | None,
                            temperature: torch.Tensor, vocab_size: int, block: int = 8192,
                            ) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:  # fmt: skip
    """§30.1 for a block of logits rows: ``target`` float32 ``[rows, Wt]`` (the rows as given),
    ``greedy`` and ``bonus`` bool ``[rows]`` (``T_s = 0``; the request's last row), ``draft``
    float32 ``[rows, Wd]`` (row ``j``'s ``draft_logits[s, i]``; ``None``: one-hot drafts),
    ``temperature`` float32 ``[rows]`` (``T_s``), ``V = vocab_size``, blocks of ``block`` lanes
    (lanes past ``V`` are ``-inf``).

    Per output, ``(written, expected, bound)`` of shape ``[rows, NB]``: a bonus row writes
    nothing; a greedy row its block argmax (``8192 b +`` the first lane of the maximum) and
    maximum (exact); a random row its maximum (exact) and ``sum exp(x - m)`` (bound ``2**-15 S +
    2**-21 sum e |x - m|`` plus half a float32 step of the rounding), and with draft logits the
    maximum of the float32 quotients ``q = draft / T`` (2 ulp: a compiled division) and ``sum
    exp(q - max q)`` (the target's bound plus ``2**-21 sum e (|q| + |max q|)``)."""
    rows, V = target.shape[0], int(vocab_size)
    nb = -(-V // block)
    dev = target.device
    if nb == 1:  # one block: its lanes past V (-inf) change no statistic, so none are made
        block = max(V, 1)
    if nb * block == V:
        x = target[:, :V].to(torch.float32)
    else:
        x = torch.full((rows, nb * block), float("-inf"), dtype=torch.float32, device=dev)
        x[:, :V] = target[:, :V].to(torch.float32)
    xb = x.view(rows, nb, block)
    m32 = xb.amax(-1)
    arg = xb.argmax(-1) + torch.arange(nb, device=dev) * block  # the first of the maxima
    _, S, spread, _ = _sumexp(xb.to(torch.float64), owned=True)
    S32 = S.to(torch.float32)
    g = (greedy & ~bonus)[:, None].expand(rows, nb)
    r = (~greedy & ~bonus)[:, None].expand(rows, nb)
    zero = torch.zeros((rows, nb), dtype=torch.float64, device=dev)
    out = {
        "target_local_argmax": (g, arg, zero),
        "target_local_max": (g | r, m32, zero),
        "target_local_sumexp": (r, S32, SUM_BLOCK * S + 2 * EXP_ARG * spread + 0.5 * _ulp32(S32)),
    }
    if draft is None:
        none = torch.zeros((rows, nb), dtype=torch.bool, device=dev)
        out["draft_local_max"] = (none, m32, zero)
        out["draft_local_sumexp"] = (none, S32, zero)
        return out
    for x, (value, bound) in local_draft_stats_rows(draft, temperature, V, block).items():
        out[x] = (r, value, bound)
    return out


def local_draft_stats_rows(draft: torch.Tensor, temperature: torch.Tensor, vocab_size: int, block: int = 8192,
                           ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:  # fmt: skip
    """§30.1's drafter statistics of a random row (:func:`local_logits_stats_rows`, which
    writes them for its random rows): ``draft`` float32 ``[rows, Wd]`` (row ``j``'s
    ``draft_logits[s, i]``), ``temperature`` float32 ``[rows]`` (``T_s``; 0 reads as 1: a greedy
    row reads no draft), ``V = vocab_size``, blocks of ``block`` lanes (one block of ``V`` lanes
    where ``V <= block``). Per output, ``(expected, bound)`` of shape ``[rows, NB]``: the
    maximum of the float32 quotients ``q = draft / T`` (2 ulp: a compiled division) and ``sum
    exp(q - max q)`` (bound ``2**-15 S + 2**-21 sum e |q - max q| + 2**-21 sum e (|q| + |max
    q|)`` plus half a float32 step of the rounding)."""
    rows, V = draft.shape[0], int(vocab_size)
    nb = -(-V // block)
    if nb == 1:
        block = max(V, 1)
    t = temperature.to(torch.float32)[:, None]
    t = torch.where(t == 0, 1.0, t)  # greedy rows read no draft: any divisor
    if nb * block == V:
        d = draft[:, :V].to(torch.float32)
    else:
        d = torch.full((rows, nb * block), float("-inf"), dtype=torch.float32, device=draft.device)
        d[:, :V] = draft[:, :V].to(torch.float32)
    q32 = (d / t).view(rows, nb, block)  # the correctly rounded float32 quotients
    q = d.to(torch.float64).div_(t.to(torch.float64)).view(rows, nb, block)
    del d
    qm = q32.amax(-1)
    del q32
    md, Sd, spread_d, ed = _sumexp(q)  # ed: exp(q - max q)
    aq = q.abs()
    del q
    fin = aq < float("inf")
    extra = torch.where(fin, ed.mul_(aq.add_(md.abs()[..., None])), 0.0).sum(-1)
    Sd32 = Sd.to(torch.float32)
    return {"draft_local_max": (qm, 2 * _ulp32(qm)),
            "draft_local_sumexp": (Sd32, SUM_BLOCK * Sd + 2 * EXP_ARG * spread_d + 2 * DIV * extra + 0.5 * _ulp32(Sd32))}


SUM_SMALL = 2.0**-17
"""A ``tl.sum`` of at most 64 block partials: relative error."""
LOG_REL = 2.0**-20
"""``log(x)``: error relative to the result's magnitude."""
EPS = 2.0**-24
"""A correctly rounded float32 operation: relative error."""


def block_lse(maxes: torch.Tensor, sums: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``lse`` of rows of §30's block statistics (docs/CONTRACT.md, §28-§35's notation): ``M +
    log(sum_b S_b exp(m_b - M))``, ``M = max_b m_b`` (float64), and its bound ``E_lse = 2**-17 +
    2**-21 (sum_b p_b |m_b - M|) / Z + 2**-20 |log Z| + 2**-24 |lse|`` (``p_b = S_b exp(m_b -
    M)``, ``Z = sum_b p_b``; ``inf`` where it is not finite)."""
    m, S = maxes.to(torch.float64), sums.to(torch.float64)
    M = m.amax(-1)
    x = m - M[..., None]
    p = torch.where(S == 0, torch.zeros_like(S), S * x.exp())
    Z = p.sum(-1)
    lz = Z.log()
    lse = M + lz
    spread = torch.where(p > 0, p * x.abs(), torch.zeros_like(p)).sum(-1) / Z
    e = SUM_SMALL + 2 * EXP_ARG * spread + LOG_REL * lz.abs() + EPS * lse.abs()
    return lse, torch.where(torch.isfinite(e), e, torch.full_like(e, float("inf")))


def _read(flat: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``flat[idx]``; zeros where ``flat`` is empty (every index then a padded step's)."""
    if flat.numel():
        return flat[idx]
    return torch.zeros(idx.shape, dtype=flat.dtype, device=flat.device)


def cumulative_log_p(target_logits: torch.Tensor, target_local_max: torch.Tensor, target_local_sumexp: torch.Tensor,
                     draft_sampled: torch.Tensor, draft_logits: torch.Tensor | None, draft_local_max: torch.Tensor | None,
                     draft_local_sumexp: torch.Tensor | None, cu_num_logits: torch.Tensor, idx_mapping: torch.Tensor,
                     temperature: torch.Tensor, blocks: int, draft_rows: torch.Tensor | None = None,
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """§31.1: per random request ``r`` (``s = idx_mapping[r]``, ``T = T_s != 0``), ``L = 0``,
    then for each draft ``i`` (row ``j = cu[r] + i``, token ``x = draft_sampled[j + 1]``): if
    ``x >= 0``, ``L = min(L + (lp_t - lp_d), 0)`` with ``lp_t = target_logits[j, x] - lse_t(j)``
    and ``lp_d = float32(draft_logits[s, i, x]) / T - lse_d(j)`` (0 without draft logits);
    ``cumulative_log_p[j] = L``. The statistics are read over the first ``blocks`` blocks. A
    greedy request's rows and every bonus row are not written.

    ``target_logits`` ``[n, W]`` and ``draft_logits`` ``[R, K, Wd]`` may be production-scale
    (each read at one element per row); ``draft_rows``: per request the row of its first step in
    ``draft_logits`` viewed ``[-1, Wd]`` (by default ``s K``: one step's cache; several steps'
    caches of different ``K``, concatenated, give their own). Returns ``(written, expected,
    bound)`` of shape ``[n]``: the bound sums, over the steps so far, ``E_lse(t) + E_lse(d) + 2**-22 |q| + 2**-24 (|lp_t|
    + |lp_d| + |lp_t - lp_d| + |L|)``, plus half a float32 step of the stored value.

    Every step's terms are computed at once (``[B, D]``, ``D`` the most drafts); the running
    ``L`` and its bound's sum then take a few operations per step, in the order above (a step of
    a ``-1`` draft adds 0: both stay as they are, bit for bit)."""
    dev = target_logits.device
    n, W = target_logits.shape
    cu = cu_num_logits.to(torch.int64)
    start, nd = cu[:-1], cu[1:] - cu[:-1] - 1
    s = idx_mapping.to(torch.int64)
    B = s.numel()
    f64 = torch.float64
    written = torch.zeros(n + 1, dtype=torch.bool, device=dev)
    expected = torch.zeros(n + 1, dtype=torch.float32, device=dev)
    bound = torch.zeros(n + 1, dtype=f64, device=dev)
    D = int(nd.max()) if B else 0
    if D <= 0:
        return written[:n], expected[:n], bound[:n]
    temp = temperature.to(torch.float32)[s]
    t_lse, t_e = block_lse(target_local_max[:, :blocks], target_local_sumexp[:, :blocks])
    i = torch.arange(D, device=dev)
    on = (i < nd[:, None]) & (temp != 0)[:, None]  # [B, D]: a random request's draft rows
    rows = torch.where(on, start[:, None] + i, 0)
    tok = torch.where(on, draft_sampled.to(torch.int64)[(rows + 1).clamp(max=n - 1)], 0)
    valid = tok >= 0
    tk = tok.clamp(min=0)
    ninf = torch.full((), float("-inf"), dtype=f64, device=dev)
    zero = torch.zeros((), dtype=f64, device=dev)
    tlog = _read(target_logits.reshape(-1), rows * W + tk)
    tlp = torch.where(valid, tlog.to(torch.float32).to(f64), ninf) - t_lse[rows]
    et = torch.where(torch.isfinite(tlp), t_e[rows] + EPS * tlp.abs(), zero)
    if draft_logits is None:
        dlp = ed = torch.zeros_like(tlp)
    else:
        d_lse, d_e = block_lse(draft_local_max[:, :blocks], draft_local_sumexp[:, :blocks])
        K, Wd = draft_logits.shape[-2], draft_logits.shape[-1]
        first = s * K if draft_rows is None else draft_rows.to(torch.int64)
        d32 = _read(draft_logits.reshape(-1), torch.where(on, (first[:, None] + i) * Wd + tk, 0)).to(torch.float32)
        q = torch.where(valid, d32.to(f64), ninf) / temp[:, None].to(f64)
        dlp = q - d_lse[rows]
        ed = torch.where(torch.isfinite(dlp), d_e[rows] + DIV * q.abs() + EPS * dlp.abs(), zero)
    d = tlp - dlp
    # a -1 draft's step adds 0 (L <= 0 is never -0.0, nor the error sum: each stays as it is)
    L = torch.zeros(B, dtype=f64, device=dev)
    Ls = []
    for di in torch.where(valid, d, zero).t().unbind(0):
        L = torch.minimum(L + di, zero)
        Ls.append(L)
    Lg = torch.stack(Ls, 1)
    terms = [torch.where(valid, et, zero)]
    if draft_logits is not None:
        terms.append(torch.where(valid, ed, zero))
    terms.append(torch.where(valid, EPS * (d.abs() + Lg.abs()), zero))
    err = torch.zeros(B, dtype=f64, device=dev)
    errs = []
    for k, x in enumerate(torch.stack(terms, 2).reshape(B, -1).t().unbind(0)):  # per step: its terms in order
        err = err + x
        if k % len(terms) == len(terms) - 1:
            errs.append(err)
    Eg = torch.stack(errs, 1)
    at = torch.where(on, rows, n)  # a padded step writes past the rows (dropped)
    written[at] = on
    expected[at] = Lg.to(torch.float32)
    bound[at] = Eg + 0.5 * _ulp32(Lg)
    return written[:n], expected[:n], bound[:n]


# -- the counter-based noise (the preface to §28-§35) -------------------------------------------

M32 = 0xFFFFFFFF
HI_DOMAIN = 0x9E3779B9
"""The domain of the high word of ``murmur3_uniform64``."""
DRAFT_NOISE_SALT = 1 << 30
"""``_DRAFT_NOISE_SALT``: a drafting row's noise position is its position plus this."""


def _rotl(v: torch.Tensor, s: int) -> torch.Tensor:
    return ((v << s) | (v >> (32 - s))) & M32


def _mix(h: torch.Tensor | int, k: torch.Tensor) -> torch.Tensor:
    k = (k * 0xCC9E2D51) & M32  # int64: the product's low 32 bits survive its wrap
    k = (_rotl(k, 15) * 0x1B873593) & M32
    h = _rotl(h ^ k, 13)
    return (h * 5 + 0xE6546B64) & M32


def murmur3_hash32(seed: torch.Tensor, pos: torch.Tensor, offset: torch.Tensor, domain: int = 0) -> torch.Tensor:
    """``h32(seed, pos, offset, domain)`` (the preface's "Noise"): MurmurHash3_x86_32 of the words
    ``lo32(seed), hi32(seed), lo32(pos), uint32(offset)`` with seed ``domain``, as int64 values in
    ``[0, 2**32)`` (broadcast; int64 arguments, two's complement)."""
    seed, pos, offset = seed.to(torch.int64), pos.to(torch.int64), offset.to(torch.int64)
    h: torch.Tensor | int = domain & M32
    for k in (seed & M32, (seed >> 32) & M32, pos & M32):  # each word at its own shape, broadcast as mixed
        h = _mix(h, k)
    k = (offset & M32) * 0xCC9E2D51 & M32
    k = (_rotl(k, 15) * 0x1B873593) & M32
    h = h ^ k
    r = h << 13  # the rotation's bits past 32 drop with the product's
    r |= h.bitwise_right_shift_(19)
    h = r.mul_(5).add_(0xE6546B64).bitwise_and_(M32)
    h ^= (h >> 16) ^ 16  # h ^ 16, then h ^ (h >> 16): the shift reads no bit of 16
    h = h.mul_(0x85EBCA6B).bitwise_and_(M32)
    h ^= h >> 13
    h = h.mul_(0xC2B2AE35).bitwise_and_(M32)
    h ^= h >> 16
    return h


def murmur3_uniform32(seed: torch.Tensor, pos: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """``u32 = RN32(hi16 * 2**-16 + (lo16 + 0.5) * 2**-32)`` of ``h32(.., 0)``: float32 (the sum is
    exact in float64, rounded once)."""
    r = murmur3_hash32(seed, pos, offset)
    return r.to(torch.float64).add_(0.5).mul_(2.0**-32).to(torch.float32)  # the sum: (r + 0.5) 2**-32, exact


def murmur3_uniform64(seed: torch.Tensor, pos: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """``u64 = RN64(r53 + 0.5) * 2**-53``, ``r53 = ((h32(.., 0x9E3779B9) << 32) | h32(.., 0)) >>
    11``, ``1.0`` replaced by ``1 - 2**-53``: float64."""
    lo, hi = murmur3_hash32(seed, pos, offset), murmur3_hash32(seed, pos, offset, HI_DOMAIN)
    r53 = hi.bitwise_left_shift_(21).bitwise_or_(lo.bitwise_right_shift_(11))  # the word >> 11, without an int64 sign
    return r53.to(torch.float64).add_(0.5).mul_(2.0**-53).clamp_(max=1.0 - 2.0**-53)  # u <= 1: 1.0 alone moves


_SERIES = [float(np.float32(1.0 / k)) for k in (7, 6, 5, 4, 3, 2)] + [1.0]


def gumbel_noise32(u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The float32 path's noise ``n = -log(-L(u))`` (``L(u) = -u P(u)`` below 0.25, ``P`` the
    degree-7 Horner polynomial of float32 coefficients ``1/k`` ending in ``0.125``, else
    ``log(max(1 - u, 2**-24))``), float64, and its bound ``2**-19 + 2**-20 |n|``."""
    u = u.to(torch.float32).to(torch.float64)
    poly = (u * 0.125).add_(_SERIES[0])
    for c in _SERIES[1:]:
        poly.mul_(u).add_(c)
    small = u < 0.25
    neg_l = torch.where(small, poly.mul_(u), u.neg_().add_(1.0).clamp_(min=2.0**-24).log_().neg_())  # -L
    n = neg_l.log_().neg_()
    return n, n.abs().mul_(2.0**-20).add_(2.0**-19)


def gumbel_noise64(u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 path's noise ``-log(-log(u))`` and its bound ``2**-48 (1 + |n|)``."""
    n = u.to(torch.float64).log().neg_().log_().neg_()
    return n, n.abs().add_(1.0).mul_(2.0**-48)


def lane_uniform(seed: torch.Tensor, pos: torch.Tensor, lanes: torch.Tensor, use_fp64: bool) -> torch.Tensor:
    """The uniform of every lane of every row (``[rows, L]``): row ``i``'s seed ``seed[i]`` and
    noise position ``pos[i]`` (int64 ``[rows]``), lane ids ``lanes`` (int64 ``[L]``);
    :func:`murmur3_uniform64` (float64) with ``use_fp64``, else :func:`murmur3_uniform32` (float32)."""
    seed, pos = seed.to(torch.int64)[:, None], pos.to(torch.int64)[:, None]
    return (murmur3_uniform64 if use_fp64 else murmur3_uniform32)(seed, pos, lanes[None, :])


def uniform_noise(u: torch.Tensor, use_fp64: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`gumbel_noise64` of ``u`` with ``use_fp64``, else :func:`gumbel_noise32`."""
    return (gumbel_noise64 if use_fp64 else gumbel_noise32)(u)


def lane_noise(seed: torch.Tensor, pos: torch.Tensor, lanes: torch.Tensor, use_fp64: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The Gumbel noise of every lane of every row and its bound (float64, ``[rows, L]``):
    :func:`uniform_noise` of :func:`lane_uniform`. The lanes' passes a sampling oracle makes
    most of: a caller may hand the oracles another implementation of this function (``noise``)
    that computes the same values, within far less than the noise's bound."""
    return uniform_noise(lane_uniform(seed, pos, lanes, use_fp64), use_fp64)


Noise = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], tuple[torch.Tensor, torch.Tensor]]
"""An implementation of :func:`lane_noise` (the oracles' ``noise`` argument)."""


def gumbel_sample_rows(logits: torch.Tensor, state: torch.Tensor, seeds: torch.Tensor, pos: torch.Tensor,
                       temperature: torch.Tensor, apply_temperature: bool, is_drafting: bool, use_fp64: bool,
                       vocab_size: int | None = None, block: int = 1024,
                       noise: Noise = lane_noise) -> dict[str, torch.Tensor]:  # fmt: skip
    """§29.1 (the target's sampling and the drafter's, its cache aside) for a block of rows:
    ``logits`` ``[rows, W]`` as given, ``state`` int64 ``[rows]`` (``-1``: a padded drafter
    row: temperature 0, seed 0), ``seeds`` int64 and ``temperature`` float32 of the state rows,
    ``pos`` int64 ``[rows]``. Lane ``v`` of block ``b``: ``x_v`` (``-inf`` past ``V``), divided by
    ``T`` when ``apply_temperature`` and ``T != 0`` (bound ``2**-22 |x_v|``); with ``T != 0``
    ``g_v = x_v + n(u(seed, pos (+ 2**30 drafting), v))`` (bound plus the noise's and ``eps
    |g_v|``), else ``g_v = x_v`` (exact).

    Per row and block (``[rows, NB]``): ``nominal``, the first lane of greatest ``g`` (global
    id); ``settled``, whether the winner is fixed (one candidate, or all candidates exact); the
    candidates ``cand`` (``[rows, NB, block]``: lanes whose upper bound reaches the greatest
    lower bound, a window's outcomes), with each lane's ``g`` and bound ``e`` (float64).
    ``noise``: the lanes' noise (:func:`lane_noise` or an implementation of it)."""
    rows, W = logits.shape
    V = W if vocab_size is None else int(vocab_size)
    nb = -(-V // block)
    dev = logits.device
    valid = state >= 0
    s = torch.where(valid, state, torch.zeros_like(state))
    t = torch.where(valid, temperature.to(torch.float32)[s], torch.zeros((), dtype=torch.float32, device=dev))
    seed = torch.where(valid, seeds.to(torch.int64)[s], torch.zeros_like(s))
    p = pos.to(torch.int64) + (DRAFT_NOISE_SALT if is_drafting else 0)
    noisy = t != 0
    classes = [(m, quiet) for m, quiet in ((noisy, False), (~noisy, True)) if bool(m.any())] or [(None, True)]
    if len(classes) == 1:  # every row of one class: none gathered
        return _gumbel_class(logits, t, seed, p, apply_temperature, use_fp64, V, block, nb, classes[0][1], noise)
    out: dict[str, torch.Tensor] = {}
    for m, quiet in classes:
        at = torch.nonzero(m).flatten()
        res = _gumbel_class(logits[at], t[at], seed[at], p[at], apply_temperature, use_fp64, V, block, nb, quiet, noise)
        for k, v in res.items():
            if k not in out:
                out[k] = torch.empty((rows, *v.shape[1:]), dtype=v.dtype, device=dev)
            out[k][at] = v
    return out


def _gumbel_class(logits: torch.Tensor, t: torch.Tensor, seed: torch.Tensor, p: torch.Tensor, apply_temperature: bool,
                  use_fp64: bool, V: int, block: int, nb: int, quiet: bool,
                  noise: Noise = lane_noise) -> dict[str, torch.Tensor]:  # fmt: skip
    """:func:`gumbel_sample_rows` for rows all of ``T != 0`` or (``quiet``) all of ``T = 0``
    (``t``, ``seed``, ``p``: each row's temperature, seed and noise position)."""
    rows = logits.shape[0]
    dev = logits.device
    inf, ninf = float("inf"), float("-inf")
    x32 = torch.full((rows, nb * block), ninf, dtype=torch.float32, device=dev)
    x32[:, :V] = logits[:, :V].to(torch.float32)
    base = torch.arange(nb, device=dev, dtype=torch.int64) * block
    if quiet:  # g = x exact: each block's maxima the candidates
        g = x32.to(torch.float64).view(rows, nb, block)
        return {"nominal": g.argmax(-1) + base, "settled": torch.ones((rows, nb), dtype=torch.bool, device=dev),
                "cand": g >= g.amax(-1, keepdim=True), "g": g, "e": torch.zeros_like(g)}
    if apply_temperature:
        x32.div_(t[:, None])
    x = x32.to(torch.float64)
    del x32
    n, ne = noise(seed, p, torch.arange(nb * block, device=dev, dtype=torch.int64), use_fp64)
    eps = 2.0**-53 if use_fp64 else 2.0**-24
    if apply_temperature:
        xe = x.abs()
        e = torch.where(xe < inf, xe.mul_(2.0**-22), 0.0).add_(ne)
    else:  # xe = 0: 0 + ne is ne
        e = ne
    g = n.add_(x)
    e.add_(g.abs().mul_(eps))
    g[:, V:] = ninf
    e = torch.where(g.abs() < inf, e, 0.0)
    g, e = g.view(rows, nb, block), e.view(rows, nb, block)
    lo, hi = g - e, g + e
    cand = hi >= lo.amax(-1, keepdim=True)
    first = g.argmax(-1)  # the first of the maxima
    settled = (cand.sum(-1) == 1) | torch.where(cand, e == 0, True).all(-1)
    return {"nominal": first + base, "settled": settled, "cand": cand, "g": g, "e": e}


def gumbel_mismatches(res: dict[str, torch.Tensor], local_argmax: torch.Tensor, local_max: torch.Tensor,
                      block: int = 1024) -> torch.Tensor:  # fmt: skip
    """Elements of ``local_argmax`` and ``local_max`` (``[rows, NB]``, as the run left them) not
    as §29.1 allows given :func:`gumbel_sample_rows`'s ``res``: the argmax a candidate of its
    block (the nominal winner where it is settled), the maximum within its bound (plus half a
    step of its dtype) of that lane's ``g`` (exact where the bound is 0). A device scalar."""
    rows, nb = local_argmax.shape
    base = torch.arange(nb, device=local_argmax.device, dtype=torch.int64) * block
    k = local_argmax.to(torch.int64) - base
    inside = (k >= 0) & (k < block)
    kk = torch.where(inside, k, torch.zeros_like(k))
    in_cand = inside & res["cand"].gather(-1, kk[..., None])[..., 0]
    ok_arg = in_cand & (~res["settled"] | (local_argmax.to(torch.int64) == res["nominal"]))
    c = torch.where(in_cand, kk, res["nominal"] - base)
    val = res["g"].gather(-1, c[..., None])[..., 0]
    bound = res["e"].gather(-1, c[..., None])[..., 0]
    step = _ulp32(val) if local_max.dtype == torch.float32 else _ulp64(val)
    bound = torch.where(bound > 0, bound + 0.5 * step, bound)
    want = val.to(local_max.dtype)
    same = local_max == want
    near = (local_max.to(torch.float64) - val).abs() <= bound
    ok_max = torch.where(bound > 0, near | same, same)
    return (~ok_arg).sum() + (~ok_max).sum()


def gumbel_sample_winners(logits: torch.Tensor, state: torch.Tensor, seeds: torch.Tensor, pos: torch.Tensor,
                          temperature: torch.Tensor, apply_temperature: bool, is_drafting: bool, use_fp64: bool,
                          vocab_size: int | None = None, cache_col: torch.Tensor | None = None, block: int = 1024,
                          lanes: int = 1 << 24, noise: Noise = lane_noise) -> dict[str, torch.Tensor]:  # fmt: skip
    """§29.1 for many rows at once (a batch of cases of one vocabulary), :func:`gumbel_sample_rows`
    a chunk of about ``lanes`` lanes at a time: ``logits`` ``[rows, W]`` as given, ``state`` int64
    ``[rows]`` (``-1``: a padded drafter row) into ``seeds`` and ``temperature``, ``pos`` int64
    ``[rows]``; ``cache_col`` int64 ``[rows]``, each row's logits-cache column (a drafter's call:
    its noise seed ``spec_step_seed(seed, col) = seed ^ (col << 32)``), ``None`` without a cache.

    Per row and block (``[rows, NB]``): ``nominal``, the first lane of greatest ``g`` (its token
    id); ``settled``, whether that winner is fixed (otherwise the block is a window: the contract
    accepts any of its candidates); ``value``, that lane's ``g`` as ``local_max`` stores it
    (float32, or float64 with ``use_fp64``), and ``bound``, its ``E`` plus half a step of that
    rounding (float64; 0: exact, bit for bit). ``noise``: as :func:`gumbel_sample_rows`'s."""
    rows, W = logits.shape
    V = W if vocab_size is None else int(vocab_size)
    nb = -(-V // block)
    dev = logits.device
    valid = state >= 0
    s = torch.where(valid, state, torch.zeros_like(state))
    seed = seeds.to(torch.int64)[s]
    if cache_col is not None:
        seed = seed ^ (cache_col.to(torch.int64) << 32)
    temp = temperature.to(torch.float32)[s]
    local = torch.where(valid, torch.arange(rows, device=dev, dtype=torch.int64), torch.full_like(state, -1))
    base = torch.arange(nb, device=dev, dtype=torch.int64) * block
    out = {"nominal": torch.empty((rows, nb), dtype=torch.int64, device=dev),
           "settled": torch.empty((rows, nb), dtype=torch.bool, device=dev),
           "value": torch.empty((rows, nb), dtype=torch.float64 if use_fp64 else torch.float32, device=dev),
           "bound": torch.empty((rows, nb), dtype=torch.float64, device=dev)}
    chunk = max(1, lanes // max(1, nb * block))
    for lo in range(0, rows, chunk):
        hi = min(rows, lo + chunk)
        res = gumbel_sample_rows(logits[lo:hi], local[lo:hi] - lo * valid[lo:hi], seed[lo:hi], pos[lo:hi], temp[lo:hi],
                                 apply_temperature, is_drafting, use_fp64, V, block, noise)
        k = (res["nominal"] - base)[..., None]
        out["nominal"][lo:hi] = res["nominal"]
        out["settled"][lo:hi] = res["settled"]
        value = res["g"].gather(-1, k)[..., 0].to(out["value"].dtype)
        e = res["e"].gather(-1, k)[..., 0]
        half = 0.5 * (_ulp64(value) if use_fp64 else _ulp32(value))
        out["value"][lo:hi] = value
        out["bound"][lo:hi] = torch.where(e > 0, e + half, torch.zeros_like(e))
        del res
    return out


def _ulp64(x: torch.Tensor) -> torch.Tensor:
    a = x.abs().to(torch.float64)
    step = torch.nextafter(a, torch.full_like(a, float("inf"))) - a
    return torch.where(torch.isfinite(step) & torch.isfinite(a), step, torch.zeros_like(step))


def local_residual_mass_rows(target: torch.Tensor, draft: torch.Tensor, t_lse: torch.Tensor, t_e: torch.Tensor,
                             d_lse: torch.Tensor, d_e: torch.Tensor, prev_log_p: torch.Tensor, temperature: torch.Tensor,
                             vocab_size: int, block: int = 8192) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """§32.1 for rows that write (a random request's draft row past its first whose next draft
    is real): ``target`` ``[rows, Wt]`` and ``draft`` ``[rows, Wd]`` (the row's
    ``draft_logits[s, i]``) as given, the rows' log-sum-exps of §30's statistics with their
    bounds (:func:`block_lse`), ``prev_log_p`` = ``cumulative_log_p[j - 1]`` (float32), ``T``.
    Per block ``b``: ``sum_{v in b, v < V} max(p exp(lp_t(v)) - exp(lp_d(v)), 0)``, ``p =
    exp(prev_log_p)``, ``lp_t = x - lse_t``, ``lp_d = float32(draft) / T - lse_d``; bound ``sum_v
    [a_v (e_p + e(lp_t) + E_t + 2**-24) + c_v (e(lp_d) + E_d) + 2**-24 |a_v - c_v|] + 2**-15
    total`` (``a_v = p exp(lp_t)``, ``c_v = exp(lp_d)``, ``e(x) = 2**-20 + 2**-22 |x|``, ``E_t``,
    ``E_d`` the log-probabilities' bounds of §31.1), plus half a float32 step. Returns
    ``(expected, bound)`` of shape ``[rows, NB]``."""
    rows, V = target.shape[0], int(vocab_size)
    nb = -(-V // block)
    dev = target.device
    if nb == 1:  # one block: its lanes past V (masked) add nothing, so none are made
        block = max(V, 1)
    f64 = torch.float64
    if nb * block == V:
        t = target[:, :V].to(torch.float32).to(f64)
        d = draft[:, :V].to(torch.float32).to(f64)
    else:
        t = torch.full((rows, nb * block), float("-inf"), dtype=f64, device=dev)
        t[:, :V] = target[:, :V].to(torch.float32).to(f64)
        d = torch.full((rows, nb * block), float("-inf"), dtype=f64, device=dev)
        d[:, :V] = draft[:, :V].to(torch.float32).to(f64)
    q = d.div_(temperature.to(torch.float32).to(f64)[:, None])
    tlp = t.sub_(t_lse[:, None])
    dlp = q - d_lse[:, None]
    atlp, adlp = tlp.abs(), dlp.abs()
    et = (atlp * EPS).add_(t_e[:, None])
    ed = q.abs_().mul_(DIV).add_(d_e[:, None]).add_(adlp * EPS)
    del q
    clp = prev_log_p.to(torch.float32).to(f64)
    a = torch.where(tlp > float("-inf"), tlp.exp().mul_(clp.exp()[:, None]), 0.0)  # -inf and NaN: 0
    c = torch.where(dlp > float("-inf"), dlp.exp(), 0.0)
    del tlp, dlp
    amc = a - c
    term = amc.clamp(min=0.0)

    def e(x: torch.Tensor) -> torch.Tensor:
        return 2.0**-20 + 2.0**-22 * x.abs()

    da = atlp.mul_(2.0**-22).add_(2.0**-20).add_(e(clp)[:, None]).add_(et).add_(EPS).mul_(a)  # a (e_p + e(lp_t) + E_t + eps)
    dc = adlp.mul_(2.0**-22).add_(2.0**-20).add_(ed).mul_(c)
    del et, ed
    pa, pc = a > 0, c > 0
    dterm = torch.where(pa, da, 0.0).add_(torch.where(pc, dc, 0.0)).add_(amc.abs_().mul_(EPS))
    dterm = torch.where(pa.logical_or_(pc), dterm, 0.0)
    if nb * block > V:
        term[:, V:] = 0.0
        dterm[:, V:] = 0.0
    partial = term.view(rows, nb, block).sum(-1)
    p32 = partial.to(torch.float32)
    return p32, dterm.view(rows, nb, block).sum(-1) + SUM_BLOCK * partial + 0.5 * _ulp32(p32)


# -- §33 _rejection_kernel ------------------------------------------------------------------------

_PHILOX_A, _PHILOX_B = 0xD2511F53, 0xCD9E8D57
_PHILOX_KA, _PHILOX_KB = 0x9E3779B9, 0xBB67AE85
TL_RAND_MIN = float(np.float32(4.6566127342e-10))
"""``tl_rand32``'s floor and scale (``float32(4.6566127342e-10)``)."""


def tl_rand32(seed: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """The preface's acceptance uniform ``tl_rand32(seed, offset, includes_zero=False)``:
    Philox4x32-10 of counter ``(lo32(offset), hi32(offset), 0, 0)`` and key ``(lo32(seed),
    hi32(seed))`` (int64 words in ``[0, 2**32)``: a 32-bit product's high word survives an int64
    wrap), its first word as int32 ``x``, ``(x < 0 ? ~x : x)`` in float32 times
    ``float32(4.6566127342e-10)``, raised to at least that; float32 (broadcast)."""
    seed, offset = torch.broadcast_tensors(seed.to(torch.int64), offset.to(torch.int64))
    dev, pair = seed.device, (2,) + (1,) * seed.dim()
    zero = torch.zeros_like(offset)
    # the words in pairs: x = (c0, c2), y = (c1, c3); y's and the keys' bits past 32 are masked off
    # with each round's new x (only x reaches a product)
    x, y = torch.stack([offset & M32, zero]), torch.stack([offset >> 32, zero])
    two = torch.arange(2, device=dev, dtype=torch.int64)  # the constants made on the device (no copy)
    mul = (_PHILOX_A + two * (_PHILOX_B - _PHILOX_A)).view(pair)
    bump = torch.arange(10, device=dev, dtype=torch.int64)[:, None] * (_PHILOX_KA + two * (_PHILOX_KB - _PHILOX_KA))
    keys = (torch.stack([seed & M32, seed >> 32]) + bump.view((10, *pair))).unbind(0)  # round r's (k0, k1), low 32 bits
    for k in keys:
        p = (x * mul).flip(0)  # (c2 B, c0 A): int64, each product's low 64 bits
        x, y = ((p >> 32) ^ y ^ k) & M32, p  # (hi(c2 B) ^ c1 ^ k0, hi(c0 A) ^ c3 ^ k1), (lo(c2 B), lo(c0 A))
    c0 = x[0]
    x = torch.where(c0 >= 1 << 31, c0 - (1 << 32), c0)
    x = torch.where(x < 0, -x - 1, x)
    scale = torch.full((), TL_RAND_MIN, dtype=torch.float32, device=dev)
    return torch.clamp(x.to(torch.float32) * scale, min=TL_RAND_MIN)


def spec_step_seed(seed: torch.Tensor, step: int) -> torch.Tensor:
    """``seed ^ (step << 32)`` (int64, two's complement)."""
    return seed.to(torch.int64) ^ (int(step) << 32)


def greedy_argmax(target_local_max: torch.Tensor, target_local_argmax: torch.Tensor) -> torch.Tensor:
    """§33.1's greedy argmax of rows of §30's statistics (``[rows, P]``): the
    ``target_local_argmax`` of the block of greatest ``target_local_max`` (NaN as ``-inf``, the
    first of equals)."""
    m = target_local_max.to(torch.float64)
    m = torch.where(torch.isnan(m), torch.full_like(m, float("-inf")), m)
    top = m.amax(-1, keepdim=True)
    first = (m == top).to(torch.int8).argmax(-1)  # the first block holding the maximum
    return target_local_argmax.to(torch.int64).gather(-1, first[:, None])[:, 0]


# -- §34 _resample_kernel -------------------------------------------------------------------------

EXP_REL = 2.0**-20
"""``exp(x)``: the part of its relative error that does not grow with ``abs(x)``."""


def resample_rows(target: torch.Tensor, draft: torch.Tensor | None, rejected: torch.Tensor, t_lse: torch.Tensor,
                  d_lse: torch.Tensor, log_p_tau: torch.Tensor | None, temperature: torch.Tensor, seeds: torch.Tensor,
                  pos: torch.Tensor, vocab_size: int, use_fp64: bool, block: int = 1024,
                  noise: Noise = lane_noise) -> dict[str, torch.Tensor]:  # fmt: skip
    """§34.1 for the requests that draw (a random request's rejected draft, or any request's
    bonus), a row each: ``target`` ``[rows, Wt]`` (logits row ``j = cu[r] + k``) and ``draft``
    ``[rows, Wd]`` (``draft_logits[s, k]``; ``None``: one-hot drafts) as given, ``rejected``
    int64 (``y = draft_sampled[j + 1]``; ``-1`` for a bonus row or a placeholder: the target's
    own logits), ``t_lse``/``d_lse`` float32 (``*_rejected_logsumexp[r]``), ``log_p_tau``
    (block verification: ``cumulative_log_p[j - 1]`` where ``k > 0``, else 0; ``None`` for the
    other methods), ``T``, ``seeds``, ``pos`` of the rows. Lane ``v < V``: the residual
    ``z_v`` (``t_v``; with draft logits ``lp_t + log1p(-ratio)``, ``-inf`` where ``ratio >= 1``,
    within §34.1's bound, a lane whose ratio lies within ``ratio e_r`` of 1 anywhere from
    ``-inf`` up; without, ``-inf`` at ``y``), plus the target's noise ``n(u(seed, pos, v))``
    where ``T != 0`` (no division: ``APPLY_TEMPERATURE`` off).

    Returns per row and 1024-wide block what :func:`gumbel_mismatches` reads: ``nominal`` (the
    first lane of greatest value, global id), ``settled``, the candidates ``cand`` (lanes whose
    interval reaches the greatest lower end), each lane's value ``g`` and bound ``e``.

    Each row is computed alone, so the rows are taken in classes (a draft-residual row or not;
    noised or not), each class's rows gathered and its results scattered back: a row computes
    only the passes its class needs. ``noise``: the lanes' noise (:func:`lane_noise` or an
    implementation of it)."""
    rows, V = target.shape[0], int(vocab_size)
    nb = -(-V // block)
    width = nb * block
    dev = target.device
    residual = rejected >= 0
    noisy = temperature.to(torch.float32) != 0
    one_hot = draft is None
    keys = [(False, noisy, False), (False, ~noisy, True)] if one_hot else \
        [(True, residual & noisy, False), (True, residual & ~noisy, True), (False, ~residual & noisy, False),
         (False, ~residual & ~noisy, True)]  # fmt: skip
    classes = [(r, torch.nonzero(m).flatten(), quiet) for r, m, quiet in keys if bool(m.any())] or [(False, None, True)]
    if len(classes) == 1:  # every row of one class: none gathered
        classes = [(classes[0][0], None, classes[0][2])]
    parts = []
    for res_rows, at, quiet in classes:

        def pick(v: torch.Tensor | None, at: torch.Tensor | None = at) -> torch.Tensor | None:
            return v if v is None or at is None else v[at]

        parts.append((at, _resample_class(pick(target), pick(draft) if res_rows else None,
                                          pick(rejected) if one_hot else None, pick(t_lse), pick(d_lse),
                                          pick(log_p_tau), pick(temperature), pick(seeds), pick(pos), V, use_fp64,
                                          block, nb, width, quiet, noise)))
    if len(parts) == 1:
        return parts[0][1]
    out = {k: torch.empty((rows, *v.shape[1:]), dtype=v.dtype, device=dev) for k, v in parts[0][1].items()}
    for at, res in parts:
        for k, v in res.items():
            out[k][at] = v
    return out


def _resample_class(target: torch.Tensor, draft: torch.Tensor | None, rejected: torch.Tensor, t_lse: torch.Tensor,
                    d_lse: torch.Tensor, log_p_tau: torch.Tensor | None, temperature: torch.Tensor, seeds: torch.Tensor,
                    pos: torch.Tensor, V: int, use_fp64: bool, block: int, nb: int, width: int,
                    quiet: bool, noise: Noise = lane_noise) -> dict[str, torch.Tensor]:  # fmt: skip
    """:func:`resample_rows` for rows of one class: with ``draft``, every row draft-residual
    (``rejected >= 0``), else none (``rejected``: one-hot drafts' rows, ``None`` where there are
    draft logits); every row of ``T = 0`` (``quiet``) or none."""
    rows = target.shape[0]
    dev = target.device
    f64 = torch.float64
    inf, ninf = float("inf"), float("-inf")
    if V == width:
        x = target[:, :V].to(torch.float32).to(f64)
    else:
        x = torch.full((rows, width), ninf, dtype=f64, device=dev)
        x[:, :V] = target[:, :V].to(torch.float32).to(f64)
    lo = hi = e0zero = None  # lo, hi None: lo = hi = x (e0 = 0); e0zero None: e0 = 0 wherever e is
    if draft is not None:
        t = x
        if V == width:
            d = draft[:, :V].to(torch.float32).to(f64)
        else:
            d = torch.full((rows, width), ninf, dtype=f64, device=dev)
            d[:, :V] = draft[:, :V].to(torch.float32).to(f64)
        tlp = t - t_lse.to(torch.float32).to(f64)[:, None]
        etlp = tlp.abs().add_(t.abs_()).mul_(EPS)  # t not read again
        if log_p_tau is not None:
            tlp.add_(log_p_tau.to(torch.float32).to(f64)[:, None])
            etlp.add_(tlp.abs().mul_(EPS))
        q = d.div_(temperature.to(torch.float32).to(f64)[:, None])
        dlp = q - d_lse.to(torch.float32).to(f64)[:, None]
        dd = dlp - tlp
        edd = q.abs_().mul_(DIV).add_(etlp).add_(dlp.abs().add_(dd.abs()).mul_(EPS))
        ratio = dd.exp()
        er = dd.abs().mul_(EXP_ARG).add_(EXP_REL).add_(edd)
        del edd
        l1p = ratio.clamp(max=1.0).neg_().log1p_()
        res = torch.where(ratio < 1.0, tlp + l1p, ninf)
        tfin = tlp.abs() < inf
        no_draft = tfin & (dlp == ninf)  # ratio 0: z = lp_t exactly
        er.masked_fill_(no_draft, 0.0)
        rer = ratio * er
        near = tfin.logical_and_(dd.abs_() < inf).logical_and_((1.0 - ratio).abs_() <= rer)
        del dd, dlp, tfin
        gap = (1.0 + er).mul_(ratio).neg_().add_(1.0)
        el1p = rer.div_(torch.where(gap > 0, gap, float("nan"))).add_(l1p.abs_().mul_(LOG_REL))
        el1p.masked_fill_(no_draft, 0.0)
        del gap, l1p, no_draft
        ares = res.abs()
        fin = ares < inf
        eres = el1p.add_(etlp).add_(ares.mul_(EPS))
        lo = torch.where(fin, res - eres, ninf).masked_fill_(near, ninf)
        hi = torch.where(fin, res.add(eres), ninf)
        at = near.nonzero(as_tuple=True)  # a window's lanes (few): hi its top, -inf its lo
        hi[at] = (tlp[at] + etlp[at]) + torch.log1p(-torch.clamp(ratio[at] * (1.0 - er[at]), max=1.0))
        hi.masked_fill_(torch.isnan(hi), inf)
        del ratio, er, etlp, ares, tlp, eres, fin, near
        x = res
        if quiet:  # a noised lane's e is 0 only where its g, so its x, is not finite (e0 then 0)
            e0zero = (torch.maximum(hi - x, x - lo) == 0).logical_or_(~(x.abs() < inf))
    elif rejected is not None and rejected.numel():  # one-hot drafts: -inf at the rejected draft's lane
        drop = ((rejected >= 0) & (rejected < width))[:, None]
        k = rejected.to(torch.int64).clamp(0, width - 1)[:, None]
        x.scatter_(1, k, torch.where(drop, ninf, x.gather(1, k)))
    if V < width:
        x[:, V:] = ninf
    if quiet:  # g = x, e = 0
        if lo is None:  # every interval a point: exact, each block's maxima the candidates
            g = x.view(rows, nb, block)
            gm = torch.nan_to_num(g, nan=ninf, posinf=inf, neginf=ninf)
            first = gm.argmax(-1)
            cand = g >= gm.amax(-1, keepdim=True)
            base = torch.arange(nb, device=dev, dtype=torch.int64) * block
            return {"nominal": first + base, "settled": torch.ones((rows, nb), dtype=torch.bool, device=dev),
                    "cand": cand, "g": g, "e": torch.zeros_like(g)}
        g = x
        e = torch.zeros_like(x)
        gfin = g.abs() < inf
    else:
        n, ne = noise(seeds, pos, torch.arange(width, device=dev, dtype=torch.int64), use_fp64)
        eps = 2.0**-53 if use_fp64 else EPS
        g = n.add_(x)
        e = g.abs().mul_(eps).add_(ne)
        del ne
        if V < width:
            g[:, V:] = ninf
        gfin = g.abs() < inf
        e = torch.where(gfin, e, 0.0)
    n_ = (g - x).nan_to_num_(nan=0.0, posinf=inf, neginf=ninf)  # finite or NaN (x or g not finite): 0 where not finite
    if lo is None:
        glo = n_.add_(x)
        ghi = glo + e
        glo.sub_(e)
        exact = e == 0
    else:
        glo = lo.add_(n_).sub_(e)
        ghi = hi.add_(n_).add_(e)
        exact = e == 0 if e0zero is None else e0zero.logical_and_(e == 0)
    del n_, e
    if V < width:
        glo[:, V:] = ninf
        ghi[:, V:] = ninf
    glo, ghi = torch.where(exact, g, glo), torch.where(exact, g, ghi)
    g, glo, ghi, exact, gfin = (v.view(rows, nb, block) for v in (g, glo, ghi, exact, gfin))
    first = torch.nan_to_num(g, nan=ninf, posinf=inf, neginf=ninf).argmax(-1)
    cand = ghi >= torch.nan_to_num(glo, nan=ninf, posinf=inf, neginf=ninf).amax(-1, keepdim=True)
    settled = (cand.sum(-1) <= 1) | torch.where(cand, exact, True).all(-1)
    bound = torch.maximum(ghi.sub_(g), glo.neg_().add_(g))
    bound = torch.where(gfin, bound.nan_to_num_(nan=inf, posinf=inf, neginf=ninf), 0.0)
    base = torch.arange(nb, device=dev, dtype=torch.int64) * block
    return {"nominal": first + base, "settled": settled, "cand": cand, "g": g, "e": bound}


def rejection_steps(target_logits: torch.Tensor, target_local_argmax: torch.Tensor, target_local_max: torch.Tensor,
                    target_local_sumexp: torch.Tensor, draft_sampled: torch.Tensor, draft_logits: torch.Tensor | None,
                    draft_local_max: torch.Tensor | None, draft_local_sumexp: torch.Tensor | None, cu: torch.Tensor,
                    state: torch.Tensor, draft_first: torch.Tensor | None, temperature: torch.Tensor,
                    seed: torch.Tensor, pos: torch.Tensor, blocks: int, K: int, method: str,
                    rates: torch.Tensor | None = None, cumulative_log_p: torch.Tensor | None = None,
                    local_residual_mass: torch.Tensor | None = None, fly_entropy: torch.Tensor | None = None,
                    fly_threshold: torch.Tensor | None = None, fly_window: torch.Tensor | None = None,
                    decided: torch.Tensor | None = None) -> dict[str, torch.Tensor]:  # fmt: skip
    """§33.1 of every method, many steps' requests at once (their rows concatenated: ``cu``
    ``[B + 1]`` int64 over the rows, per request its state row ``state`` in ``temperature`` and
    ``seed``, the row of its first step in ``draft_logits`` viewed ``[-1, Wd]``
    ``draft_first``; ``K`` the most drafts of a request). ``method``: ``"standard"``,
    ``"synthetic"`` (``rates`` ``[B, K]``: each request's step's rate), ``"block"``
    (``cumulative_log_p`` ``[n]``, ``local_residual_mass`` ``[n, NB]`` with the drafter's
    logits) or ``"fly"`` (``fly_entropy`` ``[n]``, per request ``fly_threshold`` float32 and
    ``fly_window`` int64 >= 1). The statistics are read over the first ``blocks`` blocks.

    Request ``r`` (greedy iff ``T_s = 0``), step ``i`` (row ``j = cu[r] + i``, draft ``x =
    draft_sampled[j + 1]``): a random row of a method but FLy stops at its first ``-1``; ``u =
    tl_rand32(seed', pos[j])`` (``seed' = seed ^ (i << 32)`` under block verification, else the
    seed). A greedy row is accepted iff (``u < rate`` with rates, else §30's argmax of row ``j``
    is ``x``) and ``x >= 0``, its rejection the argmax. A random row: standard, ``lp_t > log u
    + lp_d`` (window ``E_t + E_d + 2**-20 |log u| + 2**-24 |log u + lp_d|``); synthetic, ``u <
    rate``; block verification, ``u <= h`` with ``p = exp(cumulative_log_p[j])``, ``h = p`` at
    a request's last draft or before a ``-1``, else ``h = R / (R + 1 - p)`` (1 where the
    denominator is not positive; ``R`` the sum of row ``j + 1``'s residual partials, or without
    the drafter's logits ``p (1 - exp(lp_t))`` of its draft), its count the last step accepted
    and every step visited written with its draft; FLy, the standard test (a ``-1`` rejected),
    a rejection of a draft both sides give a probability deferred (a greedy row's: the target's)
    while the entropy of its row reaches the threshold and ``window`` more drafts follow, then
    confirmed by the window's drafts all accepted, a greedy rejection writing the argmax at the
    count. The log-sum-exps: a random row's at every step it verifies (FLy: outside a deferral),
    block verification's at the rejected row.

    Returns ``sampled`` ``[B, K + 1]`` and its ``sampled_written``, ``num_sampled`` (int32),
    ``target_rejected_logsumexp`` and ``draft_rejected_logsumexp`` (float32) with their bounds
    (``*_bound``, float64), and per request ``window``: whether a decision of it lies within
    its window (the extended tier's: a production draw re-keys such a request). With
    ``decided`` (per request, the run's ``num_sampled``: a production-scale step checked against
    the run), a decision within its window is the run's: step ``i`` accepted iff ``decided[r] >
    i``.

    ``target_logits`` ``[n, W]`` and ``draft_logits`` may be production-scale: each is read at
    one element per verified row.

    Every step's quantities are computed at once (``[B, K + 1]``: each request's steps, padded),
    the sequential acceptance then as prefix operations over the steps."""
    dev = target_logits.device
    n, W = target_logits.shape
    cu = cu.to(torch.int64)
    start, nd = cu[:-1], cu[1:] - cu[:-1] - 1
    s = state.to(torch.int64)
    B = s.numel()
    temp = temperature.to(torch.float32)[s]
    greedy = temp == 0
    f64 = torch.float64
    t_lse_all, t_e_all = block_lse(target_local_max[:, :blocks], target_local_sumexp[:, :blocks])
    has_draft = draft_logits is not None
    tflat = target_logits.reshape(-1)
    ds = draft_sampled.to(torch.int64)
    block, fly = method == "block", method == "fly"
    syn = method == "synthetic"
    ninf = torch.full((), float("-inf"), dtype=f64, device=dev)
    zero = torch.zeros((), dtype=f64, device=dev)

    def exp_rel(x: torch.Tensor) -> torch.Tensor:
        return EXP_REL + EXP_ARG * x.abs()

    # every step of every request at once: [B, D], step i of request r at [r, i] (row j = cu[r] + i);
    # D = K + 1, the last column past every request's drafts
    D = K + 1
    i = torch.arange(D, device=dev)
    nd2, g = nd[:, None], greedy[:, None]
    on = i < nd2
    rows = torch.where(on, start[:, None] + i, 0)
    x = torch.where(on, ds[(rows + 1).clamp(max=n - 1)], 0)
    valid = x >= 0
    xc = x.clamp(min=0)
    seeds = seed.to(torch.int64)[s][:, None]
    u = tl_rand32(seeds ^ (i << 32) if block else seeds, pos.to(torch.int64)[rows])  # spec_step_seed under block
    targ = greedy_argmax(target_local_max[rows.reshape(-1), :blocks],
                         target_local_argmax[rows.reshape(-1), :blocks]).view(B, D)
    tlog = torch.where(valid, _read(tflat, rows * W + xc).to(torch.float32).to(f64), ninf)
    t_lse, t_e = t_lse_all[rows], t_e_all[rows]
    tlp = tlog - t_lse
    et = torch.where(torch.isfinite(tlp), t_e + EPS * tlp.abs(), zero)
    if has_draft:
        d_lse_all, d_e_all = block_lse(draft_local_max[:, :blocks], draft_local_sumexp[:, :blocks])
        Wd = draft_logits.shape[-1]
        at = torch.where(on, (draft_first.to(torch.int64)[:, None] + i) * Wd + xc, 0)
        d32 = _read(draft_logits.reshape(-1), at).to(torch.float32)
        q = torch.where(valid, d32.to(f64), ninf) / temp[:, None].to(f64)
        dl_lse, dl_e = d_lse_all[rows], d_e_all[rows]
        dlp = q - dl_lse
        ed = torch.where(torch.isfinite(dlp), dl_e + DIV * q.abs() + EPS * dlp.abs(), zero)
    else:
        dlp = ed = torch.zeros_like(tlp)
    if syn:
        rate = torch.nn.functional.pad(rates.to(torch.float32)[:, :K], (0, D - min(K, rates.shape[1])))
    # greedy rows
    g_acc = ((u < rate) if syn else targ == xc) & valid
    if block:  # random rows: the joint ratio's threshold
        clp = cumulative_log_p[rows].to(torch.float32).to(f64)
        pr = clp.exp()
        epr = torch.where(pr > 0, pr * exp_rel(clp), zero)
        at_last = i >= nd2 - 1
        nxt = torch.where(at_last, -1, ds[(rows + 2).clamp(max=n - 1)])
        has_next = nxt >= 0
        nr = (rows + 1).clamp(max=n - 1)
        if has_draft:
            parts = local_residual_mass[nr, :blocks].to(torch.float32).to(f64)
            R = parts.sum(-1)
            eR = SUM_SMALL * parts.abs().sum(-1)
        else:
            xl = _read(tflat, nr * W + nxt.clamp(min=0)).to(torch.float32).to(f64) - t_lse_all[nr]
            mb = xl.exp()
            emb = torch.where(mb > 0, mb * (exp_rel(xl) + t_e_all[nr] + EPS * xl.abs()), zero)
            R = pr * (1.0 - mb)
            eR = epr * (1.0 - mb).abs() + pr * emb + EPS * (R.abs() + pr)
        den = R + 1.0 - pr
        eden = eR + epr + EPS * ((R + 1.0).abs() + den.abs())
        hk = torch.where(den > 0, R / den, torch.ones_like(den))
        ehk = torch.where(den.abs() > eden, DIV * hk.abs() + (eR + hk.abs() * eden) / torch.clamp(den.abs() - eden, min=1e-300),
                          torch.full_like(den, float("inf")))
        h = torch.where(has_next, hk, pr)
        eh = torch.where(has_next, ehk, epr)
        margin = h - u.to(f64)
        r_acc = u.to(f64) <= h
        inside = ~(margin.abs() > eh) & ~g
    elif syn:
        r_acc = u < rate
        inside = torch.zeros_like(on)
    else:
        lu = u.to(f64).log()
        rhs = lu + dlp
        margin = tlp - rhs
        em = et + ed + LOG_REL * lu.abs() + EPS * rhs.abs()
        r_acc = tlp > rhs
        inside = torch.isfinite(margin) & (margin.abs() <= em) & ~g
        if fly:
            r_acc = r_acc & valid
    if decided is not None:  # a decision within its window is the run's
        r_acc = torch.where(inside, decided.to(torch.int64)[:, None] > i, r_acc)
    a = torch.where(g, g_acc, r_acc)
    # the sequential acceptance, as prefix operations: the steps visited (a prefix of each
    # request's), the count, and the step whose log-sum-exps are kept (``last``: -1 for none)
    if fly:
        win = fly_window.to(torch.int64)[:, None]
        ent = fly_entropy[rows].to(torch.float32)
        can_defer = torch.where(g, valid & (tlog > float("-inf")), valid & (tlp > float("-inf")) & (dlp > float("-inf")))
        cont = can_defer & (i + win < nd2) & (ent >= fly_threshold.to(torch.float32)[:, None])
        # the first rejection after each step (D: none)
        nrj = torch.where(a, D, i).flip(1).cummin(1).values.flip(1)
        after = nrj.gather(1, (i + 1).clamp(max=D - 1).expand(B, D))
        moves = a | (cont & (after > i + win))  # accepted, or a deferral whose window is all accepted
        jump = torch.where(a, i + 1, i + win + 1)
        # each step outside a deferral to the next (itself where it stops or at the last);
        # doubled until it reaches the request's last step outside one
        f = torch.where(on & moves & (jump < nd2), jump, i)
        for _ in range(max(D - 1, 1).bit_length()):
            f = f.gather(1, f)
        last = f[:, :1]
        stop = (on & ~moves).gather(1, last)
        acc = torch.where(stop, last, nd2)
        # a rejection that stops: its deferral (if any) visits up to the window's first rejection
        end = torch.where(stop, torch.where((cont & ~a).gather(1, last), after.gather(1, last), last), nd2 - 1)
        visited = on & (i <= end)
        last = torch.where(nd2 > 0, last, -1)
        sampled = torch.where(visited, torch.where(g & (i == acc), targ, xc), -1)
    else:
        if block:  # a greedy row stops at its first rejection, a random one at its first -1
            stop = ~(on & torch.where(g, a, valid))
        else:
            stop = ~(on & a & (g | valid))
        first = stop.to(torch.int8).argmax(1, keepdim=True)  # column K: never on
        if block:
            visited = on & torch.where(g, i <= first, i < first)
            acc = torch.where(g, first, torch.where(visited & r_acc, i + 1, 0).amax(1, keepdim=True))
            last = torch.where(acc < nd2, acc, -1)  # the rejected row's
        else:
            visited = on & (g | valid) & (i <= first)
            acc = first
            last = visited.sum(1, keepdim=True) - 1  # the last step verified
        sampled = torch.where(visited, torch.where(g & ~a, targ, xc), -1)
    keep = ~greedy & (last[:, 0] >= 0)
    lrow = start + last[:, 0].clamp(min=0)
    if has_draft:  # [2, B]: the target's, the drafter's
        lse, e = torch.stack([t_lse_all, d_lse_all])[:, lrow], torch.stack([t_e_all, d_e_all])[:, lrow]
    else:
        lse, e = torch.stack([t_lse_all[lrow], zero.expand(B)]), torch.stack([t_e_all[lrow], zero.expand(B)])
    lse, e = torch.where(keep, lse, zero), torch.where(keep, e, zero)
    out = {"sampled": sampled, "sampled_written": visited, "num_sampled": acc[:, 0].to(torch.int32),
           "window": (visited & inside).any(1)}
    for name, v, bound in zip(("target_rejected_logsumexp", "draft_rejected_logsumexp"), lse.to(torch.float32).unbind(0),
                              (e + 0.5 * _ulp32(lse)).unbind(0), strict=True):
        out[name], out[name + "_bound"] = v, bound
    return out


# -- §35 _insert_resampled_kernel -----------------------------------------------------------------


def insert_resampled_rows(local_argmax: torch.Tensor, local_max: torch.Tensor) -> torch.Tensor:
    """§35.1's token of rows of §34's block winners (``[rows, P]``): the ``local_argmax`` of the
    block of greatest ``local_max`` (NaN as ``-inf``, the first of equals), int64."""
    return greedy_argmax(local_max, local_argmax)
