"""A plain reference of Model Runner V2's speculative verification (docs/CONTRACT.md §28-§35
end to end): what ``rejection_sample`` returns, from the textbook algorithms on whole
vocabularies.

No blocks, no statistics, no log-sum-exp tricks: per request and draft, the target's and the
draft's softmax over the whole vocabulary in float64, the acceptance rule of the method
(greedy match, synthetic rates, the probability-ratio test of speculative sampling, block
verification's joint ratio and residual mass, FLy's deferred rejections), and the next token
drawn by Gumbel-max from the residual ``max(p - q, 0)`` (or the target itself, less a one-hot
draft's token). The randomness is the contract's counter-based noise (its preface, "Noise"),
taken from ``vectorized_v2_verify``: the acceptance uniforms and Gumbel noise are the ones the
kernels draw, so the reference predicts the run's tokens, not just their distribution.

A decision whose margin is within :data:`WINDOW` (log space for the ratio test, relative for
block verification and the Gumbel argmax) is a window, settled as the contract's: the caller's
choice (the run's) is followed, else the nominal outcome. The window is wider than any
kernel's bound (the whole chain's errors add up), and still rare (a margin below ``2**-12``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .settlement import Settlement, Window
from .vectorized_v2_verify import (
    gumbel_noise32,
    gumbel_noise64,
    murmur3_uniform32,
    murmur3_uniform64,
    spec_step_seed,
    tl_rand32,
)

__all__ = ["WINDOW", "verify"]

WINDOW = 2.0**-12
"""The end-to-end window: log-space margin of the ratio test, relative margin elsewhere."""


def _softmax_log(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.max(x)
        return x - (m + np.log(np.sum(np.exp(x - m))))


def _choose(st: Settlement, choices, kind: str, key: tuple, options: tuple, nominal: Any, margin: float = np.nan) -> Any:
    c = nominal if choices is None else choices.get(key, nominal)
    if c not in options:
        raise ValueError(f"choice {c!r} for {key} is outside the window {options}")
    st.windows.append(Window(kind, key, options, c, float(margin), WINDOW))
    return c


def _gumbel_draw(z: np.ndarray, top: np.ndarray, seed: int, pos: int, noisy: bool, fp64: bool, st, choices,
                 key) -> int:  # fmt: skip
    """The token of greatest ``z_v + n_v`` (noise keyed by (seed, pos, v)); plain argmax when
    not ``noisy``. ``top``: where ``z`` is ``-inf`` only within the window (a residual that
    cancels), the most the run's value may be. A window when another lane may reach the
    winner within :data:`WINDOW`."""
    V = z.shape[0]
    if not noisy:
        return int(np.argmax(z))
    v = np.arange(V, dtype=np.int64)
    if fp64:
        n, _ = gumbel_noise64(murmur3_uniform64(seed, pos, v))
    else:
        n, _ = gumbel_noise32(murmur3_uniform32(seed, pos, v))
    with np.errstate(invalid="ignore"):
        g = z + n
        g = np.where(np.isnan(g), -np.inf, g)
        hi = np.where(np.isfinite(g), g + WINDOW * (1.0 + np.abs(g)), top + n)
        lo = np.where(np.isfinite(g), g - WINDOW * (1.0 + np.abs(g)), -np.inf)
    best = int(np.argmax(g))
    near = np.flatnonzero(np.where(np.isnan(hi), -np.inf, hi) >= np.max(lo))
    if len(near) > 1 and np.isfinite(np.max(hi)):
        return int(_choose(st, choices, "argmax", key, tuple(int(k) for k in near), best))
    return best


def verify(*, target_logits, draft_logits, draft_sampled, cu_num_logits, pos, idx_mapping, temperature, seed,
           num_speculative_steps: int, synthetic_conditional_rates=None, use_fp64: bool = False,
           use_block_verification: bool = False, fly_window_size: int = 0, fly_entropy=None,
           fly_entropy_threshold: float = 0.3, choices: Mapping[tuple, Any] | None = None,
           ) -> tuple[np.ndarray, np.ndarray, Settlement]:  # fmt: skip
    """``(sampled, num_sampled, settlement)`` of ``rejection_sample`` on these inputs:
    ``sampled[r, :num_sampled[r]]`` are request ``r``'s tokens (the rest ``-1``). Window keys:
    ``("req", r, "step", i)`` for acceptance, ``("req", r, "draw")`` for the final draw."""
    tl_ = np.asarray(target_logits)
    Vt = tl_.shape[1]
    dl = None if draft_logits is None else np.asarray(draft_logits)
    V = Vt if dl is None else min(Vt, dl.shape[2])
    cu = np.asarray(cu_num_logits).astype(np.int64)
    B = len(cu) - 1
    ds = np.asarray(draft_sampled).astype(np.int64)
    P = np.asarray(pos).astype(np.int64)
    st = Settlement()
    sampled = np.full((B, num_speculative_steps + 1), -1, dtype=np.int64)
    num = np.zeros(B, dtype=np.int32)
    fly = int(fly_window_size)
    thr = np.float32(fly_entropy_threshold)
    for r in range(B):
        s = int(idx_mapping[r])
        T = np.float32(temperature[s])
        greedy = T == 0
        d = int(cu[r + 1] - cu[r] - 1)
        rows = [int(cu[r]) + i for i in range(d + 1)]

        def logp(j: int) -> np.ndarray:
            return _softmax_log(tl_[j, :V].astype(np.float32).astype(np.float64))

        def logq(j: int, i: int, s: int = s, T: np.float32 = T) -> np.ndarray:
            return _softmax_log(dl[s, i, :V].astype(np.float32).astype(np.float64) / np.float64(T))

        def u_at(i: int, s: int = s, rows: list[int] = rows) -> float:
            sd = spec_step_seed(np.int64(seed[s]), i) if use_block_verification else np.int64(seed[s])
            return float(tl_rand32(sd, P[rows[i]]))

        tokens: list[int] = []
        acc = 0
        joint: list[float] = []
        if greedy or not use_block_verification:
            pending = -1
            rej = 0
            for i in range(d):
                j = rows[i]
                x = int(ds[j + 1])
                valid = x >= 0
                if not valid and not greedy and fly == 0:
                    break
                xc = max(x, 0)
                u = u_at(i)
                am = int(np.argmax(tl_[j, :V].astype(np.float32))) if greedy else 0
                if greedy:
                    ok = (u < np.float32(synthetic_conditional_rates[i])) if synthetic_conditional_rates is not None else am == xc
                    ok = bool(ok) and valid
                    defer = valid and np.float32(tl_[j, xc]) > -np.inf
                else:
                    lp = logp(j)[xc] if valid else -np.inf
                    lq = (logq(j, i)[xc] if valid else -np.inf) if dl is not None else 0.0
                    if synthetic_conditional_rates is not None:
                        ok = bool(u < np.float32(synthetic_conditional_rates[i]))
                    else:
                        with np.errstate(invalid="ignore"):
                            margin = lp - (np.log(u) + lq)
                        ok = bool(margin > 0)
                        if np.isfinite(margin) and abs(margin) <= WINDOW:
                            ok = bool(_choose(st, choices, "accept", ("req", r, "step", i), (False, True), ok, margin))
                    if fly > 0:
                        ok = ok and valid
                    defer = valid and lp > -np.inf and lq > -np.inf
                if fly == 0:
                    if not ok:
                        if greedy:
                            tokens.append(am)
                        break
                    tokens.append(xc)
                    acc += 1
                    continue
                if pending >= 0:
                    if not ok:
                        break
                    if i - pending == fly:
                        acc, pending = i + 1, -1
                elif ok:
                    acc = i + 1
                else:
                    rej = am
                    if defer and i + fly < d and np.float32(fly_entropy[j]) >= thr:
                        pending = i
                    else:
                        break
            if fly > 0:
                tokens = [max(int(ds[rows[i] + 1]), 0) for i in range(acc)]
                if greedy and acc < d:
                    tokens.append(rej)
        else:
            # block verification (Sun et al., 2024) of a random request
            log_p = 0.0
            for i in range(d):
                x = int(ds[rows[i] + 1])
                if x >= 0:
                    lq = logq(rows[i], i)[x] if dl is not None else 0.0
                    log_p = min(log_p + (logp(rows[i])[x] - lq), 0.0)
                joint.append(log_p)
            for i in range(d):
                if int(ds[rows[i] + 1]) < 0:
                    break
                p_i = float(np.exp(joint[i]))
                nxt = int(ds[rows[i] + 2]) if i < d - 1 else -1
                if nxt >= 0:
                    Pn = np.exp(logp(rows[i + 1]))
                    Qn = np.exp(logq(rows[i + 1], i + 1)) if dl is not None else np.eye(1, V, nxt)[0]
                    R = float(np.sum(np.maximum(p_i * Pn - Qn, 0.0)))
                    D = R + 1.0 - p_i
                    h = R / D if D > 0 else 1.0
                    near_zero = abs(D) <= WINDOW * (1.0 + R + p_i)
                else:
                    h, near_zero = p_i, False
                u = u_at(i)
                ok = u <= h
                if near_zero or abs(h - u) <= WINDOW * (1.0 + h):
                    ok = bool(_choose(st, choices, "accept", ("req", r, "step", i), (False, True), ok, h - u))
                if ok:
                    acc = i + 1
            tokens = [int(ds[rows[i] + 1]) for i in range(acc)]
        # the draw at row cu[r] + acc: the bonus, or the rejected draft's residual
        if not (greedy and acc < d):
            j = rows[acc]
            bonus = acc == d
            y = -1 if bonus else int(ds[j + 1])
            z = tl_[j, :V].astype(np.float32).astype(np.float64)
            top = np.full(V, -np.inf)
            if not bonus and y >= 0:
                if dl is not None:
                    lp = logp(j)
                    if use_block_verification and acc > 0:
                        lp = lp + joint[acc - 1]
                    a, b = np.exp(lp), np.exp(logq(j, acc))
                    cancels = np.abs(a - b) <= WINDOW * np.maximum(a, b)
                    with np.errstate(divide="ignore"):
                        z = np.where(cancels, -np.inf, np.log(np.maximum(a - b, 0.0)))
                        top = np.where(cancels & (a > 0), np.log(WINDOW * np.maximum(a, b)), -np.inf)
                else:
                    z = z.copy()
                    z[y] = -np.inf
            tokens.append(_gumbel_draw(z, top, int(seed[s]), int(P[j]), not greedy, use_fp64, st, choices,
                                       ("req", r, "draw")))  # fmt: skip
        num[r] = len(tokens)
        sampled[r, : len(tokens)] = tokens
    return sampled, num, st
