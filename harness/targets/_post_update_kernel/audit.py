"""What a caller of ``_post_update_kernel`` relies on (docs/CONTRACT.md §19).

The next step reads the state this leaves: ``num_computed_tokens[s]`` is where its chunk starts,
``all_token_ids[s, :total_len[s]]`` its history (the prompt for the next prefill copy, §14, the
penalties), ``last_sampled_tokens[s]`` its next input (§16). A row's history must grow by exactly
its sampled tokens, in order, its count by the tokens the step kept, and a row masked out, or a
state row no row names, must keep its state."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def history_appended(case: Case, o: Observation) -> str | None:
    a = case.arrays
    for b, s in enumerate(a["idx_mapping"]):
        if s < 0:
            continue
        n, t = max(int(a["num_sampled"][b]), 0), int(a["total_len"][s])
        got = o.out["all_token_ids"][s, t : t + n]
        want = a["sampled_tokens"][b, :n].astype(np.int32)
        if not np.array_equal(got, want) or int(o.out["total_len"][s]) != t + n:
            return f"row {b}: history [{t}, {t + n}) holds {got.tolist()}, length {int(o.out['total_len'][s])}; " \
                   f"not {want.tolist()}, {t + n}"
    return None


def count_by_kept_tokens(case: Case, o: Observation) -> str | None:
    a = case.arrays
    qlen = np.diff(a["query_start_loc"].astype(np.int64)) if "query_start_loc" in a else np.zeros(len(a["idx_mapping"]))
    for b, s in enumerate(a["idx_mapping"]):
        if s < 0:
            continue
        want = int(np.int64(a["num_computed_tokens"][s]) + qlen[b] - a["num_rejected"][b])
        if int(o.out["num_computed_tokens"][s]) != want:
            return f"row {b}: num_computed_tokens = {int(o.out['num_computed_tokens'][s])}, not {want}"
    return None


def others_keep_their_state(case: Case, o: Observation) -> str | None:
    a = case.arrays
    named = set(a["idx_mapping"][a["idx_mapping"] >= 0].tolist())
    for n in ("num_computed_tokens", "total_len", "all_token_ids", "output_bin_counts"):
        if n in o.written:
            rows = np.flatnonzero(o.written[n].reshape(o.written[n].shape[0], -1).any(axis=1))
            stray = sorted(set(rows.tolist()) - named)
            if stray:
                return f"{n}: state row {stray[0]} changed, and no unmasked batch row names it"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("history_appended", "a row's history grows by its sampled tokens, in order, and its length with it",
             history_appended),
    Property("count_moves_by_kept_tokens", "a row's count moves by its query minus its rejected tokens",
             count_by_kept_tokens),
    Property("others_keep_their_state", "a masked row's, or an unnamed state row's, state is untouched",
             others_keep_their_state),
    Property("nothing_past_the_state", "nothing is written outside the state's buffers", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
