"""What a caller of ``_compute_local_residual_mass_kernel`` relies on (docs/CONTRACT.md §32).

The rejection kernel sums a row's partials into the residual mass ``R`` of its acceptance
threshold ``h = R / (R + 1 - p)``: every partial must be a finite mass ``>= 0`` and the row's sum
at most ``p_{i-1} <= 1`` (``sum max(p M_b - M_s, 0) <= p sum M_b``); the rows it never reads
(a request's first, a greedy request's, one whose next draft is ``-1``, the bonus) are never
written."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from ...targetkit.runner_v2_verify import step_view
from .edges import read_rows


def masses_in_range(case: Case, o: Observation) -> str | None:
    a = case.arrays
    v = step_view(case, "extended", stats=False)
    m = o.out["local_residual_mass"]
    for j in read_rows(v, a["draft_sampled"].astype(np.int64)):
        p = float(np.exp(np.float64(a["cumulative_log_p"][j - 1])))
        if not (np.all(np.isfinite(m[j])) and np.all(m[j] >= 0) and m[j].astype(np.float64).sum() <= p * (1 + 2**-8) + 1e-6):
            return f"row {j}: partials {m[j].tolist()} are not masses >= 0 summing to at most p = {p}"
    return None


def unread_rows_untouched(case: Case, o: Observation) -> str | None:
    a = case.arrays
    v = step_view(case, "extended", stats=False)
    read = np.zeros(v.n, bool)
    read[read_rows(v, a["draft_sampled"].astype(np.int64))] = True
    w = o.written["local_residual_mass"].any(axis=1)
    bad = np.flatnonzero(w & ~read)
    return f"row {int(bad[0])} written, and the rejection kernel never reads it" if bad.size else None


PROPERTIES: tuple[Property, ...] = (
    Property("masses_in_range", "a row's partials are masses >= 0 summing to at most its previous joint ratio",
             masses_in_range),
    Property("unread_rows_untouched", "rows the rejection kernel never reads are never written", unread_rows_untouched),
    Property("nothing_past_the_buffer", "nothing is written outside local_residual_mass", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
