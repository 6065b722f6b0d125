"""The extended tier of ``extend_all_queries_by_N``: docs/CONTRACT.md §4.4.

Inputs vLLM's call site does not produce where the function's result is still defined. What a
careless caller could hand it: an empty batch, empty queries, ``N = 0``, a padded batch
(``num_reqs < batch_size()``), padded token counts and ``max_query_len`` above the longest
query, non-causal metadata, the "device" copies on the CPU, negative block ids and slot ids past
int32, values near and at the int32 limit. And what no caller of vLLM's makes: an int64
``arange`` (the device copy comes back int64), an ``arange`` that is not ``0, 1, 2, ...`` (or one
element long: it broadcasts), a CPU copy of ``query_start_loc`` holding other numbers than the
device copy (each is extended from its own values), a negative ``N``, and results past the int32
range (torch wraps them). The oracles model all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import (
    INT32_MAX,
    INT32_MIN,
    Scale,
)
from ...targetkit.base import ContractViolation
from .layout import NEAR_LIMIT, build

I32, I64 = np.dtype(np.int32), np.dtype(np.int64)


FEATURES = {
    "empty_batch": "no request at all (query_start_loc = [0])",
    "empty_query": "some request has no query token (query_start_loc repeats)",
    "n_zero": "N = 0 (nothing added; the result is still a new object)",
    "padded_batch": "num_reqs < len(seq_lens): batch_size() is not num_reqs",
    "padded_token_count": "num_actual_tokens above query_start_loc[-1]",
    "query_len_above_max": "max_query_len above the longest query",
    "non_causal": "causal = False",
    "device_copies_on_cpu": "the 'device' copies live on the CPU",
    "ids_outside_vllm": "negative block ids, or slot ids past the int32 range",
    "near_int32_limit": "some extended int32 value within 2**16 of INT32_MAX (never past it)",
    "at_int32_limit": "some extended int32 value equal to INT32_MAX",
    "int64_arange": "an int64 arange: the device copy of query_start_loc comes back int64",
    "arange_not_identity": "an arange other than 0, 1, 2, ...: the device copy adds N*arange[i], the CPU copy i*N",
    "one_element_arange": "a one-element arange: it broadcasts",
    "cpu_copy_differs": "the CPU copy of query_start_loc holds other numbers: each copy extended from its own",
    "negative_n": "N < 0: the same formulas",
    "wraps_int32": "an extended int32 value past the int32 range: torch wraps it",
}


def validate(case: Case, arrays: dict) -> None:
    """The extended tier's rules (raises :class:`ContractViolation`)."""
    a, s = case.arrays, case.scalars
    for name, (dtype, ndim) in arrays.items():
        if name not in a:
            raise ContractViolation(f"arrays.{name}", "is required")
        ok = (I32, I64) if name == "arange" else (dtype,)
        if a[name].dtype not in ok or a[name].ndim != ndim:
            raise ContractViolation(f"arrays.{name}", f"must be a {ndim}-D {' or '.join(map(str, ok))} array")
    extra = sorted(set(a) - set(arrays) - {"query_start_loc_cpu"})
    if extra:
        raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this target")
    for name in ("num_reqs", "num_actual_tokens", "max_query_len", "max_seq_len"):
        v = s.get(name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ContractViolation(f"scalars.{name}", "must be a non-negative int")
    N = s.get("N")
    if not isinstance(N, int) or isinstance(N, bool) or not INT32_MIN < N <= INT32_MAX:
        raise ContractViolation("scalars.N", "must be an int32 above -2**31 (extended tier)")
    for name in ("causal", "optional_fields", "device_copies_on_device"):
        if not isinstance(s.get(name), bool):
            raise ContractViolation(f"scalars.{name}", "must be true or false")
    qsl, seq = a["query_start_loc"].astype(np.int64), a["seq_lens"].astype(np.int64)
    B = len(seq)
    if len(qsl) != B + 1:
        raise ContractViolation("arrays.query_start_loc", "must have len(seq_lens) + 1 entries")
    if qsl[0] != 0 or np.any(np.diff(qsl) < 0):
        raise ContractViolation("arrays.query_start_loc", "must start at 0 and never decrease")
    if np.any(seq < 0):
        raise ContractViolation("arrays.seq_lens", "must be non-negative")
    if a["block_table"].shape[0] != B:
        raise ContractViolation("arrays.block_table", "must have one row per request (len(seq_lens))")
    cpu = a.get("query_start_loc_cpu")
    if cpu is not None and (cpu.dtype != I32 or cpu.shape != qsl.shape):
        raise ContractViolation("arrays.query_start_loc_cpu", "must be an int32 array as long as query_start_loc")
    arange = a["arange"]
    if len(arange) != 1 and len(arange) < B + 1:
        raise ContractViolation("arrays.arange", "must be one element or at least len(query_start_loc) long (torch raises otherwise)")
    if np.any(np.abs(arange.astype(np.int64)) > INT32_MAX):
        raise ContractViolation("arrays.arange", "must hold values within the int32 range (extended tier)")
    if s["num_reqs"] > B:
        raise ContractViolation("scalars.num_reqs", "must be at most len(seq_lens)")


def features_of(case: Case) -> frozenset[str]:
    a, s = case.arrays, case.scalars
    arange, qsl, seq, N = a["arange"], a["query_start_loc"].astype(np.int64), a["seq_lens"].astype(np.int64), s["N"]
    rows = len(qsl)
    f = set()
    if arange.dtype == I64:
        f.add("int64_arange")
    if len(arange) == 1:
        f.add("one_element_arange")
    elif not np.array_equal(arange[:rows].astype(np.int64), np.arange(rows)):
        f.add("arange_not_identity")
    if "query_start_loc_cpu" in a and not np.array_equal(a["query_start_loc_cpu"], a["query_start_loc"]):
        f.add("cpu_copy_differs")
    if N < 0:
        f.add("negative_n")
    ext = np.concatenate([qsl + np.arange(rows) * N, seq + N])
    if np.any((ext > INT32_MAX) | (ext < INT32_MIN)):
        f.add("wraps_int32")
    elif ext.size and int(ext.max()) >= INT32_MAX - NEAR_LIMIT:
        f.add("at_int32_limit" if int(ext.max()) == INT32_MAX else "near_int32_limit")
    B, lens = len(seq), np.diff(qsl)
    checks = {
        "empty_batch": B == 0,
        "empty_query": bool(np.any(lens == 0)),
        "n_zero": N == 0,
        "padded_batch": s["num_reqs"] < B,
        "padded_token_count": s["num_actual_tokens"] > int(qsl[-1]),
        "query_len_above_max": s["max_query_len"] > (int(lens.max()) if B else 0),
        "non_causal": not s["causal"],
        "device_copies_on_cpu": not s["device_copies_on_device"],
        "ids_outside_vllm": bool(np.any(a["block_table"] < 0)) or any(
            bool(np.any((a[n] < -1) | (a[n] >= 1 << 31))) for n in ("slot_mapping", "new_slot_mapping")),
    }
    f.update(k for k, hit in checks.items() if hit)
    return frozenset(f)


def _body(c: Chooser, scale: Scale) -> Case:
    """A small case with some of the extended tier's inputs, each drawn on its own."""
    R = 0 if c.chance(0.1) else c.integer(1, min(scale.max_requests, 16))
    lengths = [c.integer(0, 64) if c.chance(0.3) else c.integer(1, 64) for _ in range(R)]
    seq = [q + c.integer(0, 4096) for q in lengths]
    N = c.integer(-64, -1) if c.chance(0.3) else c.integer(0, 64)
    case = build(
        lengths, seq, N=max(N, 0), num_reqs=c.integer(0, R) if c.chance(0.3) else R,
        token_pad=c.integer(1, 64) if c.chance(0.2) else 0, query_len_pad=c.integer(1, 16) if c.chance(0.2) else 0,
        seq_len_pad=c.integer(0, 16), arange_extra=c.integer(0, 8), width=c.integer(1, 4), seed=c.integer(0, 1 << 30),
        causal=not c.chance(0.2), optional_fields=c.chance(0.3), on_device=not c.chance(0.2),
        wide_ids=c.chance(0.3),
    )
    a = case.arrays
    changes: dict[str, Any] = {}
    kind = c.choice(["identity", "int64", "scrambled", "one"])
    if kind == "int64":
        changes["arange"] = a["arange"].astype(np.int64)
    elif kind == "scrambled":
        changes["arange"] = c.array(np.int32, len(a["arange"]), -1000, 1000)
    elif kind == "one":
        changes["arange"] = c.array(np.int32, 1, -8, 8)
    if c.chance(0.3):
        cpu = a["query_start_loc"].astype(np.int64) + c.array(np.int64, R + 1, -4, 4)
        changes["query_start_loc_cpu"] = cpu.astype(np.int32)
    scalars: dict[str, Any] = {"N": N}
    limit = c.choice(["none", "near", "wraps"]) if R else "none"
    if limit == "near" and N >= 0:
        # Stretch one request so that the last extended start lands at or just below INT32_MAX
        # (the extended starts never decrease, so none passes it), and put one seq_len there too.
        at = c.chance(0.5)  # at the limit, or within 4096 of it
        slack = 0 if at else c.integer(1, 4096)
        lens = np.diff(a["query_start_loc"].astype(np.int64))
        lens[c.integer(0, R - 1)] += max(0, INT32_MAX - slack - R * N - int(lens.sum()))
        qsl = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        seq_lens = np.maximum(a["seq_lens"].astype(np.int64), lens)
        seq_lens = np.minimum(seq_lens, INT32_MAX - N)
        seq_lens[c.integer(0, R - 1)] = INT32_MAX - N - (0 if at else c.integer(1, 4096))
        changes.update(query_start_loc=qsl, seq_lens=seq_lens.astype(np.int32))
        changes.pop("query_start_loc_cpu", None)
        scalars.update(num_actual_tokens=int(qsl[-1]) + case.scalars["num_actual_tokens"] - int(a["query_start_loc"][-1]),
                       max_query_len=int(lens.max()), max_seq_len=int(seq_lens.max()))
    elif limit == "wraps" and c.chance(0.5):  # a seq_len near the limit, so that seq_lens + N wraps
        seq_lens = a["seq_lens"].copy()
        seq_lens[c.integer(0, R - 1)] = INT32_MAX - c.integer(0, 8)
        changes["seq_lens"] = seq_lens
        scalars["N"] = abs(N) + 16
        scalars["max_seq_len"] = INT32_MAX
    return case.replace(arrays=changes, scalars=scalars)


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return _body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(_body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """The CPU copy made equal to the device copy; the arange made int32 0, 1, 2, ...;
    (the production moves drop requests, which a CPU copy must follow)."""
    a = case.arrays
    if "query_start_loc_cpu" in a:
        yield Case(case.kernel, {k: v for k, v in a.items() if k != "query_start_loc_cpu"},
                   case.scalars, case.launch, case.note)
    rows = len(a["query_start_loc"])
    ident = np.arange(max(rows, 1), dtype=np.int32)
    if a["arange"].dtype != np.int32 or not np.array_equal(a["arange"], ident):
        yield case.replace(arrays={"arange": ident})
