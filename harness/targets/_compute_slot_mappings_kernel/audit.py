"""What a caller of ``_compute_slot_mappings_kernel`` relies on (docs/CONTRACT.md §22).

Attention writes each token's KV entry at its slot: a token's slot must lie inside one of its own
request's blocks (a block of its state row's table, never another request's), at its position's
offset; a dummy row's, a disabled group's and another rank's tokens must be ``PAD_ID`` (no write);
and everything past the step's tokens up to ``max_num_tokens`` must be ``PAD_ID`` (vLLM reads
``[:, :num_tokens_padded]``; a stale slot there writes into a live request's KV: PR #36580)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from .layout import groups, table


def slot_in_own_blocks(case: Case, o: Observation) -> str | None:
    a = case.arrays
    q = a["query_start_loc"].astype(np.int64)
    out = o.out["slot_mappings"]
    for g in range(groups(case)):
        bs = int(a["block_sizes"][g])
        for b, s in enumerate(a["idx_mapping"]):
            slots = out[g, q[b] : q[b + 1]]
            live = slots[slots != -1]
            if s < 0 or not a["slot_mapping_enabled"][g]:
                if live.size:
                    return f"group {g}, row {b}: slot {int(live[0])} written for a row or group that writes no KV"
                continue
            own = set(a[table(g)][s].tolist())
            bad = [int(x) for x in live if x // bs not in own]
            if bad:
                return f"group {g}, row {b}: slot {bad[0]} lies in block {bad[0] // bs}, not one of its request's"
    return None


def padding_is_pad(case: Case, o: Observation) -> str | None:
    end = int(case.arrays["query_start_loc"][-1])
    tail = o.out["slot_mappings"][:, end:]
    bad = np.argwhere(tail != -1)
    return f"group {int(bad[0][0])}: slot_mappings[{end + int(bad[0][1])}] = {int(tail[tuple(bad[0])])} past the " \
           f"step's {end} tokens, not PAD_ID" if bad.size else None


PROPERTIES: tuple[Property, ...] = (
    Property("slots_in_the_requests_blocks", "a token's slot lies in one of its own request's blocks (a dummy row's "
             "or a disabled group's: PAD_ID)", slot_in_own_blocks, "stale_slot_mapping", "PR #36580",
             "§22.2: every position inside the table (AttentionSpec.max_num_blocks_per_req)"),
    Property("padding_is_pad_id", "every slot past the step's tokens is PAD_ID (no stale slot of an earlier chunk)",
             padding_is_pad, "stale_slot_mapping", "PR #36580",
             "§22.2: the padding program covers [query_start_loc[B], max_num_tokens)"),
    Property("nothing_past_the_buffer", "nothing is written outside slot_mappings", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""

AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
