"""What a caller of ``update_num_computed_tokens_for_batch_change`` relies on (docs/CONTRACT.md §8):
the properties ``eaglefuzz audit`` checks on one implementation's results
(:mod:`...checking.audit`), and how a case is run for them."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, HazardDraws, Observation, Property, completes
from . import edges
from .layout import ARRAYS, INOUT, Rows
from .record import _Buffer, variants


def run(case: Case, impl: Any, device: str) -> dict[str, Any]:
    """``impl`` called on ``case`` as vLLM's runner calls it (eager or compiled, as the case
    says), each tensor a view inside poison: the two updated buffers, whole (guards included),
    and where the view starts and ends in them."""
    import torch

    buffers = {n: _Buffer(case.arrays[n], device) for n in ARRAYS}
    variants(impl)[case.launch["mode"]](*(buffers[n].view for n in ARRAYS))
    if device != "cpu":
        torch.cuda.synchronize()
    return {n: (buffers[n].read(), buffers[n].before, buffers[n].size, buffers[n].initial) for n in INOUT}


def bc_only_batch_rows_written(case: Case, o: Observation) -> str | None:
    n = len(case.arrays["prev_positions"])
    for name in INOUT:
        now, before, size, initial = o.result[name]
        changed = np.flatnonzero(now != initial)
        keep = n if name == "num_computed_tokens" else size
        for flat in changed.tolist():
            i = flat - before
            if not 0 <= i < keep:
                where = "a guard band" if not 0 <= i < size else f"row {i}, past num_reqs = {n}"
                return f"{name}: {where} is written"
    return None


def bc_accepted_at_least_one(case: Case, o: Observation) -> str | None:
    now, before, size, _ = o.result["num_accepted_tokens"]
    got = now[before : before + size]
    t = Rows(case)
    for i in np.flatnonzero(got < 1).tolist():
        return (f"request {i} (previous row {int(t.prev[i])}) gets num_accepted_tokens = {int(got[i])}: a request "
                "that had drafts accepts at least its bonus token")
    return None


PROPERTIES: tuple[Property, ...] = (
    completes("the call returns: every row it gathers (prev_positions clamped at 0) is a row of "
              "valid_sampled_token_count, num_computed_tokens and prev_num_draft_tokens",
              hazard_class="stale_previous_rows", source="PR #47199",
              rests_on="docs/CONTRACT.md §8.2: every previous row is in the previous batch, the map and the counts "
                       "being rebuilt together every step (vLLM: vllm/v1/worker/gpu_model_runner.py, "
                       "GPUModelRunner._bookkeeping_sync; vllm/v1/worker/gpu_model_runner.py, "
                       "GPUModelRunner.propose_draft_token_ids); PR #47199 reports a stale row in production, on a "
                       "path not located in 0.33.0"),
    Property("only_batch_rows_written", "only num_computed_tokens[:num_reqs] and num_accepted_tokens are written",
             bc_only_batch_rows_written),
    Property("accepted_at_least_one", "every request keeps num_accepted_tokens >= 1", bc_accepted_at_least_one,
             rests_on="docs/CONTRACT.md §8.2: a row with drafts has 1 to d + 1 valid tokens (vLLM: "
                      "vllm/v1/spec_decode/llm_base_proposer.py, SpecDecodeBaseProposer.prepare_next_token_ids_padded)"),
)
"""The properties, in the order the audit reports them."""


AUDIT = Audit(
    PROPERTIES, run=run,
    hazards=HazardDraws(
        strategy=edges.hazard_strategy,
        validate=edges.validate_hazard,
        hazards_of=edges.hazards_of,
        shrink_candidates=edges.hazard_shrink_candidates,
    ),
)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
