"""What a caller of ``eagle_prepare_inputs_padded_kernel`` relies on (docs/CONTRACT.md §2): the properties ``eaglefuzz audit``
checks on one implementation's outputs (:mod:`...checking.audit`)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def _pi(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    R = int(case.scalars["num_reqs"])
    qsl = case.arrays["query_start_loc"].astype(np.int64)
    cu = case.arrays["cu_num_draft_tokens"].astype(np.int64)
    d = np.diff(np.concatenate([[0], cu]))
    return qsl[:R], qsl[1 : R + 1], d, R


def pi_index_in_request(case: Case, o: Observation) -> str | None:
    qs, nqs, _, R = _pi(case)
    idx, w = o.out["token_indices_to_sample"], o.written["token_indices_to_sample"]
    for r in range(R):
        if not w[r]:
            return f"token_indices_to_sample[{r}] is never written"
        if not qs[r] <= idx[r] <= nqs[r] - 1:
            return f"token_indices_to_sample[{r}] = {int(idx[r])}, outside request {r}'s tokens [{qs[r]}, {nqs[r]})"
    return None


def pi_rejected_within_drafts(case: Case, o: Observation) -> str | None:
    _, _, d, R = _pi(case)
    rej = o.out["num_rejected_tokens"]
    for r in range(R):
        if not 0 <= rej[r] <= max(d[r], 0):
            return f"num_rejected_tokens[{r}] = {int(rej[r])}, outside [0, d = {max(int(d[r]), 0)}]"
    return None


def pi_index_matches_rejected(case: Case, o: Observation) -> str | None:
    _, nqs, _, R = _pi(case)
    idx, rej = o.out["token_indices_to_sample"].astype(np.int64), o.out["num_rejected_tokens"].astype(np.int64)
    for r in range(R):
        if idx[r] != nqs[r] - 1 - rej[r]:
            return f"request {r}: token_indices_to_sample = {idx[r]} but the last token minus the rejected = {nqs[r] - 1 - rej[r]}"
    return None


PROPERTIES: tuple[Property, ...] = (
        Property("index_to_sample_in_request", "the index to sample lies inside its request's tokens", pi_index_in_request),
        Property("rejected_within_drafts", "0 <= num_rejected_tokens <= the request's drafts", pi_rejected_within_drafts),
        Property("index_matches_rejected", "index to sample = the request's last token - num_rejected_tokens",
                 pi_index_matches_rejected),
        Property("nothing_past_num_reqs", "nothing is written outside the num_reqs entries", nothing_past_num_reqs),
    )
"""The properties, in the order the audit reports them."""


AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
