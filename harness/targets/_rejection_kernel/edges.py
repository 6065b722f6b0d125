"""The extended tier of ``_rejection_kernel``: docs/CONTRACT.md §33.4.

Acceptance tests whose margin lies within their error bound (a *window*: the run's decision is
taken, and everything after it checked against it), statistics that are not §30's of the logits
(taken as given), and a ``PADDED_VOCAB_NUM_BLOCKS`` below the block count.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from ...core.case import Case
from ...core.errors import ContractViolation
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.base import EXTENDED
from ...targetkit.runner_v2_verify import chain, check_stats, draw_step, keep_requests, step_view
from .layout import build, windows

FEATURES = {
    "window": "an acceptance test whose margin lies within its bound (the run's decision taken)",
    "stats_as_given": "statistics other than §30's of the logits (taken as given)",
    "fewer_padded_blocks": "PADDED_VOCAB_NUM_BLOCKS below the block count (the first blocks' statistics only)",
}


def features_of(case: Case) -> frozenset[str]:
    v = step_view(case, EXTENDED, stats=False)
    pad = case.launch.get("PADDED_VOCAB_NUM_BLOCKS")
    checks = {"window": bool(windows(case)), "fewer_padded_blocks": pad is not None and pad < v.nb}
    try:
        check_stats(case.arrays, v.eidx, v.elp, np.flatnonzero(v.random_draft_rows), v.V)
        checks["stats_as_given"] = False
    except ContractViolation:
        checks["stats_as_given"] = True
    return frozenset(k for k, x in checks.items() if x)


def at_the_margin(c: Chooser) -> Case:
    """A standard step of one-hot drafts whose first random request's first draft ``x`` has
    target probability ``u`` exactly (its uniform): ``log p(x) = log u`` but for rounding."""
    from ....oracles import vectorized_v2_verify as o

    step = draw_step(c, B=c.integer(1, 3), K=c.integer(1, 3), V=c.choice([8, 37, 300]), method="standard", draft=False,
                     min_drafts=1, greedy=(0.0,))  # fmt: skip
    j = int(step.cu_num_logits[0])
    ds = step.draft_sampled.copy()
    x = max(int(ds[j + 1]), 0)
    ds[j + 1] = x
    s = int(step.idx_mapping[0])
    u = float(o.tl_rand32(np.int64(step.seed[s]), np.int64(step.pos[j])))
    tl_ = step.target_logits.copy()
    tl_[j] = np.float32(np.log((1 - u) / (step.V - 1)))
    tl_[j, x] = np.float32(np.log(u))
    step = replace(step, target_logits=tl_, draft_sampled=ds)
    return build(step, chain(step))


def body(c: Chooser, scale: Scale) -> Case:
    """An acceptance at its margin, a step with its sums scaled, or one of two blocks read
    through fewer padded blocks."""
    edge = c.choice(["window", "stats", "padded"])
    if edge == "window":
        return at_the_margin(c)
    if edge == "padded":
        step = draw_step(c, B=c.integer(1, 2), K=c.integer(1, 2), V=8192 + c.integer(1, 300))
        return build(step, chain(step), padded=1)
    step = draw_step(c, B=c.integer(1, 4), K=c.integer(1, 4), V=c.choice([16, 300]), greedy=(0.0, 0.3))
    case = build(step, chain(step))
    s = case.arrays["target_local_sumexp"].copy()
    s[np.isfinite(s)] *= np.float32(c.choice([0.5, 1.7, 3.0]))
    return case.replace(arrays={"target_local_sumexp": s})


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Each request alone."""
    B = len(case.arrays["idx_mapping"])
    for r in range(B) if B > 1 else ():
        yield keep_requests(case, [r])
