"""What a caller of ``_rejection_kernel`` relies on (docs/CONTRACT.md §33).

``num_sampled`` is a count of drafts (``0 .. d_r``), the accepted tokens are the drafts
themselves, a greedy request's are its argmaxes and its correction the argmax of its first
rejected row.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from ...targetkit.runner_v2_verify import step_view
from .layout import method_of


def count_is_a_draft_count(case: Case, o: Observation) -> str | None:
    v = step_view(case, "extended", stats=False)
    k = o.out["num_sampled"].astype(np.int64)
    bad = np.flatnonzero((k < 0) | (k > v.d))
    return None if not bad.size else f"request {int(bad[0])}: count {int(k[bad[0]])} of {int(v.d[bad[0]])} drafts"


def accepted_are_the_drafts(case: Case, o: Observation) -> str | None:
    v = step_view(case, "extended", stats=False)
    if method_of(case) == "fly":
        return None  # FLy may keep a deferred rejection's draft inside the accepted prefix
    ds = case.arrays["draft_sampled"].astype(np.int64)
    k = o.out["num_sampled"].astype(np.int64)
    for r in range(len(v.idx)):
        for i in range(int(min(max(k[r], 0), v.d[r]))):
            if int(o.out["sampled"][r, i]) != ds[v.first[r] + i + 1]:
                return f"request {r}, slot {i}: {int(o.out['sampled'][r, i])} accepted, the draft is {ds[v.first[r] + i + 1]}"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("count_is_a_draft_count", "num_sampled counts accepted drafts: 0 .. the request's drafts",
             count_is_a_draft_count),
    Property("accepted_are_the_drafts", "the tokens before the count are the request's drafts, in order",
             accepted_are_the_drafts),
    Property("nothing_past_the_buffers", "nothing is written outside the outputs", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""


AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
