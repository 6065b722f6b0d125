"""How a case of ``_gumbel_sample_kernel`` is built (docs/CONTRACT.md §29.1): the logits rows to
sample, each row's state row (``-1``: a padded drafter row), position, the requests' seeds and
temperatures, the call's mode (the target's sampling, or the drafter's with its logits cache:
one column for the step, or a column per token with the raw logits as the cache's source), and
the noise path."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.case import Case

NAME = "_gumbel_sample_kernel"
"""The target's name (its registry key, folder and vLLM name)."""

MODES = ("target", "drafter", "watermark")
"""``Sampler._sample_random`` (no cache, temperature applied before), the drafter's
``sample_draft`` (temperature applied here, the pre-temperature logits cached at the step's
column, the draft stream salted), the watermarking drafter (a column per token, the raw logits
as the cache's source)."""


def build(logits: np.ndarray, rows: Sequence[int], pos: Sequence[int], seeds: Sequence[int],
          temperature: Sequence[float], mode: str, *, fp64: bool = False, cache: np.ndarray | None = None,
          col: int | Sequence[int] | None = None, source: np.ndarray | None = None) -> Case:  # fmt: skip
    """A call of ``gumbel_sample`` in ``mode`` (:data:`MODES`) on ``logits`` (``[num_tokens, V]``)."""
    arrays = {"logits": np.ascontiguousarray(logits, dtype=np.float32), "expanded_idx_mapping": np.asarray(rows, np.int64),
              "seeds": np.asarray(seeds, np.int64), "pos": np.asarray(pos, np.int64),
              "temperature": np.asarray(temperature, np.float32)}  # fmt: skip
    scalars: dict = {"apply_temperature": mode == "drafter", "is_drafting": mode != "target", "use_fp64": bool(fp64)}
    if cache is not None:
        arrays["logits_cache"] = np.ascontiguousarray(cache, dtype=np.float32)
        if mode == "watermark":
            arrays["logits_cache_cols"] = np.asarray(col, np.int64)
        else:
            scalars["cache_col"] = int(col)  # type: ignore[arg-type]
    if source is not None:
        arrays["logits_cache_source"] = np.ascontiguousarray(source, dtype=np.float32)
    return Case(NAME, arrays, scalars, {})


def mode_of(case: Case) -> str:
    s = case.scalars
    return "target" if not s.get("is_drafting") else "drafter" if s.get("apply_temperature") else "watermark"


def arguments(arrays: dict, case: Case) -> dict:
    """The launcher's and the oracles' keyword arguments made of ``arrays`` (the case's and the
    outputs, NumPy arrays or device tensors): the cache's column as ``gumbel_sample`` takes it,
    a 0-d tensor (``cache_col``) or one per token (``logits_cache_cols``)."""
    out = {k: v for k, v in arrays.items() if k != "logits_cache_cols"}
    out.setdefault("logits_cache", None)
    out.setdefault("logits_cache_source", None)
    if "logits_cache_cols" in arrays:
        out["logits_cache_col"] = arrays["logits_cache_cols"]
    elif "cache_col" in case.scalars:
        like = arrays["logits"]
        if isinstance(like, np.ndarray):
            out["logits_cache_col"] = np.array(case.scalars["cache_col"], dtype=np.int64)
        else:
            import torch

            out["logits_cache_col"] = torch.tensor(case.scalars["cache_col"], dtype=torch.int64, device=like.device)
    else:
        out["logits_cache_col"] = None
    return out


def windows(case: Case) -> list:
    """The windows the NumPy oracle meets on ``case`` (docs/CONTRACT.md §29.1)."""
    from ....oracles import vectorized_v2_verify as o

    T, V = case.arrays["logits"].shape
    nb = -(-V // 1024)
    arrays = {k: (v.copy() if k == "logits_cache" else v) for k, v in case.arrays.items()}
    outs = {"local_argmax": np.zeros((T, nb), np.int64),
            "local_max": np.zeros((T, nb), np.float64 if case.scalars.get("use_fp64") else np.float32)}
    flags = {k: case.scalars[k] for k in ("apply_temperature", "is_drafting", "use_fp64")}
    return list(o.gumbel_sample(**arguments({**arrays, **outs}, case), **flags).windows)


def keep_rows(case: Case, keep: list[int]) -> Case:
    """``case`` with only the logits rows ``keep`` (their positions, state rows, columns and
    cache sources; the state and the cache as they are)."""
    a = case.arrays
    per_row = ("logits", "expanded_idx_mapping", "pos", "logits_cache_cols", "logits_cache_source")
    return case.replace(arrays={k: a[k][keep].copy() for k in per_row if k in a})
