"""What a caller of ``_get_num_sampled_and_rejected_kernel`` relies on (docs/CONTRACT.md §18).

``post_update`` (§19) moves each request's computed-token count on by ``query_len -
num_rejected`` and appends ``num_sampled`` tokens to its history; the drafter's prefill (§25)
keeps ``query_len - num_rejected`` tokens of the row. So every row's two counts must split its
logits (``num_sampled + num_rejected = logits``, both at least 0), and a row still prefilling
must have neither (its chunk is all computed, nothing sampled)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def _counts(case: Case, o: Observation) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    a = case.arrays
    nl = np.diff(a["cu_num_logits"].astype(np.int64))
    chunked = a["seq_lens"].astype(np.int64) < a["prefill_len"].astype(np.int64)[a["idx_mapping"]]
    return nl, o.out["num_sampled"].astype(np.int64), o.out["num_rejected"].astype(np.int64), chunked


def split_logits(case: Case, o: Observation) -> str | None:
    nl, ns, nr, chunked = _counts(case, o)
    for b in np.flatnonzero(~chunked):
        if ns[b] < 0 or nr[b] < 0 or ns[b] + nr[b] != nl[b]:
            return f"row {b}: num_sampled {ns[b]} + num_rejected {nr[b]} is not its {nl[b]} logits (both >= 0)"
    return None


def chunked_counts_nothing(case: Case, o: Observation) -> str | None:
    _, ns, nr, chunked = _counts(case, o)
    for b in np.flatnonzero(chunked):
        if ns[b] or nr[b]:
            return f"row {b} is still prefilling, yet num_sampled = {ns[b]}, num_rejected = {nr[b]}"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("counts_split_the_logits", "a row past its prompt: num_sampled + num_rejected = its logits, both >= 0",
             split_logits),
    Property("chunked_row_counts_nothing", "a row still prefilling: num_sampled = num_rejected = 0",
             chunked_counts_nothing),
    Property("nothing_past_num_reqs", "nothing is written outside the B rows", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
