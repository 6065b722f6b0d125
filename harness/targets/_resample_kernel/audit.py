"""What a caller of ``_resample_kernel`` relies on (docs/CONTRACT.md §34).

``_insert_resampled_kernel`` takes the block of greatest value and writes its winner as the
request's next token: every block's winner must be a token of its block, the token a request
draws must have positive residual mass (a finite residual logit: never the rejected one-hot
draft, never a token the target masked), a greedy request's bonus is its target argmax, and a
greedy request rejected before its bonus draws nothing."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from ...targetkit.runner_v2_verify import SAMPLE_BLOCK, step_view


def _drawn(o: Observation) -> tuple[np.ndarray, np.ndarray]:
    la, lm = o.out["resampled_local_argmax"], o.out["resampled_local_max"]
    m = np.where(np.isnan(lm), -np.inf, lm)
    return la, la[np.arange(len(la)), np.argmax(m, axis=1)]


def winners_in_their_blocks(case: Case, o: Observation) -> str | None:
    V = case.scalars["vocab_size"]
    la = o.out["resampled_local_argmax"]
    w = o.written["resampled_local_argmax"]
    b = np.arange(la.shape[1])
    bad = w & ((la < b * SAMPLE_BLOCK) | (la >= np.minimum((b + 1) * SAMPLE_BLOCK, V)))
    if bad.any():
        r, k = (int(x[0]) for x in np.nonzero(bad))
        return f"request {r}, block {k}: winner {int(la[r, k])} is no token of the block"
    return None


def drawn_token_has_mass(case: Case, o: Observation) -> str | None:
    a = case.arrays
    v = step_view(case, "extended", stats=False)
    k = a["rejected_step"].astype(np.int64)
    j = v.first + k
    _, tok = _drawn(o)
    ds = a["draft_sampled"].astype(np.int64)
    for r in range(len(v.idx)):
        if v.greedy[r] and k[r] < v.d[r]:
            continue
        t = a["target_logits"][j[r], : v.V]
        if not np.isfinite(t).any():
            continue
        if not 0 <= tok[r] < v.V or not np.isfinite(t[tok[r]]):
            return f"request {r} draws token {int(tok[r])}, which its target masked"
        if k[r] < v.d[r] and "draft_logits" not in a and ds[j[r] + 1] == tok[r] and np.isfinite(t).sum() > 1:
            return f"request {r} draws its rejected one-hot draft {int(tok[r])}"
    return None


def greedy_bonus_is_the_argmax(case: Case, o: Observation) -> str | None:
    a = case.arrays
    v = step_view(case, "extended", stats=False)
    k = a["rejected_step"].astype(np.int64)
    _, tok = _drawn(o)
    for r in np.flatnonzero(v.greedy & (k == v.d)):
        want = int(np.argmax(a["target_logits"][v.first[r] + k[r], : v.V]))
        if tok[r] != want:
            return f"greedy request {r}: bonus {int(tok[r])}, not its argmax {want}"
    for r in np.flatnonzero(v.greedy & (k < v.d)):
        if o.written["resampled_local_argmax"][r].any():
            return f"greedy request {r}, rejected before its bonus, draws a token"
    return None


def drawn_from_own_row(case: Case, o: Observation) -> str | None:
    """A request that draws from a row whose offset ``j * stride`` lies past ``2**31`` draws
    from its own row: §34.1 of that request alone (the NumPy oracle) gives its block winners
    (and their values, within ``1e-4``)."""
    from ...targetkit.runner_v2_verify import keep_requests
    from ...targetkit.scale import flat_limit
    from .layout import run_oracle

    a = case.arrays
    W = a["target_logits"].shape[1]
    v = step_view(case, "extended", stats=False)
    j = v.first + a["rejected_step"].astype(np.int64)
    for r in range(len(v.idx)):
        if int(j[r]) * W < flat_limit() or not o.written["resampled_local_argmax"][r].any():
            continue
        want, _ = run_oracle(keep_requests(case, [r]))
        la, lm = o.out["resampled_local_argmax"][r], o.out["resampled_local_max"][r].astype(np.float64)
        wl, wm = want["resampled_local_argmax"][0], want["resampled_local_max"][0].astype(np.float64)
        off = (la != wl) | ~(np.abs(lm - wm) <= 1e-4 * np.maximum(1.0, np.abs(wm)))
        if off.any():
            b = int(np.argmax(off))
            return (f"request {r}, row {int(j[r])} (offset {int(j[r]) * W}, past 2**31), block {b}: winner {int(la[b])} "
                    f"({float(lm[b])!r}), its own row gives {int(wl[b])} ({float(wm[b])!r}): the row offset was not "
                    "computed exactly (an int32 product wraps)")
    return None


INT32_FLAT_INDEX = (
    "production reaches it: a verification step of more than 2**31 / V logits rows (8193 at V = 262144; "
    "max_num_seqs x (1 + num_speculative_tokens) rows reach 16384) has target logits past 2**31 elements "
    "(docs/CONTRACT.md §34.2; vLLM: vllm/v1/worker/gpu/spec_decode/rejection_sampler.py, RejectionSampler._verify)")
"""Why production reaches the ``int32_flat_index`` hazard (README's hazard table)."""

PROPERTIES: tuple[Property, ...] = (
    Property("winners_in_their_blocks", "each block's winner is a token of its block", winners_in_their_blocks),
    Property("drawn_token_has_mass", "a drawn token is one the target allows, never a rejected one-hot draft",
             drawn_token_has_mass),
    Property("greedy_bonus_is_the_argmax", "a greedy request's bonus is its argmax; rejected earlier, nothing is drawn",
             greedy_bonus_is_the_argmax),
    Property("nothing_past_the_buffers", "nothing is written outside the block winners and values", nothing_past_num_reqs),
    Property("drawn_from_own_row", "a request drawing from a row past 2**31 draws from its own row", drawn_from_own_row,
             hazard_class="int32_flat_index", source="PR #46560, PR #47383", rests_on=INT32_FLAT_INDEX),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
