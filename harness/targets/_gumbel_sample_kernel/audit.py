"""What a caller of ``_gumbel_sample_kernel`` relies on (docs/CONTRACT.md §29).

``gumbel_sample`` reduces the blocks with ``argmax`` and ``gather``: each block's winner must be
a token of that block (an index the gather and every later lookup by token id can use); the
token a row samples must be one its logits allow (never a token top-k or top-p masked to
``-inf`` while a finite one is left); a greedy row samples its argmax; and the drafter's cache,
which verification reads as the draft's distribution, must hold the row's pre-temperature logits
at its state row and step, and nothing else."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from ...targetkit.scale import flat_limit
from .layout import mode_of


def _sampled(o: Observation, T: int) -> tuple[np.ndarray, np.ndarray]:
    la, lm = o.out["local_argmax"].reshape(T, -1), o.out["local_max"].reshape(T, -1)
    m = np.where(np.isnan(lm), -np.inf, lm)
    return la, la[np.arange(T), np.argmax(m, axis=1)]


def winners_in_their_blocks(case: Case, o: Observation) -> str | None:
    T, V = case.arrays["logits"].shape
    la, _ = _sampled(o, T)
    for t, b in zip(*np.nonzero((la < np.arange(la.shape[1]) * 1024) | (la >= np.minimum((np.arange(la.shape[1]) + 1) * 1024, V))),
                    strict=True):  # fmt: skip
        return f"row {t}, block {b}: winner {int(la[t, b])} is no token of the block"
    return None


def sampled_token_allowed(case: Case, o: Observation) -> str | None:
    x = case.arrays["logits"]
    _, tok = _sampled(o, x.shape[0])
    for t in range(x.shape[0]):
        if np.isfinite(x[t]).any() and not (0 <= tok[t] < x.shape[1] and np.isfinite(x[t, tok[t]])):
            return f"row {t} samples token {int(tok[t])}, masked (-inf) while it has finite logits"
    return None


def greedy_takes_the_argmax(case: Case, o: Observation) -> str | None:
    a = case.arrays
    x, rows = a["logits"], a["expanded_idx_mapping"]
    t_ = np.where(rows >= 0, a["temperature"][np.maximum(rows, 0)], 0)
    _, tok = _sampled(o, x.shape[0])
    for t in np.flatnonzero(t_ == 0):
        want = int(np.argmax(x[t]))
        if tok[t] != want:
            return f"greedy row {t} samples {int(tok[t])}, not its argmax {want}"
    return None


def cache_holds_the_raw_logits(case: Case, o: Observation) -> str | None:
    a = case.arrays
    if "logits_cache" not in a:
        return None
    src = a.get("logits_cache_source", a["logits"])
    V = a["logits"].shape[1]
    want = a["logits_cache"].copy()
    cols = a["logits_cache_cols"] if mode_of(case) == "watermark" else np.full(len(src), case.scalars["cache_col"])
    for t, s in enumerate(a["expanded_idx_mapping"]):
        if s >= 0:
            want[s, cols[t], :V] = src[t]
    got = o.out["logits_cache"]
    if not np.array_equal(got.view(np.int32), want.view(np.int32)):
        s, k, v = (int(i[0]) for i in np.nonzero(got.view(np.int32) != want.view(np.int32)))
        return f"logits_cache[{s}, {k}, {v}] = {float(got[s, k, v])}, not {float(want[s, k, v])}"
    return None


def greedy_of_own_row(case: Case, o: Observation) -> str | None:
    """A greedy row whose offset ``t * stride`` lies past ``2**31`` samples its own argmax (its
    blocks' winners and maxima are its own logits')."""
    a = case.arrays
    x, rows = a["logits"], a["expanded_idx_mapping"]
    T, W = x.shape
    t_ = np.where(rows >= 0, a["temperature"][np.maximum(rows, 0)], 0)
    la, lm = o.out["local_argmax"].reshape(T, -1), o.out["local_max"].reshape(T, -1)
    for t in range(-(-flat_limit() // W), T):
        if t_[t] != 0:
            continue
        for b in range(la.shape[1]):
            blk = x[t, b * 1024 : min(W, (b + 1) * 1024)]
            want = b * 1024 + int(np.argmax(blk))
            if int(la[t, b]) != want or lm[t, b] != blk.max():
                return (f"greedy row {t} (offset {t * W}, past 2**31), block {b}: winner {int(la[t, b])} of value "
                        f"{float(lm[t, b])!r}, its own block's is {want} of {float(blk.max())!r}: the row offset was not "
                        "computed exactly (an int32 product wraps)")
    return None


INT32_FLAT_INDEX = (
    "production reaches it: a sampling step of more than 2**31 / V logits rows (8193 at V = 262144; vLLM's "
    "max_num_seqs x (1 + num_speculative_tokens) rows reach 16384) has logits past 2**31 elements (docs/CONTRACT.md "
    "§29.2; vLLM: vllm/v1/worker/gpu/sample/sampler.py, Sampler._sample_random)")
"""Why production reaches the ``int32_flat_index`` hazard (README's hazard table)."""

PROPERTIES: tuple[Property, ...] = (
    Property("winners_in_their_blocks", "each block's winner is a token of its block", winners_in_their_blocks),
    Property("sampled_token_allowed", "a row samples a token of finite logit whenever it has one", sampled_token_allowed),
    Property("greedy_takes_the_argmax", "a row of temperature 0 samples its first argmax", greedy_takes_the_argmax),
    Property("cache_holds_the_raw_logits", "the drafter's cache holds each row's raw logits at its state row and "
             "column, and is untouched elsewhere", cache_holds_the_raw_logits),
    Property("nothing_past_the_buffers", "nothing is written outside the outputs and the cache", nothing_past_num_reqs),
    Property("greedy_of_own_row", "a greedy row whose offset lies past 2**31 samples its own argmax", greedy_of_own_row,
             hazard_class="int32_flat_index", source="PR #46560, PR #47383", rests_on=INT32_FLAT_INDEX),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
