"""What a caller of ``sample_recovered_tokens_kernel`` relies on (docs/CONTRACT.md §13): the
properties ``eaglefuzz audit`` checks on one implementation's outputs (:mod:`...checking.audit`).

``rejection_random_sample_kernel`` writes a recovered id wherever a draft is rejected: every
processed token's id must be written and be a token of the vocabulary (0 .. V - 1)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.draft_rows import Rows
from ...targetkit.properties import Audit, Observation, Property
from ...targetkit.scale import past_limit
from .record import processed_tokens


def _processed(case: Case) -> np.ndarray:
    rows = Rows.of(case.arrays["cu_num_draft_tokens"])
    L = case.scalars["max_spec_len"]
    t = [int(rows.s[r]) + j for r in range(rows.B) for j in range(min(max(int(rows.d[r]), 0), L))]
    return np.array(t, dtype=np.int64)


def every_token_written(case: Case, o: Observation) -> str | None:
    t = _processed(case)
    missing = t[~o.written["output_token_ids"][t]] if t.size else t
    return f"token {int(missing[0])} has no recovered id" if missing.size else None


def ids_in_vocab(case: Case, o: Observation) -> str | None:
    V = case.scalars["vocab_size"]
    if V == 0:
        return None
    t = _processed(case)
    ids = o.out["output_token_ids"][t] if t.size else t
    bad = np.flatnonzero((ids < 0) | (ids >= V))
    return f"token {int(t[bad[0]])}: recovered id {int(ids[bad[0]])} is outside 0 .. {V - 1}" if bad.size else None


def _own_id(case: Case, t: int, r: int) -> int:
    """§13.1's recovered id of token ``t`` of request ``r``, from its own rows."""
    a, V = case.arrays, case.scalars["vocab_size"]
    if "draft_probs" in a:
        p = np.fmax(a["target_probs"][t] - a["draft_probs"][t], np.float32(0))
    else:
        p = a["target_probs"][t].copy()
        did = int(a["draft_token_ids"][t])
        if 0 <= did < V:
            p[did] = 0
    score = p.astype(a["inv_q"].dtype) * a["inv_q"][r]
    return min(int(np.argmax(score)) if score.max() > -np.inf else 0, V - 1)


def recovered_from_own_rows(case: Case, o: Observation) -> str | None:
    """A processed token whose table row or noise row reaches past flat index ``2**31`` gets the
    id of its own rows (§13.1; checked on such tokens only, the first 32). A kernel computing
    ``t*V`` or ``r*V`` in int32 reads elsewhere (vLLM PR #48055)."""
    V = case.scalars["vocab_size"]
    t, r = processed_tokens(case)
    past = np.flatnonzero([past_limit(int(ti) * V + V - 1) or past_limit(int(ri) * V + V - 1) for ti, ri in zip(t, r, strict=True)])
    for k in past[:32].tolist():
        want, got = _own_id(case, int(t[k]), int(r[k])), int(o.out["output_token_ids"][t[k]])
        if got != want:
            what = "table row" if past_limit(int(t[k]) * V + V - 1) else "noise row"
            return (f"token {int(t[k])} (request {int(r[k])}): its {what} reaches past flat index 2**31; its own rows give "
                    f"{want}, the kernel wrote {got}: the index was not computed exactly (an int32 product wraps)")
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("every_token_written", "every processed token gets a recovered id", every_token_written),
    Property("ids_in_vocab", "every recovered id is a token of the vocabulary", ids_in_vocab),
    Property("recovered_from_own_rows", "a token whose rows reach past flat index 2**31 gets the id of its own rows",
             recovered_from_own_rows, hazard_class="int32_flat_index", source="PR #46560, PR #47383, PR #48055",
             rests_on="production reaches it: more than 2**31 / V draft tokens, or requests (docs/CONTRACT.md §13.2 "
                      "Scale; vLLM: vllm/config/scheduler.py, SchedulerConfig; vllm/v1/sample/rejection_sampler.py, "
                      "sample_recovered_tokens)"),
)
"""The properties, in the order the audit reports them."""


PR_48055 = (
    ("    token_idx = start_idx + pos\n", "    token_idx = (start_idx + pos).to(tl.int64)\n"),
    ("inv_q_ptr + req_idx * vocab_size + vocab_offset", "inv_q_ptr + req_idx.to(tl.int64) * vocab_size + vocab_offset"),
)
"""vLLM PR #48055's fix of this kernel as text edits ``(old, new)`` of vLLM 0.33.0's source: the
token and request indices promoted to int64 before the multiplies (see the random kernel's).
Read as ``AUDIT.fixes["PR #48055"]``."""


AUDIT = Audit(PROPERTIES, fixes={"PR #48055": PR_48055})
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
