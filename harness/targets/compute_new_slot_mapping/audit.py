"""What a caller of ``compute_new_slot_mapping`` relies on (docs/CONTRACT.md §7): the properties
``eaglefuzz audit`` checks on one implementation's result (:mod:`...checking.audit`), and how a
case is run for them."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Observation, Property, completes
from .record import TARGET, TENSORS, _Tokens, build_metadata

_TABLE = ("docs/CONTRACT.md §7.2: the table is as wide as max_model_len needs (vLLM: "
          "vllm/v1/worker/block_table.py, get_block_table_width)")


def run(case: Case, impl: Any, device: str) -> np.ndarray:
    """``impl`` called on ``case`` with vLLM's keywords: its result on the host."""
    import torch

    def tensor(name: str) -> Any:
        return torch.from_numpy(case.arrays[name].copy()).to(device)

    s = case.scalars
    cad = build_metadata(case, tensor, TARGET.types.CommonAttentionMetadata)
    result = impl(cad=cad, **{n: tensor(n) for n in TENSORS}, block_size=s["block_size"],
                  num_new_tokens=s["num_new_tokens"], max_model_len=s["max_model_len"])
    return result.detach().cpu().numpy()


def nsm_slot_in_own_row(case: Case, o: Observation) -> str | None:
    t = _Tokens(case)
    table = case.arrays["block_table"].astype(np.int64)
    out = np.asarray(o.result).astype(np.int64)
    q = np.minimum(t.pos, t.M - 1)
    col = q // t.bs
    inside = col < t.nb
    own = table[t.owner, np.minimum(col, t.nb - 1)] * t.bs + q % t.bs if t.owner.size else np.zeros(0, np.int64)
    bad = t.live & (out != -1) & (~inside | (out != own))
    for i in np.flatnonzero(bad)[:1].tolist():
        r, v = int(t.owner[i]), int(out[i])
        return (f"token {i} (request {r}, position {int(t.pos[i])}, column {int(col[i])} of a {t.nb}-column row) "
                f"gets slot {v}: block {v // t.bs} is not request {r}'s block of that column")
    return None


def nsm_padding(case: Case, o: Observation) -> str | None:
    t = _Tokens(case)
    out = np.asarray(o.result)
    for i in np.flatnonzero(~t.live).tolist():
        if int(out[i]) != -1:
            return f"token {i} is rejected or past max_model_len but gets slot {int(out[i])}, not PADDING_SLOT_ID"
    return None


PROPERTIES: tuple[Property, ...] = (
    completes(hazard_class="block_columns_past_row", source="PR #54296", rests_on=_TABLE),
    Property("slot_in_own_row", "every live token's slot lies in a block of its own request's row (or is "
             "PADDING_SLOT_ID: no KV write)",
             nsm_slot_in_own_row, hazard_class="block_columns_past_row", source="PR #54296", rests_on=_TABLE),
    Property("padding_for_rejected_and_past_max", "rejected tokens and positions past max_model_len get "
             "PADDING_SLOT_ID", nsm_padding),
)
"""The properties, in the order the audit reports them."""
