"""What a caller of ``_compute_local_logits_stats_kernel`` relies on (docs/CONTRACT.md §30).

The rejection kernels reduce these statistics over blocks: a greedy row's block argmax must be
a token of its block holding the block's maximum (the verified token is looked up by it), a
random row's block maximum must be the block's greatest logit and its sum of exponentials lie
in ``[1, block size]`` when the block has a finite logit (``0`` when none: ``log`` of the
total then stays finite for a row with one), and a bonus row is never written."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from ...targetkit.runner_v2_verify import STATS_BLOCK
from ...targetkit.scale import flat_limit
from .layout import requests


def _rows(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    a = case.arrays
    starts, counts = requests(a["expanded_local_pos"])
    bonus = np.zeros(len(a["expanded_local_pos"]), bool)
    bonus[starts + counts - 1] = True
    greedy = a["temperature"][a["expanded_idx_mapping"]] == 0
    return greedy & ~bonus, ~greedy & ~bonus, bonus, case.scalars["vocab_size"]


def argmax_holds_the_maximum(case: Case, o: Observation) -> str | None:
    g, _, _, V = _rows(case)
    x = case.arrays["target_logits"]
    nb = o.out["target_local_argmax"].shape[1]
    for j in np.flatnonzero(g):
        for b in range(nb):
            tok = int(o.out["target_local_argmax"][j, b])
            lo, hi = b * STATS_BLOCK, min(V, (b + 1) * STATS_BLOCK)
            if not lo <= tok < hi or x[j, tok] != x[j, lo:hi].max():
                return f"greedy row {j}, block {b}: argmax {tok} does not hold the block's maximum"
    return None


def sums_in_range(case: Case, o: Observation) -> str | None:
    _, r, _, V = _rows(case)
    x = case.arrays["target_logits"]
    for j in np.flatnonzero(r):
        for b in range(o.out["target_local_max"].shape[1]):
            blk = x[j, b * STATS_BLOCK : min(V, (b + 1) * STATS_BLOCK)]
            m, s = o.out["target_local_max"][j, b], o.out["target_local_sumexp"][j, b]
            if m != blk.max():
                return f"random row {j}, block {b}: maximum {float(m)}, not the block's {float(blk.max())}"
            if np.isfinite(m) and not 1.0 <= s <= blk.size * (1 + 2**-10):
                return f"random row {j}, block {b}: sum of exponentials {float(s)} outside [1, {blk.size}]"
            if not np.isfinite(m) and s != 0:
                return f"random row {j}, block {b}: a masked block's sum is {float(s)}, not 0"
    return None


def bonus_rows_untouched(case: Case, o: Observation) -> str | None:
    _, _, bonus, _ = _rows(case)
    for k, w in o.written.items():
        rows = np.flatnonzero(w.reshape(w.shape[0], -1).any(axis=1) & bonus[: w.shape[0]])
        if rows.size:
            return f"{k}: bonus row {int(rows[0])} written"
    return None


def maxima_of_own_row(case: Case, o: Observation) -> str | None:
    """Each drafted row whose offset ``j * stride`` lies past ``2**31`` has its own blocks'
    maxima (greedy and random rows alike: exact)."""
    g, r, _, V = _rows(case)
    x = case.arrays["target_logits"]
    W = x.shape[1]
    for j in np.flatnonzero(g | r):
        if j * W < flat_limit():
            continue
        for b in range(o.out["target_local_max"].shape[1]):
            m, want = o.out["target_local_max"][j, b], x[j, b * STATS_BLOCK : min(V, (b + 1) * STATS_BLOCK)].max()
            if not (m == want or (np.isnan(m) and np.isnan(want))):
                return (f"row {j} (offset {j * W}, past 2**31), block {b}: maximum {float(m)!r}, not its own block's "
                        f"{float(want)!r}: the row offset was not computed exactly (an int32 product wraps)")
    return None


INT32_FLAT_INDEX = (
    "production reaches it: a verification step of more than 2**31 / V logits rows (8193 at V = 262144; "
    "max_num_seqs x (1 + num_speculative_tokens) rows reach 16384) has target logits past 2**31 elements "
    "(docs/CONTRACT.md §30.2; vLLM: vllm/v1/worker/gpu/spec_decode/rejection_sampler.py, RejectionSampler._verify)")
"""Why production reaches the ``int32_flat_index`` hazard (README's hazard table)."""

PROPERTIES: tuple[Property, ...] = (
    Property("argmax_holds_the_maximum", "a greedy row's block argmax is a token of the block holding its maximum",
             argmax_holds_the_maximum),
    Property("sums_in_range", "a random row's block maximum is the block's, its sum in [1, block size] (0 when masked)",
             sums_in_range),
    Property("bonus_rows_untouched", "a bonus row's statistics are never written", bonus_rows_untouched),
    Property("nothing_past_the_buffers", "nothing is written outside the statistics", nothing_past_num_reqs),
    Property("maxima_of_own_row", "a drafted row whose offset lies past 2**31 has its own blocks' maxima",
             maxima_of_own_row, hazard_class="int32_flat_index", source="PR #47383, PR #46560",
             rests_on=INT32_FLAT_INDEX),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
