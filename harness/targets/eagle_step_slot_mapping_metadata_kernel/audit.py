"""What a caller of ``eagle_step_slot_mapping_metadata_kernel`` relies on (docs/CONTRACT.md §6):
the properties ``eaglefuzz audit`` checks on one implementation's outputs
(:mod:`...checking.audit`)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from .layout import PAD_ID, Step, allocated_columns


def es_slot_of_appended_token(case: Case, o: Observation) -> str | None:
    """The step's slot is where attention reads the appended token: token index
    ``seq_lens[r]`` (as read), in its row's block ``seq_lens[r] // bs``."""
    t = Step(case)
    slots = o.out["out_slot_mapping"]
    table = case.arrays["block_table"].astype(np.int64)
    for r in np.flatnonzero(~t.exceeds).tolist():
        s = int(t.seq[r])
        if s >= t.M:
            continue  # no token index M: the step parks nothing in range
        want = int(table[r, min(s // t.bs, t.nb - 1)]) * t.bs + s % t.bs
        if int(slots[r]) != want:
            return (f"request {r}: position {int(t.pos[r])} steps to {int(t.p[r])} and gets slot {int(slots[r])}, "
                    f"but the token it appends has index seq_lens = {s} (slot {want}): positions are not token indices")
    return None


def es_slot_in_allocated_block(case: Case, o: Observation) -> str | None:
    alloc = allocated_columns(case)
    if alloc is None:
        return None
    t = Step(case)
    slots = o.out["out_slot_mapping"]
    table = case.arrays["block_table"].astype(np.int64)
    for r in np.flatnonzero(~t.exceeds).tolist():
        owned = table[r, : int(alloc[r])]
        if int(slots[r]) // t.bs not in owned.tolist():
            return (f"request {r} owns block columns [0, {int(alloc[r])}) but its step slot {int(slots[r])} lies in "
                    f"column {int(t.col[r])}, block {int(slots[r]) // t.bs}: a stale column's block")
    return None


def es_padding_is_pad(case: Case, o: Observation) -> str | None:
    t = Step(case)
    slots, w = o.out["out_slot_mapping"], o.written["out_slot_mapping"]
    for r in range(t.B, t.IB):
        if not w[r] or int(slots[r]) != PAD_ID:
            return f"cudagraph padding slot {r} is {'unwritten' if not w[r] else int(slots[r])}, not PADDING_SLOT_ID"
    return None


PROPERTIES: tuple[Property, ...] = (
    Property("slot_of_appended_token", "each request's step slot is the KV slot of the token it appends "
             "(token index seq_lens[r], where attention reads it)", es_slot_of_appended_token,
             hazard_class="mrope_positions", source="issue #54498",
             rests_on="production reaches it on an M-RoPE target with a text draft: the position is row 0 of the "
                      "M-RoPE positions, the temporal coordinate (docs/CONTRACT.md §6.2; vLLM: "
                      "vllm/v1/spec_decode/llm_base_proposer.py, SpecDecodeBaseProposer._update_positions_dependent_metadata)"),
    Property("slot_in_allocated_block", "each request's step slot lies in one of the blocks allocated to it "
             "(num_allocated_blocks)", es_slot_in_allocated_block,
             hazard_class="stale_block_columns", source="PR #54296",
             rests_on="docs/CONTRACT.md §6.2 allocation: the scheduler allocates K lookahead slots (vLLM: "
                      "vllm/config/vllm.py, VllmConfig.num_lookahead_tokens; vllm/v1/core/kv_cache_manager.py, "
                      "KVCacheManager.allocate_slots)"),
    Property("padding_slots_are_pad", "every cudagraph padding entry [B, IB) is PADDING_SLOT_ID", es_padding_is_pad),
    Property("nothing_past_num_reqs", "nothing is written outside the buffers", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""


AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
