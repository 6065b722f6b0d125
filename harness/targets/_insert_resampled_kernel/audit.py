"""What a caller of ``_insert_resampled_kernel`` relies on (docs/CONTRACT.md §35).

``rejection_sample`` returns ``sampled`` and ``num_sampled`` as they leave this kernel, and the
model runner reads a request's first ``num_sampled`` tokens: each count must go up by exactly
one, the token inserted must be the winner of a block of greatest value (never a padded
block's, never a NaN block's while a number is left), the accepted tokens before it must stay,
and nothing else may be written."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from .layout import requests


def count_up_by_one(case: Case, o: Observation) -> str | None:
    k = case.arrays["num_sampled"].astype(np.int64)
    got = o.out["num_sampled"].astype(np.int64)
    bad = np.flatnonzero(got != k + 1)
    return None if not bad.size else f"request {int(bad[0])}: count {int(got[bad[0]])} after {int(k[bad[0]])}"


def greatest_block_inserted(case: Case, o: Observation) -> str | None:
    a = case.arrays
    _, _, k, drawn = requests(case)
    nb = case.scalars["resample_num_blocks"]
    nb = min(nb, case.launch.get("PADDED_RESAMPLE_NUM_BLOCKS") or nb)  # the blocks the launch compares
    m = a["resampled_local_max"][:, :nb].astype(np.float64)
    m = np.where(np.isnan(m), -np.inf, m)
    for r in np.flatnonzero(drawn):
        tok = int(o.out["sampled"][r, k[r]])
        best = np.flatnonzero(m[r] == m[r].max())
        if tok not in set(a["resampled_local_argmax"][r, best].tolist()):
            return f"request {r} gets token {tok}, no winner of a block of greatest value {m[r].max()!r}"
    return None


def only_the_drawn_slot(case: Case, o: Observation) -> str | None:
    _, _, k, drawn = requests(case)
    w = o.written["sampled"].copy()
    for r in np.flatnonzero(drawn):
        w[r, k[r]] = False
    changed = w & (o.out["sampled"] != case.arrays["sampled"])
    if changed.any():
        r, s = (int(x[0]) for x in np.nonzero(changed))
        return f"sampled[{r}, {s}] changed: only a drawn request's slot num_sampled is written"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("count_up_by_one", "every request's count goes up by exactly one", count_up_by_one),
    Property("greatest_block_inserted", "the token inserted is the winner of a block of greatest value (NaN as -inf)",
             greatest_block_inserted),
    Property("only_the_drawn_slot", "the accepted tokens stay; only a drawn request's next slot is written",
             only_the_drawn_slot),
    Property("nothing_past_the_buffers", "nothing is written outside sampled and num_sampled", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
