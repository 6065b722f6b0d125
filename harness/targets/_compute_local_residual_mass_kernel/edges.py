"""The extended tier of ``_compute_local_residual_mass_kernel``: docs/CONTRACT.md §32.4.

A ``PADDED_VOCAB_NUM_BLOCKS`` below the block count, statistics that are not §30's of the logits
and joint log ratios that are not §31's (taken as given, by the kernel and the oracles alike).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...core.errors import ContractViolation
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.base import EXTENDED
from ...targetkit.runner_v2_verify import (
    chain,
    check_clp,
    check_stats,
    draw_step,
    keep_requests,
    request_count,
    step_view,
)
from .layout import build

FEATURES = {
    "fewer_padded_blocks": "PADDED_VOCAB_NUM_BLOCKS below the block count (the first blocks' statistics only)",
    "stats_as_given": "statistics other than §30's of the logits (taken as given)",
    "ratios_as_given": "joint log ratios other than §31's (taken as given)",
}


def read_rows(v: Any, ds: np.ndarray) -> np.ndarray:
    """The rows §32 computes: random draft rows past a request's first whose next draft is real."""
    rows = np.flatnonzero(v.random_draft_rows & (v.elp > 0))
    return rows[ds[rows + 1] >= 0]


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    v = step_view(case, EXTENDED, stats=False)
    rows = read_rows(v, a["draft_sampled"].astype(np.int64))
    checks = {"fewer_padded_blocks": case.launch.get("PADDED_VOCAB_NUM_BLOCKS") not in (None,) and
              case.launch["PADDED_VOCAB_NUM_BLOCKS"] < case.scalars["vocab_num_blocks"]}  # fmt: skip
    try:
        check_stats(a, v.eidx, v.elp, np.flatnonzero(v.random_draft_rows), v.V)
        checks["stats_as_given"] = False
    except ContractViolation:
        checks["stats_as_given"] = True
    try:
        check_clp(a, v, rows - 1)
        checks["ratios_as_given"] = False
    except ContractViolation:
        checks["ratios_as_given"] = True
    return frozenset(k for k, x in checks.items() if x)


def body(c: Chooser, scale: Scale) -> Case:
    """A step of two blocks or more read through fewer padded blocks, or one with its sums or
    its ratios changed."""
    edge = c.choice(["padded", "stats", "ratios"])
    if edge == "padded":
        step = draw_step(c, B=c.integer(1, 2), K=c.integer(1, 2), V=8192 + c.integer(1, 300),
                         method="block", draft=True)  # fmt: skip
        return build(step, chain(step), padded=1 << c.integer(0, max(0, step.nb.bit_length() - 2)))
    step = draw_step(c, B=c.integer(1, 4), K=c.integer(2, 4), V=c.choice([16, 300]), method="block", draft=True,
                     min_drafts=2)  # fmt: skip
    case = build(step, chain(step))
    if edge == "stats":
        s = case.arrays["draft_local_sumexp"].copy()
        s[np.isfinite(s)] *= np.float32(c.choice([0.5, 1.7]))
        return case.replace(arrays={"draft_local_sumexp": s})
    clp = case.arrays["cumulative_log_p"].copy()
    clp[np.isfinite(clp)] = np.minimum(clp[np.isfinite(clp)] * np.float32(0.5) - np.float32(0.25), 0)
    return case.replace(arrays={"cumulative_log_p": clp})


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Each request alone."""
    B = request_count(case)
    for r in range(B) if B > 1 else ():
        yield keep_requests(case, [r])
