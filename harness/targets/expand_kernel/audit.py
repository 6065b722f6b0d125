"""What a caller of ``expand_kernel`` relies on (docs/CONTRACT.md §12): the properties
``eaglefuzz audit`` checks on one implementation's outputs (:mod:`...checking.audit`).

``apply_sampling_constraints`` divides every token's logits by its expanded temperature (and
masks by its top-k/top-p): every token of ``[0, cu[B-1])`` must be written, with its request's
value (``replace_to`` where it was ``replace_from``)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.draft_rows import Rows
from ...targetkit.properties import Audit, Observation, Property


def every_token_written(case: Case, o: Observation) -> str | None:
    rows = Rows.of(case.arrays["cu_num_tokens"])
    wr = o.written["output"]
    m = case.launch.get("max_num_tokens")
    M = 128 if m is None else int(m)
    for r in range(rows.B):
        n = min(max(int(rows.d[r]), 0), M)
        lo = int(rows.s[r])
        if n and not wr[lo : lo + n].all():
            return f"request {r}: token {lo + int(np.flatnonzero(~wr[lo : lo + n])[0]) - lo} of its {n} is not written"
    return None


def tokens_hold_their_request(case: Case, o: Observation) -> str | None:
    rows = Rows.of(case.arrays["cu_num_tokens"])
    x, out, wr = case.arrays["input"], o.out["output"], o.written["output"]
    frm, to = case.scalars["replace_from"], case.scalars["replace_to"]
    for r in range(rows.B):
        lo, hi = int(rows.s[r]), int(rows.s[r]) + max(int(rows.d[r]), 0)
        v = x[r : r + 1]
        if x.dtype == np.float32:
            hit = v[0] == np.array([frm], dtype=np.int64).astype(np.float32)[0]
            want = np.array([to], dtype=np.int64).astype(np.float32) if hit else v
        else:
            want = np.array([to], dtype=np.int64).astype(x.dtype) if int(v[0]) == frm else v
        got = out[lo:hi][wr[lo:hi]]
        if got.size and not np.all(got.view(want.dtype.str.replace("f", "i")) == want.view(want.dtype.str.replace("f", "i"))[0]):
            return f"request {r}: a token holds {got[0]!r}, not its request's value {want[0]!r}"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("every_token_written", "every token of a request (up to MAX_NUM_TOKENS) is written", every_token_written),
    Property("tokens_hold_their_request", "each written token holds its request's value, replace_to where it was "
             "replace_from", tokens_hold_their_request),
)
"""The properties, in the order the audit reports them."""


AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
