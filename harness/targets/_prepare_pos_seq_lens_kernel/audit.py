"""What a caller of ``_prepare_pos_seq_lens_kernel`` relies on (docs/CONTRACT.md §15).

The attention metadata, the slot mappings (§22) and the rotary embedding read these: a row's
positions must run from its computed-token count up by one per token, its length must be that
count plus its chunk, and the lengths past the batch must be 0 (a full CUDA graph replays them
as empty requests)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs


def positions_count_up(case: Case, o: Observation) -> str | None:
    a = case.arrays
    q = a["query_start_loc"].astype(np.int64)
    c = a["num_computed_tokens"].astype(np.int64)[a["idx_mapping"]]
    for b in range(len(c)):
        want = c[b] + np.arange(q[b + 1] - q[b])
        got = o.out["pos"][q[b] : q[b + 1]]
        if not np.array_equal(got, want):
            return f"row {b}: positions {got[:4].tolist()}..., not {want[:4].tolist()}... (count {c[b]})"
    return None


def length_is_count_plus_chunk(case: Case, o: Observation) -> str | None:
    a = case.arrays
    qlen = np.diff(a["query_start_loc"].astype(np.int64))
    c = a["num_computed_tokens"].astype(np.int64)[a["idx_mapping"]]
    got = o.out["seq_lens"].astype(np.int64)
    for b in range(len(c)):
        if got[b] != c[b] + qlen[b]:
            return f"row {b}: seq_lens = {got[b]}, not {c[b]} + {qlen[b]}"
    return None


def padded_lengths_zero(case: Case, o: Observation) -> str | None:
    B, M = int(case.scalars["num_reqs"]), int(case.scalars["max_num_reqs"])
    got = o.out["seq_lens"][B:M]
    bad = np.flatnonzero(got != 0)
    return f"seq_lens[{B + bad[0]}] = {int(got[bad[0]])} past the batch, not 0" if bad.size else None


PROPERTIES: tuple[Property, ...] = (
    Property("positions_count_up", "a row's positions are its count, its count + 1, ...", positions_count_up),
    Property("length_is_count_plus_chunk", "a row's length is its count plus its tokens", length_is_count_plus_chunk),
    Property("padded_lengths_zero", "the lengths past the batch, up to max_num_reqs, are 0", padded_lengths_zero),
    Property("nothing_past_the_buffers", "nothing is written outside pos and seq_lens", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
