"""What a caller of ``_post_update_num_computed_tokens_kernel`` relies on (docs/CONTRACT.md §20):
the properties ``eaglefuzz audit`` checks on one implementation's outputs.

The next step's ``prepare_inputs`` reads ``num_computed_tokens[s]`` as where the request's next
chunk starts (its positions, §15; its prefill copy, §14): each scheduled request's count must
have grown by exactly the tokens it computed, and no other request's count may move."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def grows_by_query(case: Case, o: Observation) -> str | None:
    s = case.arrays["idx_mapping"]
    qlen = np.diff(case.arrays["query_start_loc"].astype(np.int64))
    before = case.arrays["num_computed_tokens"].astype(np.int64)
    after = o.out["num_computed_tokens"].astype(np.int64)
    for b, r in enumerate(s):
        if after[r] != before[r] + qlen[b]:
            return f"row {b} (state row {r}): num_computed_tokens = {after[r]}, not {before[r]} + {qlen[b]}"
    return None


def others_untouched(case: Case, o: Observation) -> str | None:
    moved = np.flatnonzero(o.written["num_computed_tokens"])
    stray = sorted(set(moved.tolist()) - set(case.arrays["idx_mapping"].tolist()))
    return f"num_computed_tokens[{stray[0]}] changed, and no batch row names state row {stray[0]}" if stray else None


PROPERTIES: tuple[Property, ...] = (
    Property("count_grows_by_query", "each scheduled request's count grows by its query length", grows_by_query),
    Property("other_requests_untouched", "no other state row's count changes", others_untouched),
    Property("nothing_past_the_state", "nothing is written outside num_computed_tokens", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
