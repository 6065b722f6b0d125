"""What a caller of ``_expand_idx_mapping_kernel`` relies on (docs/CONTRACT.md §17).

The rejection sampler (§23) and the samplers gather per logits row with these maps: every
logits row must name its own request's state row and its position among that request's logits
(``0`` for the first, counting up), and nothing may be written past the step's logits."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def names_its_request(case: Case, o: Observation) -> str | None:
    cu = case.arrays["cu_num_logits"].astype(np.int64)
    s = case.arrays["idx_mapping"]
    got = o.out["expanded_idx_mapping"]
    for b in range(len(s)):
        for j in range(cu[b], cu[b + 1]):
            if got[j] != s[b]:
                return f"logits row {j} (row {b}) names state row {int(got[j])}, not {int(s[b])}"
    return None


def counts_up(case: Case, o: Observation) -> str | None:
    cu = case.arrays["cu_num_logits"].astype(np.int64)
    got = o.out["expanded_local_pos"]
    for b in range(len(cu) - 1):
        want = np.arange(cu[b + 1] - cu[b])
        if not np.array_equal(got[cu[b] : cu[b + 1]], want):
            return f"row {b}: local positions {got[cu[b] : cu[b + 1]].tolist()}, not {want.tolist()}"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("logits_row_names_its_request", "every logits row holds its request's state row", names_its_request),
    Property("local_positions_count_up", "a request's logits rows hold 0, 1, 2, ...", counts_up),
    Property("nothing_past_the_logits", "nothing is written outside the step's logits rows", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
