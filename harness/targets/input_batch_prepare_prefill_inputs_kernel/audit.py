"""What a caller of ``input_batch_prepare_prefill_inputs_kernel`` relies on (docs/CONTRACT.md §14).

The model reads a prefilling row's input ids from its query range, and the drafter reads
``next_prefill_tokens[0, s]`` as the token after the chunk (§25): a prefilling row's ids must be
its prompt's tokens from its computed count on, its lookahead the prompt's next tokens or 0 past
it, and a decoding row's ids (written by §16) must not be touched."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def _rows(case: Case):
    a = case.arrays
    s = a["idx_mapping"]
    q = a["query_start_loc"].astype(np.int64)
    c = a["num_computed_tokens"].astype(np.int64)[s]
    L = a["prefill_len"].astype(np.int64)[s]
    return a["all_token_ids"], s, q, c, L


def prompt_copied(case: Case, o: Observation) -> str | None:
    table, s, q, c, L = _rows(case)
    for b in range(len(s)):
        got = o.out["input_ids"][q[b] : q[b + 1]]
        if c[b] < L[b]:
            want = table[s[b], c[b] : c[b] + q[b + 1] - q[b]]
            if not np.array_equal(got, want):
                return f"row {b}: input ids {got[:4].tolist()}... not its prompt's {want[:4].tolist()}... from token {c[b]}"
        elif np.any(o.written["input_ids"][q[b] : q[b + 1]]):
            return f"row {b} is decoding (count {c[b]} >= prompt {L[b]}), yet its input ids are written"
    return None


def lookahead_is_next_prompt_tokens(case: Case, o: Observation) -> str | None:
    table, s, q, c, L = _rows(case)
    got = o.out["next_prefill_tokens"]
    for b in range(len(s)):
        if c[b] >= L[b]:
            continue
        for k in range(got.shape[0]):
            p = c[b] + q[b + 1] - q[b] + k
            want = int(table[s[b], p]) if p < L[b] else 0
            if got[k, s[b]] != want:
                return f"row {b}: lookahead {k} = {int(got[k, s[b]])}, not {want} (prompt position {p} of {L[b]})"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("prefill_ids_are_the_prompt", "a prefilling row's ids are its prompt from its count on; a decoding "
             "row's are untouched", prompt_copied),
    Property("lookahead_is_the_next_prompt_tokens", "a prefilling row's lookahead: the prompt's next tokens, 0 past "
             "it", lookahead_is_next_prompt_tokens),
    Property("nothing_past_the_buffers", "nothing is written outside input_ids and next_prefill_tokens",
             nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
