"""The extended tier of ``_gumbel_sample_kernel``: docs/CONTRACT.md §29.4.

Blocks whose leading Gumbel values lie within their error bounds (a *window*: the run's winner
is taken among the candidates, docs/CONTRACT.md "Exactness"), positions from ``2**30`` on (where
the draft stream's salted counter can meet the target's: #47386's class), a logits cache wider
than the vocabulary, and random rows whose every logit is ``-inf``. The oracles compute §29.1 on
them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...core.errors import ContractViolation
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.runner_v2_verify import F32, I64, SAMPLE_BLOCK, need
from .cases import draw
from .layout import MODES, build, keep_rows, mode_of, windows

FEATURES = {
    "window": "a block whose leading Gumbel values lie within their bounds (the run's winner taken)",
    "positions_past_2_30": "a position at or past 2**30 (a drafting row's salted counter passes 2**31)",
    "cache_wider": "a logits cache wider than the vocabulary (its tail untouched)",
    "row_all_masked": "a random row whose every logit is -inf (each block's first lane wins)",
}


def shapes(case: Case) -> tuple[int, int, int]:
    """``(num_tokens, V, R)`` after checking the arrays' dtypes, shapes and the mode's arrays."""
    a = case.arrays
    T, V = need(a, "logits", F32, 2).shape
    need(a, "expanded_idx_mapping", I64, 1, (T,))
    need(a, "pos", I64, 1, (T,))
    R = need(a, "seeds", I64, 1).shape[0]
    need(a, "temperature", F32, 1, (R,))
    if T < 1 or V < 1:
        raise ContractViolation("arrays.logits", "must have a row and a column")
    s = case.scalars
    if not all(isinstance(s.get(k), bool) for k in ("apply_temperature", "is_drafting", "use_fp64")):
        raise ContractViolation("scalars.is_drafting", "apply_temperature, is_drafting and use_fp64 must be true/false")
    mode = mode_of(case)
    if mode == "target":
        if s["apply_temperature"] or set(a) & {"logits_cache", "logits_cache_cols", "logits_cache_source"} or "cache_col" in s:
            raise ContractViolation("scalars.apply_temperature", "the target's sampling applies no temperature and "
                                    "has no logits cache")
        return T, V, R
    cache = need(a, "logits_cache", F32, 3)
    if cache.shape[0] != R:
        raise ContractViolation("arrays.logits_cache", "must have max_num_reqs rows")
    K = cache.shape[1]
    if mode == "drafter":
        col = s.get("cache_col")
        if not isinstance(col, int) or not 0 <= col < K or set(a) & {"logits_cache_cols", "logits_cache_source"}:
            raise ContractViolation("scalars.cache_col", f"the drafter's step column must be an int in [0, {K})")
    else:
        cols = need(a, "logits_cache_cols", I64, 1, (T,))
        need(a, "logits_cache_source", F32, 2, (T, V))
        if np.any(cols < 0) or np.any(cols >= K) or "cache_col" in s:
            raise ContractViolation("arrays.logits_cache_cols", f"must hold columns in [0, {K})")
    return T, V, R


def check(case: Case, *, extended: bool) -> None:
    """§29.2's rules (``extended``: §29.4's) but the windows."""
    a = case.arrays
    T, V, R = shapes(case)
    mode = mode_of(case)
    rows = a["expanded_idx_mapping"]
    lo = 0 if mode == "target" else -1
    if np.any(rows < lo) or np.any(rows >= R):
        raise ContractViolation("arrays.expanded_idx_mapping", f"must hold state rows in [{lo}, {R})")
    real = rows[rows >= 0]
    if mode != "target" and len(np.unique(real)) != len(real):
        raise ContractViolation("arrays.expanded_idx_mapping", "the drafter's rows must name distinct state rows")
    t = a["temperature"]
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ContractViolation("arrays.temperature", "must be finite and >= 0")
    pos = a["pos"]
    if np.any(pos < 0) or (not extended and np.any(pos >= 1 << 20)):
        raise ContractViolation("arrays.pos", "must be positions >= 0" + ("" if extended else " below max_model_len (2**20)"))
    x = a["logits"]
    if np.isnan(x).any() or np.isposinf(x).any():
        raise ContractViolation("arrays.logits", "must hold no NaN or +inf")
    if "logits_cache" in a and (a["logits_cache"].shape[2] < V or (not extended and a["logits_cache"].shape[2] != V)):
        raise ContractViolation("arrays.logits_cache", "must be as wide as the vocabulary" + (" or wider" if extended else ""))
    if extended:
        return
    noisy = np.where(rows >= 0, t[np.maximum(rows, 0)], 0) != 0
    if mode == "target":
        if np.any(np.all(np.isneginf(x[noisy]), axis=1)) or np.isneginf(x[~noisy]).any():
            raise ContractViolation("arrays.logits", "a random row keeps a finite logit (top-k keeps one), a greedy "
                                    "row is finite")
    elif np.isneginf(x).any():
        raise ContractViolation("arrays.logits", "the draft model's logits must be finite")


def validate(case: Case) -> None:
    check(case, extended=True)


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    rows = a["expanded_idx_mapping"]
    noisy = np.where(rows >= 0, a["temperature"][np.maximum(rows, 0)], 0) != 0
    V = a["logits"].shape[1]
    checks = {
        "window": bool(windows(case)),
        "positions_past_2_30": bool(np.any(a["pos"] >= 1 << 30)),
        "cache_wider": "logits_cache" in a and a["logits_cache"].shape[2] > V,
        "row_all_masked": bool(np.any(np.all(np.isneginf(a["logits"][noisy]), axis=1))),
    }
    return frozenset(k for k, v in checks.items() if v)


def tied(rng: np.random.Generator, mode: str) -> Case:
    """A random row whose lanes ``a`` and ``b`` of one block get Gumbel values equal but for
    rounding: ``x_b = x_a + n_a - n_b`` with the noise of the row's own key (the window). The
    float32 noise path: the float64 path's bound (``2**-48``) is below a float32 logit's
    rounding, so float32 logits tie it only by chance."""
    fp64 = False
    from ....oracles import vectorized_v2_verify as o

    V = int(rng.choice([16, 300, 1500]))
    seed, p = int(rng.integers(-(2**63), 2**63 - 1)), int(rng.integers(0, 5000))
    a_, b_ = sorted(rng.choice(min(V, SAMPLE_BLOCK), size=2, replace=False).tolist())
    pe = p + (1 << 30) if mode != "target" else p
    T = np.float32(rng.choice([1.0, 0.5])) if mode != "drafter" else np.float32(1.0)
    col = 0
    key = o.spec_step_seed(np.int64(seed), np.int64(col)) if mode != "target" else np.int64(seed)
    u = (o.murmur3_uniform64 if fp64 else o.murmur3_uniform32)(key, np.int64(pe), np.array([a_, b_], np.int64))
    n, _ = (o.gumbel_noise64 if fp64 else o.gumbel_noise32)(u)
    logits = np.full((1, V), -30.0, np.float32)
    logits[0, a_] = np.float32(5.0)  # the drafter's temperature is 1: no division moves them
    logits[0, b_] = np.float32(5.0 + float(n[0]) - float(n[1]))
    cache = np.zeros((1, 1, V), np.float32) if mode != "target" else None
    source = logits.copy() if mode == "watermark" else None
    return build(logits, [0], [p], [seed], [T], mode, fp64=fp64, cache=cache,
                 col=0 if mode == "drafter" else ([0] if mode == "watermark" else None), source=source)  # fmt: skip


def body(c: Chooser, scale: Scale) -> Case:
    """A tied block now and then; else a small production draw with positions past ``2**30``, a
    wider cache or a row masked whole."""
    rng = np.random.default_rng(c.integer(0, 2**32 - 1))
    mode = c.choice(MODES)
    if c.chance(0.3):
        return tied(rng, mode)
    case = draw(c, c.integer(1, 6), c.choice([16, 300, 1100]), mode, max_pos=5000)
    a = case.arrays
    edge = c.choice(["positions", "cache", "masked"])
    if edge == "positions":
        pos = a["pos"].copy()
        pos[rng.random(len(pos)) < 0.5] += int(c.choice([1 << 30, (1 << 31) - 4000, 1 << 40]))
        return case.replace(arrays={"pos": pos})
    if edge == "cache" and "logits_cache" in a:
        wide = np.concatenate([a["logits_cache"], np.full(a["logits_cache"].shape[:2] + (5,), 3.0, np.float32)], axis=2)
        return case.replace(arrays={"logits_cache": wide})
    x = a["logits"].copy()
    x[int(rng.integers(0, len(x)))] = -np.inf
    return case.replace(arrays={"logits": x})


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Each row alone (its state row's seed and temperature kept)."""
    T = case.arrays["logits"].shape[0]
    for t in range(T) if T > 1 else ():
        yield keep_rows(case, [t])
