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
from ...targetkit.scale import flat_limit
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


def mass_of_own_rows(case: Case, o: Observation) -> str | None:
    """Each residual row whose offset ``j * stride`` lies past ``2**31`` holds its own rows'
    partial masses (§32.1 of its target and draft rows; within ``1e-4`` of the block's mass)."""
    from ....oracles import vectorized_v2_verify as oracle

    a = case.arrays
    n, W = a["target_logits"].shape
    first = -(-flat_limit() // W)
    if first >= n:
        return None
    want = np.full((n, case.scalars["vocab_num_blocks"]), np.nan, np.float32)
    oracle.compute_local_residual_mass(local_residual_mass=want, **a, **case.scalars)
    got = o.out["local_residual_mass"]
    for j in range(first, n):
        if np.isnan(want[j]).all():
            continue
        off = ~(np.abs(got[j].astype(np.float64) - want[j]) <= 1e-4 * np.maximum(1.0, np.abs(want[j])))
        if off.any():
            b = int(np.argmax(off))
            return (f"row {j} (offset {j * W}, past 2**31), block {b}: residual mass {float(got[j, b])!r}, its own rows "
                    f"give {float(want[j, b])!r}: the row offset was not computed exactly (an int32 product wraps)")
    return None


INT32_FLAT_INDEX = (
    "production reaches it: a block-verification step of more than 2**31 / V logits rows (8193 at V = 262144; "
    "max_num_seqs x (1 + num_speculative_tokens) rows reach 16384) has target logits past 2**31 elements "
    "(docs/CONTRACT.md §32.2; vLLM: vllm/v1/worker/gpu/spec_decode/rejection_sampler.py, RejectionSampler._verify)")
"""Why production reaches the ``int32_flat_index`` hazard (README's hazard table)."""

PROPERTIES: tuple[Property, ...] = (
    Property("masses_in_range", "a row's partials are masses >= 0 summing to at most its previous joint ratio",
             masses_in_range),
    Property("unread_rows_untouched", "rows the rejection kernel never reads are never written", unread_rows_untouched),
    Property("nothing_past_the_buffer", "nothing is written outside local_residual_mass", nothing_past_num_reqs),
    Property("mass_of_own_rows", "a residual row whose offset lies past 2**31 holds its own rows' masses",
             mass_of_own_rows, hazard_class="int32_flat_index", source="PR #47383, PR #46560",
             rests_on=INT32_FLAT_INDEX),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
