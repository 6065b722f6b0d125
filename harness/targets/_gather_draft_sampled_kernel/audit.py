"""What a caller of ``_gather_draft_sampled_kernel`` relies on (docs/CONTRACT.md §23).

The rejection kernels verify ``draft_sampled[j]`` against the target's sample at logits row
``j``: it must be the draft in that row's slot of the input ids, or ``-1`` exactly where the
row's step started inside the prompt (a draft slot that holds no draft), never ``-1`` for a
row's first logits row; ``pos[j]`` must be that slot's position."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def draft_or_placeholder(case: Case, o: Observation) -> str | None:
    a = case.arrays
    ti = a["logits_indices"]
    lp = a["expanded_local_pos"].astype(np.int64)
    p = a["positions"][ti]
    L = a["prefill_len"].astype(np.int64)[a["expanded_idx_mapping"]]
    placeholder = (lp > 0) & (p - lp < L)
    want = np.where(placeholder, -1, a["input_ids"][ti])
    bad = np.flatnonzero(o.out["draft_sampled"] != want)
    if bad.size:
        j = int(bad[0])
        return f"logits row {j}: draft_sampled = {int(o.out['draft_sampled'][j])}, not {int(want[j])}"
    return None


def position_of_the_slot(case: Case, o: Observation) -> str | None:
    want = case.arrays["positions"][case.arrays["logits_indices"]]
    bad = np.flatnonzero(o.out["pos"] != want)
    return f"logits row {int(bad[0])}: pos = {int(o.out['pos'][bad[0]])}, not {int(want[bad[0]])}" if bad.size else None


PROPERTIES: tuple[Property, ...] = (
    Property("draft_or_placeholder", "each logits row holds the draft in its slot, or -1 where its step started "
             "inside the prompt", draft_or_placeholder),
    Property("position_of_the_slot", "each logits row holds its slot's position", position_of_the_slot),
    Property("nothing_past_the_logits", "nothing is written outside the num_logits rows", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
