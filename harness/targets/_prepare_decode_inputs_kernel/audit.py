"""What a caller of ``_prepare_decode_inputs_kernel`` relies on (docs/CONTRACT.md §26).

The drafter's decode step attends with these: each row's input must be its first draft, its
position and length must never pass the model's length (a KV-cache slot past it does not exist),
and the query starts must describe one token per row, padded with ``B`` (a CUDA graph replays
the padded rows as empty ones) with lengths 0 past the batch."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def within_model_length(case: Case, o: Observation) -> str | None:
    B, M = case.scalars["num_reqs"], case.scalars["max_model_len"]
    pos, seq = o.out["positions"][:B], o.out["seq_lens"][:B]
    for b in range(B):
        if not 0 <= pos[b] <= M - 1 or not 1 <= seq[b] <= M:
            return f"row {b}: position {int(pos[b])}, length {int(seq[b])}, outside the model's {M} tokens"
    return None


def one_token_per_row(case: Case, o: Observation) -> str | None:
    B, R = case.scalars["num_reqs"], case.scalars["max_num_reqs"]
    want = np.minimum(np.arange(R + 1), B)
    got = o.out["query_start_loc"]
    if not np.array_equal(got, want):
        bad = int(np.flatnonzero(got != want)[0])
        return f"query_start_loc[{bad}] = {int(got[bad])}, not {int(want[bad])} (one token per row, padded with {B})"
    if np.any(o.out["seq_lens"][B:R] != 0):
        return "a length past the batch is not 0"
    return None


def input_is_first_draft(case: Case, o: Observation) -> str | None:
    B = case.scalars["num_reqs"]
    want = case.arrays["draft_tokens"][:B, 0].astype(np.int32)
    bad = np.flatnonzero(o.out["input_ids"] != want)
    return f"row {int(bad[0])}: input id {int(o.out['input_ids'][bad[0]])}, not its first draft {int(want[bad[0]])}" \
        if bad.size else None


PROPERTIES: tuple[Property, ...] = (
    Property("input_is_the_first_draft", "each row's input is its first draft token", input_is_first_draft),
    Property("within_the_model_length", "positions in [0, max_model_len), lengths in [1, max_model_len]",
             within_model_length),
    Property("one_token_per_row_padded", "query starts 0, 1, ..., B, B, ...; lengths past the batch 0",
             one_token_per_row),
    Property("nothing_past_the_buffers", "nothing is written outside the drafter's buffers", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
