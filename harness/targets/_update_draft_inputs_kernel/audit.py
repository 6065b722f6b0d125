"""What a caller of ``_update_draft_inputs_kernel`` relies on (docs/CONTRACT.md §27).

The drafts are read from ``output_draft_tokens[b, :K]`` once the last step is done, and the next
draft step attends with the positions and lengths: each row's draft must land in its own column
``step``, nothing else of the row may change, and its position and length must never pass the
model's length."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def draft_in_its_column(case: Case, o: Observation) -> str | None:
    step = int(case.arrays["current_draft_step"][0])
    got, w = o.out["output_draft_tokens"], o.written["output_draft_tokens"]
    for b, d in enumerate(case.arrays["draft_tokens"]):
        if got[b, step] != d or np.any(np.delete(w[b], step)):
            return f"row {b}: its draft {int(d)} is not alone in column {step}: {got[b].tolist()}"
    return None


def within_model_length(case: Case, o: Observation) -> str | None:
    B, M = case.scalars["num_reqs"], case.scalars["max_model_len"]
    for b in range(B):
        p, s = int(o.out["positions"][b]), int(o.out["seq_lens"][b])
        if not 0 <= p <= M - 1 or not 1 <= s <= M:
            return f"row {b}: position {p}, length {s}, outside the model's {M} tokens"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("draft_in_its_column", "each row's draft lands in column step of its row, alone", draft_in_its_column),
    Property("within_the_model_length", "positions in [0, max_model_len), lengths in [1, max_model_len]",
             within_model_length),
    Property("nothing_past_the_buffers", "nothing is written outside the drafter's buffers", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
