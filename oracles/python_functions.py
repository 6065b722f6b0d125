"""Oracles for the two Python functions of the module, written from docs/CONTRACT.md §4-§5.

Both work on plain data (NumPy arrays, Python ints, nested dicts), never on the metadata or
config objects themselves: the harness turns the case into plain data, and the function's
result back into plain data, and compares.

``extend_all_queries_by_n`` (NumPy, vectorised) and ``extend_all_queries_by_n_loops`` (plain
Python ints, one element at a time) are independent computations of §4 and must agree.
int32 results follow torch: exact arithmetic, then a two's-complement wrap to int32 (in-contract
cases never wrap; the wrap only fixes what an out-of-contract case is compared against).

``draft_vllm_config`` computes §5 on a nested-dict description of a ``VllmConfig``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "CHANGED_CONFIG_FIELDS",
    "CHANGED_METADATA_FIELDS",
    "draft_vllm_config",
    "extend_all_queries_by_n",
    "extend_all_queries_by_n_loops",
]

CHANGED_METADATA_FIELDS = (
    "query_start_loc",
    "query_start_loc_cpu",
    "seq_lens",
    "num_actual_tokens",
    "max_query_len",
    "max_seq_len",
    "slot_mapping",
)
"""The metadata fields §4 changes; every other field keeps its value."""

CHANGED_CONFIG_FIELDS = ("quant_config", "model_config", "parallel_config")
"""The config fields §5 changes; every other field keeps its value."""


def _wrap32(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.int64).astype(np.int32)


def extend_all_queries_by_n(
    query_start_loc: np.ndarray,
    seq_lens: np.ndarray,
    num_actual_tokens: int,
    max_query_len: int,
    max_seq_len: int,
    n: int,
    new_slot_mapping: np.ndarray,
    *,
    arange: np.ndarray | None = None,
    query_start_loc_cpu: np.ndarray | None = None,
) -> dict[str, Any]:
    """The changed fields of the extended metadata, by field name (§4, §4.4).

    ``query_start_loc`` is the device copy's value and ``query_start_loc_cpu`` the CPU copy's
    (the same numbers unless given); each copy is extended from its own values. The device
    copy adds ``n * arange[i]`` (``arange`` 0, 1, 2, ... unless given; a one-element
    ``arange`` broadcasts), in int32 with an int32 ``arange`` and in int64 with an int64 one
    (torch's promotion); the CPU copy adds ``i * n`` in int32. The batch size is
    ``len(seq_lens)``, not ``num_reqs`` and not ``len(query_start_loc)``.
    """
    qsl = np.asarray(query_start_loc).astype(np.int64)
    rows = qsl.shape[0]
    if arange is None:
        new_qsl = _wrap32(qsl + np.arange(rows, dtype=np.int64) * int(n))
    else:
        step = np.asarray(arange)[:rows].astype(np.int64) * int(n)  # broadcasts when 1 long
        new_qsl = qsl + step
        new_qsl = new_qsl if np.asarray(arange).dtype == np.int64 else _wrap32(new_qsl)
    cpu = qsl if query_start_loc_cpu is None else np.asarray(query_start_loc_cpu).astype(np.int64)
    new_cpu = _wrap32(cpu + np.arange(cpu.shape[0], dtype=np.int64) * int(n))
    batch = int(np.asarray(seq_lens).shape[0])
    return {
        "query_start_loc": new_qsl,
        "query_start_loc_cpu": new_cpu,
        "seq_lens": _wrap32(np.asarray(seq_lens).astype(np.int64) + int(n)),
        "num_actual_tokens": int(num_actual_tokens) + batch * int(n),
        "max_query_len": int(max_query_len) + int(n),
        "max_seq_len": int(max_seq_len) + int(n),
        "slot_mapping": np.array(new_slot_mapping, copy=True),
    }


def _to_int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def extend_all_queries_by_n_loops(
    query_start_loc: np.ndarray,
    seq_lens: np.ndarray,
    num_actual_tokens: int,
    max_query_len: int,
    max_seq_len: int,
    n: int,
    new_slot_mapping: np.ndarray,
    *,
    arange: np.ndarray | None = None,
    query_start_loc_cpu: np.ndarray | None = None,
) -> dict[str, Any]:
    """The same as :func:`extend_all_queries_by_n`, one Python int at a time."""
    qsl = query_start_loc.tolist()
    wide = arange is not None and np.asarray(arange).dtype == np.int64
    if arange is None:
        steps = list(range(len(qsl)))
    else:
        a = np.asarray(arange).tolist()
        steps = [a[0] if len(a) == 1 else a[i] for i in range(len(qsl))]
    starts = [int(q) + int(st) * int(n) for q, st in zip(qsl, steps, strict=True)]
    starts = starts if wide else [_to_int32(x) for x in starts]
    cpu = qsl if query_start_loc_cpu is None else query_start_loc_cpu.tolist()
    cpu_starts = [_to_int32(int(q) + i * int(n)) for i, q in enumerate(cpu)]
    lens = [_to_int32(int(s) + int(n)) for s in seq_lens.tolist()]
    tokens = int(num_actual_tokens)
    for _ in lens:
        tokens += int(n)
    return {
        "query_start_loc": np.array(starts, dtype=np.int64 if wide else np.int32),
        "query_start_loc_cpu": np.array(cpu_starts, dtype=np.int32),
        "seq_lens": np.array(lens, dtype=np.int32),
        "num_actual_tokens": tokens,
        "max_query_len": int(max_query_len) + int(n),
        "max_seq_len": int(max_seq_len) + int(n),
        "slot_mapping": np.array(new_slot_mapping.tolist(), dtype=new_slot_mapping.dtype),
    }


def draft_vllm_config(target: Mapping[str, Any]) -> dict[str, Any]:
    """The drafter's config for the target config ``target`` (§5), as a nested dict.

    ``target`` maps each ``VllmConfig`` field to plain data (sub-configs as dicts, absent ones
    as ``None``); ``speculative_config`` holds ``draft_model_config`` and
    ``draft_parallel_config`` among its fields. Raises ``AssertionError`` when
    ``speculative_config`` is ``None``, as the function must. ``target`` is not modified.
    """
    spec = target.get("speculative_config")
    if spec is None:
        raise AssertionError("speculative_config is not set")
    out = copy.deepcopy(dict(target))
    parallel = copy.deepcopy(dict(spec["draft_parallel_config"]))
    parallel["rank"] = target["parallel_config"]["rank"]
    out["quant_config"] = None
    out["model_config"] = copy.deepcopy(spec["draft_model_config"])
    out["parallel_config"] = parallel
    return out
