"""What a caller of ``rejection_random_sample_kernel`` relies on (docs/CONTRACT.md §11): the
properties ``eaglefuzz audit`` checks on one implementation's outputs (:mod:`...checking.audit`).

``RejectionSampler.parse_output`` reads a row as its ids up to the first ``-1``
(``PLACEHOLDER_TOKEN_ID``): a processed row must be a prefix of accepted drafts, then one id,
then nothing written; no written id may be ``-1``; an unprocessed row is not written."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.draft_rows import Rows
from ...targetkit.properties import Observation, Property


def _rows(case: Case, o: Observation) -> tuple[np.ndarray, np.ndarray, Rows, np.ndarray]:
    out = o.out["output_token_ids"].reshape(-1, case.scalars["max_spec_len"] + 1)
    wr = o.written["output_token_ids"].reshape(out.shape)
    rows = Rows.of(case.arrays["cu_num_draft_tokens"])
    processed = ~case.arrays["is_greedy"].astype(bool)  # the random requests
    return out, wr, rows, processed


def row_is_prefix(case: Case, o: Observation) -> str | None:
    out, wr, rows, processed = _rows(case, o)
    for r in range(rows.B):
        w = np.flatnonzero(wr[r])
        if not processed[r]:
            if w.size:
                return f"request {r} is not processed here but slot {int(w[0])} of its row is written"
            continue
        if w.size == 0 or not np.array_equal(w, np.arange(w.size)):
            return f"request {r}: the written slots {w.tolist()[:8]} are not a prefix 0 .. k of its row"
        if w.size > int(rows.d[r]) + 1:
            return f"request {r}: {w.size} slots written, more than its {int(rows.d[r])} drafts + 1"
        drafts = case.arrays["draft_token_ids"][int(rows.s[r]) : int(rows.s[r]) + w.size - 1]
        if not np.array_equal(out[r, : w.size - 1], drafts):
            return f"request {r}: the accepted slots {out[r, : w.size - 1].tolist()[:8]} are not its drafts {drafts.tolist()[:8]}"
    return None


def no_placeholder_written(case: Case, o: Observation) -> str | None:
    out, wr, rows, processed = _rows(case, o)
    bad = np.argwhere(wr & (out == -1))
    if bad.size:
        r, j = (int(x) for x in bad[0])
        return f"request {r}: slot {j} is written with -1, which the caller reads as the end of the row"
    return None


def ids_in_vocab(case: Case, o: Observation) -> str | None:
    out, wr, rows, processed = _rows(case, o)
    V = case.scalars["vocab_size"]
    bad = np.argwhere(wr & ((out < 0) | (out >= V)) & (out != -1))
    if bad.size:
        r, j = (int(x) for x in bad[0])
        return f"request {r}: slot {j} holds {int(out[r, j])}, outside the vocabulary 0 .. {V - 1}"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("row_is_accepted_prefix", "a processed row is its accepted drafts, then one id, then nothing written; "
             "an unprocessed row is not written", row_is_prefix),
    Property("no_placeholder_written", "no written slot holds -1 (PLACEHOLDER_TOKEN_ID ends a row)", no_placeholder_written),
    Property("ids_in_vocab", "every written id is a token of the vocabulary", ids_in_vocab),
)
"""The properties, in the order the audit reports them."""
