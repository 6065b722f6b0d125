"""What a caller of ``extend_all_queries_by_N`` relies on (docs/CONTRACT.md §4): the properties ``eaglefuzz audit``
checks on one implementation's outputs (:mod:`...checking.audit`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.case import Case
from ...targetkit.properties import Audit, Observation, Property
from .record import TARGET, build_metadata, tensor


def _np(t: Any) -> np.ndarray:
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


def eq_copies_agree(case: Case, o: Observation) -> str | None:
    dev, cpu = _np(o.result.query_start_loc), _np(o.result.query_start_loc_cpu)
    if dev.dtype != cpu.dtype:
        return f"query_start_loc is {dev.dtype} on the device but {cpu.dtype} on the CPU"
    diff = np.flatnonzero(dev != cpu) if dev.shape == cpu.shape else np.array([0])
    if diff.size:
        i = int(diff[0])
        return f"query_start_loc[{i}] = {dev[i]} on the device, {cpu[i]} on the CPU"
    return None


def eq_non_decreasing(case: Case, o: Observation) -> str | None:
    for name in ("query_start_loc", "query_start_loc_cpu"):
        q = _np(getattr(o.result, name)).astype(np.int64)
        drop = np.flatnonzero(np.diff(q) < 0)
        if drop.size:
            i = int(drop[0])
            return f"{name} decreases after extension: [{i}] = {q[i]}, [{i + 1}] = {q[i + 1]}"
    return None


def eq_tokens_match(case: Case, o: Observation) -> str | None:
    before = int(case.scalars["num_actual_tokens"]) - int(case.arrays["query_start_loc"][-1])
    after = int(o.result.num_actual_tokens) - int(_np(o.result.query_start_loc)[-1])
    if before != after:
        return (f"num_actual_tokens - query_start_loc[-1] was {before}, is {after}: the token count no "
                "longer matches the query starts")
    return None


def eq_computed_tokens_unchanged(case: Case, o: Observation) -> str | None:
    q0 = np.diff(case.arrays["query_start_loc"].astype(np.int64))
    s0 = case.arrays["seq_lens"].astype(np.int64)
    q1 = np.diff(_np(o.result.query_start_loc).astype(np.int64))
    s1 = _np(o.result.seq_lens).astype(np.int64)
    moved = np.flatnonzero((s1 - q1) != (s0 - q0))
    if moved.size:
        r = int(moved[0])
        return (f"request {r}: seq_lens - query length was {s0[r] - q0[r]} (the tokens already computed), "
                f"is {s1[r] - q1[r]} after extension")
    return None


PROPERTIES: tuple[Property, ...] = (
        Property("query_start_loc_copies_agree", "the device and CPU copies of query_start_loc hold the same "
                 "numbers in the same dtype", eq_copies_agree),
        Property("query_start_loc_non_decreasing", "both copies of query_start_loc still never decrease",
                 eq_non_decreasing),
        Property("tokens_match_query_start_loc", "num_actual_tokens moves with query_start_loc[-1]", eq_tokens_match),
        Property("computed_tokens_unchanged", "seq_lens - query length (the tokens already computed) is the "
                 "same before and after", eq_computed_tokens_unchanged),
    )
"""The properties, in the order the audit reports them."""


def run(case: Case, impl: Any, device: str) -> Any:
    """``impl`` called on ``case`` as vLLM calls it: what the properties look at."""
    dev = device if case.scalars["device_copies_on_device"] else "cpu"
    cad = build_metadata(case, device, TARGET.types.CommonAttentionMetadata)
    return TARGET.call(impl, cad, case.scalars["N"], tensor(case.arrays["arange"], dev),
                       tensor(case.arrays["new_slot_mapping"], dev))


AUDIT = Audit(PROPERTIES, run=run)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
