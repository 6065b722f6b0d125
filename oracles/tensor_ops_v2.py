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

import torch

__all__ = ["local_logits_stats_rows", "temperature_rows"]


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
    divided = ((t != 0) & (t != 1)).expand(-1, W).clone()
    divided[:, V:] = False
    q = logits.to(torch.float32) / torch.where(divided, t, torch.ones_like(t))  # IEEE: correctly rounded
    expected = torch.where(divided, q, logits)
    up = torch.nextafter(q, torch.full_like(q, float("inf")))
    ulp = (up - q).abs().to(torch.float64)  # one float32 step at the quotient
    ulp = torch.where(torch.isfinite(ulp), ulp, torch.zeros_like(ulp))
    bound = torch.where(divided, 2 * ulp, torch.zeros_like(ulp))
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


def _sumexp(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Over the last axis of float64 ``x``: ``m = max x``, ``S = sum exp(x - m)`` (0 where ``m``
    is ``-inf``), and the spread ``sum exp(x - m) * abs(x - m)``."""
    m = x.amax(-1)
    d = x - m[..., None]
    e = torch.where(torch.isfinite(d), d.exp(), torch.zeros_like(d))
    S = torch.where(m > float("-inf"), e.sum(-1), torch.zeros_like(m))
    spread = torch.where(e > 0, e * d.abs(), torch.zeros_like(e)).sum(-1)
    return m, S, spread


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
    x = torch.full((rows, nb * block), float("-inf"), dtype=torch.float32, device=dev)
    x[:, :V] = target[:, :V].to(torch.float32)
    xb = x.view(rows, nb, block)
    m32 = xb.amax(-1)
    arg = xb.argmax(-1) + torch.arange(nb, device=dev) * block  # the first of the maxima
    _, S, spread = _sumexp(xb.to(torch.float64))
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
    t = temperature.to(torch.float32)[:, None]
    t = torch.where(t == 0, torch.ones_like(t), t)  # greedy rows read no draft: any divisor
    d = torch.full((rows, nb * block), float("-inf"), dtype=torch.float32, device=dev)
    d[:, :V] = draft[:, :V].to(torch.float32)
    q32 = (d / t).view(rows, nb, block)  # the correctly rounded float32 quotients
    q = (d.to(torch.float64) / t.to(torch.float64)).view(rows, nb, block)
    qm = q32.amax(-1)
    md, Sd, spread_d = _sumexp(q)
    fin = torch.isfinite(q)
    extra = torch.where(fin, (q - md[..., None]).exp() * (q.abs() + md.abs()[..., None]), torch.zeros_like(q)).sum(-1)
    Sd32 = Sd.to(torch.float32)
    out["draft_local_max"] = (r, qm, 2 * _ulp32(qm))
    out["draft_local_sumexp"] = (r, Sd32, SUM_BLOCK * Sd + 2 * EXP_ARG * spread_d + 2 * DIV * extra + 0.5 * _ulp32(Sd32))
    return out
