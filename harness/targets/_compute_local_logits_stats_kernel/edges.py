"""The extended tier of ``_compute_local_logits_stats_kernel``: docs/CONTRACT.md §30.4.

A ``vocab_size`` below both widths (the columns past it are not read), random rows whose every
logit is ``-inf`` (a block's maximum ``-inf``, its sum ``0``), and ``-inf`` in the drafter's
logits. The oracles compute §30.1 on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.runner_v2_verify import draw_step
from .layout import build, keep_requests, requests

FEATURES = {
    "narrow_vocab": "vocab_size below both tables' widths",
    "row_all_masked": "a random row whose every logit is -inf (maximum -inf, sum 0)",
    "draft_masked": "-inf in the drafter's logits",
}


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    V = case.scalars["vocab_size"]
    widths = [a["target_logits"].shape[1]] + ([a["draft_logits"].shape[2]] if "draft_logits" in a else [])
    elp = a["expanded_local_pos"]
    starts, counts = requests(elp)
    bonus = np.zeros(len(elp), bool)
    bonus[starts + counts - 1] = True
    rnd = (a["temperature"][a["expanded_idx_mapping"]] != 0) & ~bonus
    draft = a.get("draft_logits")
    read = draft[a["expanded_idx_mapping"][rnd], elp[rnd], :V] if draft is not None and rnd.any() else np.zeros(0)
    checks = {
        "narrow_vocab": V < min(widths),
        "row_all_masked": bool(np.any(np.all(np.isneginf(a["target_logits"][rnd, :V]), axis=1))),
        "draft_masked": bool(np.isneginf(read).any()),
    }
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """A small step with one of the edges."""
    step = draw_step(c, B=c.integer(1, 4), K=c.integer(1, 4), V=c.choice([16, 300, 1000]))
    rng = np.random.default_rng(c.integer(0, 2**32 - 1))
    edge = c.choice(["narrow", "masked", "draft"])
    if edge == "narrow":
        return build(step, vocab_size=c.integer(1, max(1, step.V - 1)))
    if edge == "masked":
        tl_ = step.target_logits.copy()
        tl_[int(rng.integers(0, step.n))] = -np.inf
        return build(replace(step, target_logits=tl_))
    if step.draft_logits is None:
        return build(step)
    dl = step.draft_logits.copy()
    dl[np.isfinite(dl) & (rng.random(dl.shape) < 0.3)] = -np.inf
    return build(replace(step, draft_logits=dl))


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Each request alone."""
    B = len(requests(case.arrays["expanded_local_pos"])[0])
    for r in range(B) if B > 1 else ():
        yield keep_requests(case, [r])
