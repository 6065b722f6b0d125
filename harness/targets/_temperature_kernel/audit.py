"""What a caller of ``_temperature_kernel`` relies on (docs/CONTRACT.md §28).

The sampler takes the processed logits for each request's own distribution: a greedy row's
argmax is its argmax (rows of temperature 0 must come out as the model left them), a row of
temperature 1 is unchanged, dividing by a positive temperature keeps every row's order (the
argmax, and so the greedy or top-k choice, is the same token), and no element outside
``[num_tokens, vocab_size)`` changes."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from ...targetkit.scale import flat_limit


def _rows(case: Case) -> tuple[np.ndarray, np.ndarray, int]:
    a = case.arrays
    return a["logits"], a["temperature"][a["expanded_idx_mapping"]], case.scalars.get("vocab_size", a["logits"].shape[1])


def untouched_rows(case: Case, o: Observation) -> str | None:
    x, t, V = _rows(case)
    out = o.out["logits"]
    for r in np.flatnonzero((t == 0) | (t == 1)):
        if not np.array_equal(out[r].view(np.int32), x[r].view(np.int32)):
            return f"row {r} (temperature {float(t[r])}) changed"
    return None


def order_kept(case: Case, o: Observation) -> str | None:
    x, t, V = _rows(case)
    out = o.out["logits"]
    for r in np.flatnonzero(t > 0):
        fin = np.isfinite(x[r, :V])
        if fin.any() and np.argmax(np.where(fin, x[r, :V], -np.inf)) != np.argmax(np.where(fin, out[r, :V], -np.inf)):
            return f"row {r}: the argmax moved from {int(np.argmax(x[r, :V]))} to {int(np.argmax(out[r, :V]))}"
    return None


def nothing_past_the_vocabulary(case: Case, o: Observation) -> str | None:
    x, _, V = _rows(case)
    if V < x.shape[1] and not np.array_equal(o.out["logits"][:, V:].view(np.int32), x[:, V:].view(np.int32)):
        return f"a column at or past vocab_size = {V} changed"
    return None


def divided_by_own_temperature(case: Case, o: Observation) -> str | None:
    """Each divided row whose offset ``t * stride`` lies past ``2**31`` holds its own logits
    divided by its own temperature (within the 2 ulp of a compiled division)."""
    x, t, V = _rows(case)
    out = o.out["logits"]
    W = x.shape[1]
    for r in range(-(-flat_limit() // W), x.shape[0]):
        if t[r] == 0 or t[r] == 1:
            continue
        q = x[r, :V] / t[r]
        off = np.abs(out[r, :V].astype(np.float64) - q) > 2 * np.spacing(np.abs(q)).astype(np.float64)
        if off.any():
            v = int(np.argmax(off))
            return (f"row {r} (offset {r * W}, past 2**31), column {v}: expected {float(q[v])!r} (its logit "
                    f"{float(x[r, v])!r} / {float(t[r])!r}), got {float(out[r, v])!r}: the row offset was not computed "
                    "exactly (an int32 product wraps)")
    return None


INT32_FLAT_INDEX = (
    "production reaches it: a step of more than 2**31 / V logits rows (8193 at V = 262144; vLLM's max_num_seqs x "
    "(1 + num_speculative_tokens) rows reach 16384) has logits past 2**31 elements (docs/CONTRACT.md §28.2; vLLM: "
    "vllm/v1/worker/gpu/sample/sampler.py, Sampler.apply_sampling_params)")
"""Why production reaches the ``int32_flat_index`` hazard (README's hazard table)."""

PROPERTIES: tuple[Property, ...] = (
    Property("greedy_and_unit_rows_untouched", "rows of temperature 0 or 1 come out as given", untouched_rows),
    Property("order_kept", "a row divided by a positive temperature keeps its argmax", order_kept),
    Property("nothing_past_the_vocabulary", "columns at and past vocab_size are untouched", nothing_past_the_vocabulary),
    Property("nothing_past_the_buffer", "nothing is written outside the logits", nothing_past_num_reqs),
    Property("divided_by_own_temperature", "a row whose offset lies past 2**31 is divided by its own temperature",
             divided_by_own_temperature, hazard_class="int32_flat_index", source="PR #46560, PR #47383",
             rests_on=INT32_FLAT_INDEX),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
