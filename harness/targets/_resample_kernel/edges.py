"""The extended tier of ``_resample_kernel``: docs/CONTRACT.md §34.4.

Blocks whose leading Gumbel values lie within their error bounds (a *window*: the run's winner
taken among the candidates) — ties built on purpose, and the residuals of a drafter that is the
target (every lane's ratio at 1: ``-inf`` or a rounding remainder) — and rejected rows'
log-sum-exps that are not their rows' (taken as given).
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
from ...targetkit.runner_v2_verify import chain, draw_step, keep_requests, step_view
from .layout import build, windows

FEATURES = {
    "window": "a block whose leading Gumbel values lie within their bounds (the run's winner taken)",
    "lse_as_given": "a rejected row's log-sum-exps other than its row's (taken as given)",
}


def lse_rule(case: Case, v: Any) -> None:
    """The rejected rows' log-sum-exps are their rows' (§33.1: within ``2**-14 (1 + |lse|)``)
    where the draw reads them (a random request's rejected draft with the drafter's logits)."""
    a = case.arrays
    if "draft_logits" not in a:
        return
    k = a["rejected_step"].astype(np.int64)
    j = v.first + k
    ds = a["draft_sampled"].astype(np.int64)
    read = ~v.greedy & (k < v.d) & (ds[np.minimum(j + 1, v.n - 1)] >= 0)
    for r in np.flatnonzero(read):
        s = v.idx[r]
        t = a["target_logits"][j[r], : v.V].astype(np.float64)
        q = a["draft_logits"][s, k[r], : v.V].astype(np.float32) / np.float32(a["temperature"][s])
        for name, x in (("target_rejected_logsumexp", t), ("draft_rejected_logsumexp", q.astype(np.float64))):
            m = np.max(x)
            want = m + np.log(np.sum(np.exp(x - m)))
            got = float(a[name][r])
            if not abs(got - want) <= 2.0**-14 * (1 + abs(want)):
                raise ContractViolation(f"arrays.{name}", f"must be the log-sum-exp of request {r}'s rejected row "
                                        f"({got!r}, the row's is {want!r})")


def features_of(case: Case) -> frozenset[str]:
    v = step_view(case, EXTENDED, stats=False)
    checks = {"window": bool(windows(case))}
    try:
        lse_rule(case, v)
        checks["lse_as_given"] = False
    except ContractViolation:
        checks["lse_as_given"] = True
    return frozenset(k for k, x in checks.items() if x)


def tied(c: Chooser) -> Case:
    """A random request without drafts (its bonus drawn from its target logits) whose lanes
    ``a`` and ``b`` get Gumbel values equal but for rounding, with the noise of its own key."""
    from ....oracles import vectorized_v2_verify as o

    step = draw_step(c, B=c.integer(1, 3), K=1, V=c.choice([16, 300, 1000]), method="standard", greedy=(0.0,),
                     same=False)  # fmt: skip
    cu = step.cu_num_logits.copy()
    nl = np.diff(cu.astype(np.int64))
    nl[0] = 1
    j = 0
    rows = np.concatenate([[0], np.arange(cu[1], cu[-1])]).astype(np.int64)
    step = replace(step, target_logits=step.target_logits[rows], draft_sampled=step.draft_sampled[rows], pos=step.pos[rows],
                   cu_num_logits=np.concatenate([[0], np.cumsum(nl)]).astype(np.int32),
                   fly_entropy=None if step.fly_entropy is None else step.fly_entropy[rows])  # fmt: skip
    s = int(step.idx_mapping[0])
    rng = np.random.default_rng(c.integer(0, 2**32 - 1))
    a_, b_ = sorted(rng.choice(min(step.V, 1024), size=2, replace=False).tolist())
    n, _ = o.gumbel_noise32(o.murmur3_uniform32(np.int64(step.seed[s]), np.int64(step.pos[j]), np.array([a_, b_], np.int64)))
    tl_ = step.target_logits.copy()
    tl_[j] = -30.0
    tl_[j, a_] = 5.0
    tl_[j, b_] = np.float32(5.0 + float(n[0]) - float(n[1]))
    step = replace(step, target_logits=tl_, use_fp64=False)
    return build(step, chain(step))


def body(c: Chooser, scale: Scale) -> Case:
    """A tied bonus draw, the residuals of a drafter that is the target, or a step whose
    rejected rows' target log-sum-exps are off."""
    edge = c.choice(["tied", "same", "lse"])
    if edge == "tied":
        return tied(c)
    step = draw_step(c, B=c.integer(1, 4), K=c.integer(1, 3), V=c.choice([16, 300]), greedy=(0.0, 0.3), draft=True,
                     same=edge == "same")  # fmt: skip
    case = build(step, chain(step))
    if edge == "same":
        return case
    t = case.arrays["target_rejected_logsumexp"].copy()
    t[np.isfinite(t)] += np.float32(c.choice([0.5, -1.0]))
    return case.replace(arrays={"target_rejected_logsumexp": t})


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Each request alone."""
    B = len(case.arrays["cu_num_logits"]) - 1
    for r in range(B) if B > 1 else ():
        yield keep_requests(case, [r])
