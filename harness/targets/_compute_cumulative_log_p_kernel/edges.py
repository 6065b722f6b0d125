"""The extended tier of ``_compute_cumulative_log_p_kernel``: docs/CONTRACT.md §31.4.

A ``PADDED_VOCAB_NUM_BLOCKS`` below the block count (only the first blocks' statistics read),
and statistics that are not §30's of the logits (the kernel takes them as given, the oracles
too). The oracles compute §31.1 on them unchanged.
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
from ...targetkit.runner_v2_verify import chain, check_stats, draw_step, keep_requests, step_view
from .layout import build

FEATURES = {
    "fewer_padded_blocks": "PADDED_VOCAB_NUM_BLOCKS below the block count (the first blocks' statistics only)",
    "stats_as_given": "statistics other than §30's of the logits (taken as given)",
}


def features_of(case: Case) -> frozenset[str]:
    pad = case.launch.get("PADDED_VOCAB_NUM_BLOCKS")
    checks = {"fewer_padded_blocks": pad is not None and pad < case.scalars["vocab_num_blocks"],
              "stats_as_given": not stats_are_30s(case)}
    return frozenset(k for k, v in checks.items() if v)


def stats_are_30s(case: Case) -> bool:
    """Whether the statistics the kernel reads are §30's of the case's logits."""
    v = step_view(case, EXTENDED, stats=False)
    try:
        check_stats(case.arrays, v.eidx, v.elp, np.flatnonzero(v.random_draft_rows), v.V)
    except ContractViolation:
        return False
    return True


def body(c: Chooser, scale: Scale) -> Case:
    """A block verification step of two blocks or more read through fewer padded blocks, or one
    whose random rows' sums are scaled (statistics as given)."""
    if c.boolean():
        step = draw_step(c, B=c.integer(1, 2), K=c.integer(1, 2), V=8192 + c.integer(1, 300),
                         method="block")  # fmt: skip
        return build(step, chain(step), padded=1 << c.integer(0, max(0, step.nb.bit_length() - 2)))
    step = draw_step(c, B=c.integer(1, 4), K=c.integer(1, 4), V=c.choice([16, 300]), method="block")
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
