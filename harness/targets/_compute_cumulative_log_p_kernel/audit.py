"""What a caller of ``_compute_cumulative_log_p_kernel`` relies on (docs/CONTRACT.md §31).

Block verification takes ``exp(cumulative_log_p)`` as a joint probability ratio clamped at 1: it
must never exceed 0, never rise along a request's drafts (each step adds ``min(.., 0)``... only
when the running value would pass 0 is it held there), and a ``-1`` draft must carry the value
before it; a greedy request and the bonus rows are never written."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from ...targetkit.runner_v2_verify import draft_log_probs, rows_of
from ...targetkit.scale import flat_limit


def at_most_zero(case: Case, o: Observation) -> str | None:
    v = o.out["cumulative_log_p"]
    w = o.written["cumulative_log_p"]
    bad = np.flatnonzero(w & ~(v <= 0))
    return f"cumulative_log_p[{int(bad[0])}] = {float(v[bad[0]])} > 0" if bad.size else None


def placeholder_carries(case: Case, o: Observation) -> str | None:
    a = case.arrays
    first, d = rows_of(a["cu_num_logits"])
    v = o.out["cumulative_log_p"]
    ds = a["draft_sampled"]
    for r in range(len(first)):
        for i in range(1, int(d[r])):
            j = first[r] + i
            if ds[j + 1] < 0 and o.written["cumulative_log_p"][j] and v[j] != v[j - 1]:
                return f"request {r}: the -1 draft at row {j} changes the value ({float(v[j - 1])} -> {float(v[j])})"
    return None


def greedy_and_bonus_untouched(case: Case, o: Observation) -> str | None:
    a = case.arrays
    first, d = rows_of(a["cu_num_logits"])
    greedy = a["temperature"][a["idx_mapping"]] == 0
    w = o.written["cumulative_log_p"]
    for r in range(len(first)):
        rows = range(first[r], first[r] + d[r] + 1) if greedy[r] else [first[r] + d[r]]
        for j in rows:
            if w[j]:
                return f"request {r} ({'greedy' if greedy[r] else 'its bonus'}): row {j} written"
    return None


def ratio_of_own_rows(case: Case, o: Observation) -> str | None:
    """A random request with a draft row past ``2**31`` target logits has its own running joint
    ratio (§31.1 from its rows' logits and statistics, every block's; within 1e-3 of its log).
    A launch whose ``PADDED_VOCAB_NUM_BLOCKS`` is below the block count (the extended tier: the
    kernel reads that many blocks) is not judged here."""
    a = case.arrays
    padded = case.launch.get("PADDED_VOCAB_NUM_BLOCKS")
    if padded is not None and padded < case.scalars["vocab_num_blocks"]:  # the launch reads fewer blocks (an edge)
        return None
    first, d = rows_of(a["cu_num_logits"])
    W = a["target_logits"].shape[1]
    s = a["idx_mapping"].astype(np.int64)
    v = o.out["cumulative_log_p"]
    for r in range(len(first)):
        rows = np.arange(first[r], first[r] + d[r])
        if not d[r] or a["temperature"][s[r]] == 0 or int(rows[-1]) * W < flat_limit():
            continue
        tok = a["draft_sampled"][rows + 1].astype(np.int64)
        ok = tok >= 0
        lt, ld = draft_log_probs(a, rows[ok], np.arange(d[r])[ok], np.full(int(ok.sum()), s[r]), tok[ok])
        L, k = 0.0, 0
        for i, j in enumerate(rows):
            if ok[i]:
                L = min(L + float(lt[k] - ld[k]), 0.0)
                k += 1
            if not abs(float(v[j]) - L) <= 1e-3 * max(1.0, abs(L)):
                return (f"request {r}, row {int(j)} (offset {int(j) * W}, past 2**31 in its request): joint log ratio "
                        f"{float(v[j])!r}, its own rows give {L!r}: a row offset was not computed exactly (an int32 "
                        "product wraps)")
    return None


INT32_FLAT_INDEX = (
    "production reaches it: a block-verification step of more than 2**31 / V logits rows (8193 at V = 262144; "
    "max_num_seqs x (1 + num_speculative_tokens) rows reach 16384) has target logits past 2**31 elements "
    "(docs/CONTRACT.md §31.2; vLLM: vllm/v1/worker/gpu/spec_decode/rejection_sampler.py, RejectionSampler._verify)")
"""Why production reaches the ``int32_flat_index`` hazard (README's hazard table)."""

PROPERTIES: tuple[Property, ...] = (
    Property("at_most_zero", "every value written is at most 0 (a joint ratio of at most 1)", at_most_zero),
    Property("placeholder_carries", "a -1 draft carries the value before it", placeholder_carries),
    Property("greedy_and_bonus_untouched", "a greedy request's rows and every bonus row are never written",
             greedy_and_bonus_untouched),
    Property("nothing_past_the_buffer", "nothing is written outside cumulative_log_p", nothing_past_num_reqs),
    Property("ratio_of_own_rows", "a random request with a row past 2**31 has its own running joint ratio",
             ratio_of_own_rows, hazard_class="int32_flat_index", source="PR #46560, PR #47383",
             rests_on=INT32_FLAT_INDEX),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
