"""What a caller of ``rejection_random_sample_kernel`` relies on (docs/CONTRACT.md §11): the
properties ``eaglefuzz audit`` checks on one implementation's outputs (:mod:`...checking.audit`).

``RejectionSampler.parse_output`` reads a row as its ids up to the first ``-1``
(``PLACEHOLDER_TOKEN_ID``): a processed row must be a prefix of accepted drafts, then one id,
then nothing written; no written id may be ``-1``; an unprocessed row is not written
(:mod:`...targetkit.output_rows`; processed here: the random requests)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit import output_rows
from ...targetkit.properties import Audit, Observation, Property
from ...targetkit.scale import past_limit
from .layout import processed
from .record import visits


def row_is_prefix(case: Case, o: Observation) -> str | None:
    return output_rows.row_is_prefix(case, o, processed(case))


def ids_in_vocab(case: Case, o: Observation) -> str | None:
    out, wr, _ = output_rows.written_rows(case, o)
    V = case.scalars["vocab_size"]
    bad = np.argwhere(wr & ((out < 0) | (out >= V)) & (out != -1))
    if bad.size:
        r, j = (int(x) for x in bad[0])
        return f"request {r}: slot {j} holds {int(out[r, j])}, outside the vocabulary 0 .. {V - 1}"
    return None


def decided_by_own_row(case: Case, o: Observation) -> str | None:
    """A visited draft whose flat index ``t*V + id`` lies past ``2**31`` is decided by its own
    row (§11.1): its slot holds the draft id when its own ``p / q`` accepts, else its recovered
    id. A kernel computing the index in int32 reads elsewhere (vLLM PR #48055)."""
    out, wr, _ = output_rows.written_rows(case, o)
    V = case.scalars["vocab_size"]
    for v in visits(case):
        if v.p is None or not past_limit(v.t * V + v.did):
            continue
        want = v.did if v.accepted else int(case.arrays["recovered_token_ids"][v.t])
        got = int(out[v.r, v.j]) if wr[v.r, v.j] else None
        if got != want:
            return (f"request {v.r}, draft {v.j} (token {v.t}): its flat index t*V + id = {v.t * V + v.did} is past 2**31; "
                    f"its own row {'accepts' if v.accepted else 'rejects'} it (slot {want}), the kernel wrote "
                    f"{'nothing' if got is None else got}: the index was not computed exactly (an int32 product wraps)")
    return None


INT32_FLAT_INDEX = (
    "production reaches it: a step of more than 2**31 / V draft tokens (8193 at V = 262144) has tables past "
    "2**31 elements (docs/CONTRACT.md §11.2 Scale; vLLM: vllm/config/scheduler.py, SchedulerConfig; "
    "vllm/v1/sample/rejection_sampler.py, rejection_sample)")
"""Why production reaches the ``int32_flat_index`` hazard (README's hazard table)."""

PROPERTIES: tuple[Property, ...] = (
    Property("row_is_accepted_prefix", "a processed row is its accepted drafts, then one id, then nothing written; "
             "an unprocessed row is not written", row_is_prefix),
    Property("no_placeholder_written", "no written slot holds -1 (PLACEHOLDER_TOKEN_ID ends a row)",
             output_rows.no_placeholder_written),
    Property("ids_in_vocab", "every written id is a token of the vocabulary", ids_in_vocab),
    Property("decided_by_own_row", "a draft whose flat index lies past 2**31 is decided by its own row",
             decided_by_own_row, hazard_class="int32_flat_index", source="PR #46560, PR #47383, PR #48055",
             rests_on=INT32_FLAT_INDEX),
)
"""The properties, in the order the audit reports them."""


PR_48055 = (
    ("                        + (start_idx + pos) * vocab_size\n",
     "                        + (start_idx + pos).to(tl.int64) * vocab_size\n"),
    ("target_probs_ptr + (start_idx + pos) * vocab_size + draft_token_id",
     "target_probs_ptr + (start_idx + pos).to(tl.int64) * vocab_size + draft_token_id"),
)
"""vLLM PR #48055's fix of this kernel as text edits ``(old, new)`` of vLLM 0.33.0's source (each
``old`` found once): the row index promoted to int64 before the multiply. Applied to the
release's text at run time (``tests/seeded_bugs/mutants.py`` writes the variant), never a copy
of vLLM's code: the fixed variant the int32_flat_index hazard and its findings pass on. Read as
``AUDIT.fixes["PR #48055"]``."""


AUDIT = Audit(PROPERTIES, fixes={"PR #48055": PR_48055})
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
