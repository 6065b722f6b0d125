"""The extended tier of ``_insert_resampled_kernel``: docs/CONTRACT.md §35.4.

NaN block values (from NaN logits: taken as ``-inf``), ``PADDED_RESAMPLE_NUM_BLOCKS`` below the
block count (the first blocks alone compared), and block values tied exactly (the first block
of the greatest wins).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale
from ...targetkit.runner_v2_verify import chain, draw_step, keep_requests
from .layout import build, requests

FEATURES = {
    "nan_block": "a NaN block value where read (taken as -inf)",
    "fewer_padded_blocks": "PADDED_RESAMPLE_NUM_BLOCKS below the block count (the first blocks only)",
    "tied_blocks": "two blocks of the greatest value exactly (the first wins)",
}


def features_of(case: Case) -> frozenset[str]:
    _, _, _, drawn = requests(case)
    nb = case.scalars["resample_num_blocks"]
    m = case.arrays["resampled_local_max"][drawn, :nb].astype(np.float64)
    pad = case.launch.get("PADDED_RESAMPLE_NUM_BLOCKS")
    mx = np.max(np.where(np.isnan(m), -np.inf, m), axis=1, initial=-np.inf)
    checks = {"nan_block": bool(np.isnan(m).any()), "fewer_padded_blocks": pad is not None and pad < nb,
              "tied_blocks": bool(np.any((np.sum(m == mx[:, None], axis=1) > 1) & np.isfinite(mx)))}
    return frozenset(k for k, x in checks.items() if x)


def body(c: Chooser, scale: Scale) -> Case:
    """A step over 2 to 5 blocks of 1024 whose drawn requests get a NaN block, a tie of their
    greatest block with another, or a padded block count below the blocks."""
    V = 1024 * c.integer(1, 4) + c.integer(1, 1000)
    step = draw_step(c, B=c.integer(1, 4), K=c.integer(1, 3), V=V, greedy=(0.0, 0.3))
    edge = c.choice(["nan", "tie", "padded"])
    if edge == "padded":
        return build(step, chain(step), padded=1 << c.integer(0, max(0, step.rnb.bit_length() - 2)))
    case = build(step, chain(step))
    _, _, _, drawn = requests(case)
    m = case.arrays["resampled_local_max"].copy()
    rng = np.random.default_rng(c.integer(0, 2**32 - 1))
    for r in np.flatnonzero(drawn):
        b = int(rng.integers(0, step.rnb))
        if edge == "nan":
            m[r, b] = np.nan
        else:
            m[r, b] = np.max(m[r, : step.rnb])
    return case.replace(arrays={"resampled_local_max": m})


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Each request alone."""
    B = len(case.arrays["num_sampled"])
    for r in range(B) if B > 1 else ():
        yield keep_requests(case, [r])
