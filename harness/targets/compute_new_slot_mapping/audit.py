"""What a caller of ``compute_new_slot_mapping`` relies on (docs/CONTRACT.md §7): the properties
``eaglefuzz audit`` checks on one implementation's result (:mod:`...checking.audit`), and how a
case is run for them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import cdiv
from ...targetkit.base import ContractViolation
from ...targetkit.properties import Audit, HazardDraws, Observation, Property, completes
from . import edges
from .layout import Tokens
from .record import TARGET, TENSORS, build_metadata

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
    t = Tokens(case)
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
    t = Tokens(case)
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


# -- hazard draws (their strategy is in edges.py; the rules that need the record are here) --


def validate_hazard(case: Case) -> None:
    """The hazard draws' rules: a production case but for the table, which may be narrower
    than max_model_len needs (``nb * bs < M``), with distinct block ids across rows."""
    a, s = case.arrays, case.scalars
    R, nb = a["block_table"].shape
    if nb < 1 or nb * s["block_size"] >= s["max_model_len"]:
        raise ContractViolation("arrays.block_table", "hazard draws have a table narrower than max_model_len needs")
    wide = int(cdiv(s["max_model_len"], s["block_size"]))
    padded = np.concatenate([a["block_table"], np.zeros((R, wide - nb), np.int32)], axis=1)
    TARGET.validate(case.replace(arrays={"block_table": padded}))


def hazard_shrink_candidates(case: Case) -> Iterator[Case]:
    """The target's own moves (drop requests, no views, no rejections)."""
    yield from TARGET.shrink_candidates(case)


AUDIT = Audit(
    PROPERTIES, run=run,
    hazards=HazardDraws(
        strategy=edges.hazard_strategy,
        validate=validate_hazard,
        hazards_of=edges.hazards_of,
        shrink_candidates=hazard_shrink_candidates,
    ),
)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
