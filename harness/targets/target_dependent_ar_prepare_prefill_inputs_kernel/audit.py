"""What a caller of ``target_dependent_ar_prepare_prefill_inputs_kernel`` relies on
(docs/CONTRACT.md §25).

The drafter's forward pass reads its input ids and positions at the target's token slots, and
samples its first draft at ``last_token_indices[b]``: that index must be the row's last accepted
token (inside the row's query), holding the row's next token (the last sampled one, or the next
prompt token mid-prefill); the accepted tokens before it must be the target's ids shifted by
one; the query starts and lengths past the batch must be padded (a CUDA graph replays them)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def last_index_in_row(case: Case, o: Observation) -> str | None:
    a = case.arrays
    q = a["query_start_loc"].astype(np.int64)
    keep = np.diff(q) - a["num_rejected"].astype(np.int64)
    got = o.out["last_token_indices"]
    for b in range(len(keep)):
        if got[b] != q[b] + keep[b] - 1 or not q[b] <= got[b] < q[b + 1]:
            return f"row {b}: last_token_indices = {int(got[b])}, not its last accepted token {q[b] + keep[b] - 1} " \
                   f"inside [{q[b]}, {q[b + 1]})"
    return None


def next_token_at_last_index(case: Case, o: Observation) -> str | None:
    a = case.arrays
    q = a["query_start_loc"].astype(np.int64)
    keep = np.diff(q) - a["num_rejected"].astype(np.int64)
    for b, s in enumerate(a["idx_mapping"]):
        want = int(np.int64(a["last_sampled"][s, 0]).astype(np.int32)) if a["num_sampled"][b] > 0 \
            else int(a["next_prefill_tokens"][0, s])
        got = int(o.out["draft_input_ids"][q[b] + keep[b] - 1])
        if got != want:
            return f"row {b}: the id at its last accepted token is {got}, not its next token {want}"
    return None


def padded_for_graphs(case: Case, o: Observation) -> str | None:
    B, M = int(case.scalars["num_reqs"]), int(case.scalars["max_num_reqs"])
    end = int(case.arrays["query_start_loc"][-1])
    qsl = o.out["draft_query_start_loc"]
    if np.any(qsl[B : M + 1] != end):
        return f"draft_query_start_loc past the batch is not {end} everywhere: {qsl[B : B + 4].tolist()}..."
    if np.any(o.out["draft_seq_lens"][B:M] != 0) or np.any(o.out["last_token_indices"][B:M] != 0):
        return "a sequence length or a last-token index past the batch is not 0"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("last_index_is_the_last_accepted_token", "last_token_indices[b] is the row's last accepted token",
             last_index_in_row),
    Property("next_token_at_the_last_index", "the id there is the row's next token (last sampled, or the next "
             "prompt token)", next_token_at_last_index),
    Property("padded_for_cuda_graphs", "query starts past the batch repeat the token count; lengths and indices "
             "are 0", padded_for_graphs),
    Property("nothing_past_the_buffers", "nothing is written outside the drafter's buffers", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
