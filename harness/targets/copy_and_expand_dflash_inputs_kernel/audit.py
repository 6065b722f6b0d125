"""What a caller of ``copy_and_expand_dflash_inputs_kernel`` relies on (docs/CONTRACT.md §9): the
properties ``eaglefuzz audit`` checks on one implementation's outputs (:mod:`...checking.audit`)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property, nothing_past_num_reqs
from .edges import allocated_blocks


def _requests(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    a, s = case.arrays, case.scalars
    qsl = a["query_start_loc"].astype(np.int64)
    rej = a.get("num_rejected_tokens")
    rej = np.zeros(len(qsl) - 1, np.int64) if rej is None else rej.astype(np.int64)
    return qsl[:-1], qsl[1:], rej, int(s["num_query_per_req"]), int(s["block_size"])


def df_context_slots_distinct(case: Case, o: Observation) -> str | None:
    qs, nqs, _, _, _ = _requests(case)
    slots = o.out["out_context_slot_mapping"]
    for r, (lo, hi) in enumerate(zip(qs.tolist(), nqs.tolist(), strict=True)):
        seen: dict[int, int] = {}
        for i in range(lo, hi):
            v = int(slots[i])
            if v in seen:
                return (f"request {r}: context tokens {seen[v]} and {i} both get KV slot {v} (positions "
                        f"{int(case.arrays['target_positions'][seen[v]])} and {int(case.arrays['target_positions'][i])}): "
                        "positions are not token indices")
            seen[v] = i
    return None


def df_query_not_on_accepted_context(case: Case, o: Observation) -> str | None:
    qs, nqs, rej, Q, _ = _requests(case)
    ctx, query = o.out["out_context_slot_mapping"], o.out["out_query_slot_mapping"]
    for r in range(len(qs)):
        accepted = {int(v): i for i, v in zip(range(int(qs[r]), int(nqs[r] - rej[r])), ctx[qs[r] : nqs[r] - rej[r]], strict=True)}
        for q in range(Q):
            v = int(query[r * Q + q])
            if v in accepted:
                return (f"request {r}: query slot {q} writes KV slot {v}, accepted context token "
                        f"{accepted[v]}'s: the draft overwrites the target's KV")
    return None


def df_query_in_allocation(case: Case, o: Observation) -> str | None:
    qs, _, _, Q, bs = _requests(case)
    alloc = allocated_blocks(case)
    table = case.arrays["block_table"].astype(np.int64)
    query = o.out["out_query_slot_mapping"]
    for r in range(len(qs)):
        owned = table[r, : int(alloc[r])].tolist()
        for q in range(Q):
            v = int(query[r * Q + q])
            if v // bs not in owned:
                return (f"request {r} owns block columns [0, {int(alloc[r])}) (lookahead "
                        f"{case.scalars.get('lookahead_tokens', case.scalars['num_speculative_tokens'] + 1)}), but query "
                        f"slot {q} writes KV slot {v} of block {v // bs}: a block it was not allocated")
    return None


_M_ROPE = ("production reaches it on an M-RoPE target with a text DFlash draft: target_positions is row 0 of the "
           "M-RoPE positions (docs/CONTRACT.md §9.2; vLLM: vllm/v1/worker/gpu_model_runner.py, "
           "GPUModelRunner._get_positions; vllm/v1/spec_decode/dflash.py, DFlashProposer._warn_if_multimodal)")

PROPERTIES: tuple[Property, ...] = (
    Property("context_slots_distinct", "within a request, every context token gets a KV slot of its own",
             df_context_slots_distinct, hazard_class="mrope_positions", source="issue #54498", rests_on=_M_ROPE),
    Property("query_not_on_accepted_context", "no query slot writes the KV slot of an accepted context token of "
             "its request", df_query_not_on_accepted_context,
             rests_on="docs/CONTRACT.md §9.2: every query position lies in the table, so the block clamp never folds "
                      "one onto a context slot (vLLM: vllm/v1/worker/gpu_model_runner.py, "
                      "GPUModelRunner._input_fits_in_drafter)"),
    Property("query_slots_in_allocation", "every query slot lies in a block allocated to its request (lookahead "
             "K + 1)", df_query_in_allocation, hazard_class="query_past_allocation", source="PR #42971, PR #54296",
             rests_on="docs/CONTRACT.md §9.2 allocation: the scheduler allocates K + 1 lookahead slots for DFlash "
                      "(vLLM: vllm/config/vllm.py, VllmConfig.num_lookahead_tokens; vllm/v1/core/kv_cache_manager.py, "
                      "KVCacheManager.allocate_slots)"),
    Property("nothing_outside_buffers", "nothing is written outside the buffers", nothing_past_num_reqs),
)
"""The properties, in the order the audit reports them."""


AUDIT = Audit(PROPERTIES)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
