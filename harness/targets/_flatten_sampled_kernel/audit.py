"""What a caller of ``_flatten_sampled_kernel`` relies on (docs/CONTRACT.md §24).

``_get_logprobs_tensors`` gathers each sampled token's logprob at its logits row and reads the
rows no token was sampled from as 0 (the buffer is ``torch.zeros``): each row's tokens must land
in its own first logits rows, in order, and nothing else may be written."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def tokens_in_own_rows(case: Case, o: Observation) -> str | None:
    a = case.arrays
    cu = a["cu_num_logits"].astype(np.int64)
    got, w = o.out["flat_sampled"], o.written["flat_sampled"]
    for b, n in enumerate(a["num_sampled"].astype(np.int64)):
        want = a["sampled"][b, : max(n, 0)]
        if not np.array_equal(got[cu[b] : cu[b] + len(want)], want):
            return f"row {b}: logits rows {cu[b]}.. hold {got[cu[b] : cu[b] + len(want)].tolist()}, not {want.tolist()}"
        if np.any(w[cu[b] + len(want) : cu[b + 1]]):
            return f"row {b}: a logits row past its {len(want)} sampled token(s) is written"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("tokens_in_their_logits_rows", "a row's sampled tokens fill its first logits rows in order, the rest "
             "untouched", tokens_in_own_rows),
    Property("nothing_past_the_logits", "nothing is written outside the step's logits rows", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
