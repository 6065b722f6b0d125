"""The extended tier of ``_temperature_kernel``: docs/CONTRACT.md §28.4.

A ``vocab_size`` narrower than the rows (a stride wider than the row: the tail untouched), any
``BLOCK_SIZE`` (the result does not depend on it), infinite logits and negative temperatures.
The oracles compute §28.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.runner_v2_verify import F32, I64, need
from .layout import build, random_logits

FEATURES = {
    "narrow_vocab": "vocab_size below the rows' width (a stride wider than the row): the tail untouched",
    "other_block": "a BLOCK_SIZE other than 8192",
    "infinite_logits": "+inf or -inf logits (divided as IEEE says)",
    "negative_temperature": "a temperature below 0",
}


def shapes(case: Case) -> tuple[int, int, int]:
    """``(num_tokens, W, R)`` after checking the arrays' dtypes and shapes."""
    a = case.arrays
    logits = need(a, "logits", F32, 2)
    T, W = logits.shape
    need(a, "expanded_idx_mapping", I64, 1, (T,))
    R = need(a, "temperature", F32, 1).shape[0]
    if T < 1 or W < 1:
        from ...core.errors import ContractViolation

        raise ContractViolation("arrays.logits", "must have a row and a column")
    return T, W, R


def validate(case: Case) -> None:
    """State rows inside ``temperature``, finite temperatures, no NaN logits, ``vocab_size`` in
    ``[1, W]``, ``BLOCK_SIZE`` a power of two from 16 to 8192."""
    from ...core.errors import ContractViolation

    T, W, R = shapes(case)
    a = case.arrays
    rows = a["expanded_idx_mapping"]
    if np.any(rows < 0) or np.any(rows >= R):
        raise ContractViolation("arrays.expanded_idx_mapping", f"must hold state rows in [0, {R})")
    if not np.all(np.isfinite(a["temperature"])):
        raise ContractViolation("arrays.temperature", "must be finite")
    if np.isnan(a["logits"]).any():
        raise ContractViolation("arrays.logits", "must hold no NaN")
    V = case.scalars.get("vocab_size", W)
    if not isinstance(V, int) or not 1 <= V <= W:
        raise ContractViolation("scalars.vocab_size", f"must be an int in [1, {W}]")
    bs = case.launch.get("BLOCK_SIZE", 8192)
    if bs is not None and (not isinstance(bs, int) or bs < 16 or bs > 8192 or bs & (bs - 1)):
        raise ContractViolation("launch.BLOCK_SIZE", "must be a power of two from 16 to 8192")


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    W = a["logits"].shape[1]
    V = case.scalars.get("vocab_size", W)
    temp = a["temperature"][a["expanded_idx_mapping"]]
    scaled = (temp != 0) & (temp != 1)
    checks = {
        "narrow_vocab": V < W,
        "other_block": case.launch.get("BLOCK_SIZE") not in (None, 8192),
        "infinite_logits": bool(np.isinf(a["logits"][scaled, :V]).any()),
        "negative_temperature": bool(np.any(temp < 0)),
    }
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 6 rows of up to 300 columns, some ``-inf``/``+inf``, temperatures of either sign, a
    narrower ``vocab_size`` and a smaller block now and then."""
    rng = np.random.default_rng(c.integer(0, 2**32 - 1))
    T, W = c.integer(1, 6), c.integer(1, 300)
    R = c.integer(1, 4)
    logits = random_logits(rng, T, W)
    if c.chance(0.5):
        logits[rng.random((T, W)) < 0.1] = np.inf
        logits[rng.random((T, W)) < 0.1] = -np.inf
    temp = np.asarray([c.choice([0.0, 1.0, 0.5, -0.5, -2.0, 3.0]) for _ in range(R)], np.float32)
    V = c.integer(1, W) if c.chance(0.5) else None
    block = c.choice([16, 64, 256, 8192]) if c.chance(0.5) else None
    return build(logits, rng.integers(0, R, size=T), temp, V, block)


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Fewer rows: each alone, then each left out."""
    T = case.arrays["logits"].shape[0]
    for keep in ([t] for t in range(T)):
        yield case.replace(arrays={"logits": case.arrays["logits"][keep].copy(),
                                   "expanded_idx_mapping": case.arrays["expanded_idx_mapping"][keep].copy()})
