"""What a caller of ``_combine_sampled_and_draft_tokens_kernel`` relies on (docs/CONTRACT.md §16).

The model computes logits at ``logits_indices``, and the rejection sampler (§23) compares the
drafts it finds at those slots of ``input_ids``: every logits index must lie in its own row's
query (its last ``nl_b`` tokens, in order), a decoding row's drafts must follow its last sampled
token there, and a row still in its prompt must keep its prompt's ids."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def indices_in_own_query(case: Case, o: Observation) -> str | None:
    a = case.arrays
    q = a["query_start_loc"].astype(np.int64)
    cu = a["cu_num_logits"].astype(np.int64)
    got = o.out["logits_indices"]
    for b in range(len(q) - 1):
        want = np.arange(q[b + 1] - (cu[b + 1] - cu[b]), q[b + 1])
        if not np.array_equal(got[cu[b] : cu[b + 1]], want):
            return f"row {b}: logits indices {got[cu[b] : cu[b + 1]].tolist()}, not its query's last {want.tolist()}"
    return None


def prompt_ids_kept(case: Case, o: Observation) -> str | None:
    a = case.arrays
    q = a["query_start_loc"].astype(np.int64)
    seq = a["seq_lens"].astype(np.int64)
    L = a["prefill_len"].astype(np.int64)[a["idx_mapping"]]
    for b in np.flatnonzero(seq <= L):
        if np.any(o.written["input_ids"][q[b] : q[b + 1]]):
            return f"row {b} is still in its prompt (seq_len {seq[b]} <= prefill_len {L[b]}), yet an input id is written"
    return None


def drafts_follow_the_bonus(case: Case, o: Observation) -> str | None:
    a = case.arrays
    q = a["query_start_loc"].astype(np.int64)
    nl = np.diff(a["cu_num_logits"].astype(np.int64))
    seq = a["seq_lens"].astype(np.int64)
    s = a["idx_mapping"]
    L = a["prefill_len"].astype(np.int64)[s]
    for b in np.flatnonzero((seq > L) & (nl > 1)):
        d = int(nl[b]) - 1
        want = a["draft_tokens"][s[b], :d].astype(np.int32)
        got = o.out["input_ids"][q[b + 1] - d : q[b + 1]]
        if not np.array_equal(got, want):
            return f"row {b}: the slots after its bonus hold {got.tolist()}, not its drafts {want.tolist()}"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("logits_indices_in_own_query", "a row's logits indices are its query's last nl_b tokens, in order",
             indices_in_own_query),
    Property("prompt_ids_kept", "a row still in its prompt keeps its input ids", prompt_ids_kept),
    Property("drafts_follow_the_bonus", "a decoding row's drafts fill the slots after its bonus", drafts_follow_the_bonus),
    Property("nothing_past_the_buffers", "nothing is written outside input_ids and logits_indices",
             nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
