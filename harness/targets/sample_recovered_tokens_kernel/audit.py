"""What a caller of ``sample_recovered_tokens_kernel`` relies on (docs/CONTRACT.md §13): the
properties ``eaglefuzz audit`` checks on one implementation's outputs (:mod:`...checking.audit`).

``rejection_random_sample_kernel`` writes a recovered id wherever a draft is rejected: every
processed token's id must be written and be a token of the vocabulary (0 .. V - 1)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.draft_rows import Rows
from ...targetkit.properties import Audit, Observation, Property


def _processed(case: Case) -> np.ndarray:
    rows = Rows.of(case.arrays["cu_num_draft_tokens"])
    L = case.scalars["max_spec_len"]
    t = [int(rows.s[r]) + j for r in range(rows.B) for j in range(min(max(int(rows.d[r]), 0), L))]
    return np.array(t, dtype=np.int64)


def every_token_written(case: Case, o: Observation) -> str | None:
    t = _processed(case)
    missing = t[~o.written["output_token_ids"][t]] if t.size else t
    return f"token {int(missing[0])} has no recovered id" if missing.size else None


def ids_in_vocab(case: Case, o: Observation) -> str | None:
    V = case.scalars["vocab_size"]
    if V == 0:
        return None
    t = _processed(case)
    ids = o.out["output_token_ids"][t] if t.size else t
    bad = np.flatnonzero((ids < 0) | (ids >= V))
    return f"token {int(t[bad[0]])}: recovered id {int(ids[bad[0]])} is outside 0 .. {V - 1}" if bad.size else None


PROPERTIES: tuple[Property, ...] = (
    Property("every_token_written", "every processed token gets a recovered id", every_token_written),
    Property("ids_in_vocab", "every recovered id is a token of the vocabulary", ids_in_vocab),
)
"""The properties, in the order the audit reports them."""


AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
