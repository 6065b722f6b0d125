"""What the targets of Model Runner V2 (docs/CONTRACT.md §14-§27) share.

V2 keeps each request's state in persistent buffers of ``max_num_reqs`` rows and hands its
kernels a batch: ``B`` rows, row ``b`` naming its state row ``s_b = idx_mapping[b]``, its tokens
``[query_start_loc[b], query_start_loc[b + 1])``. :class:`V2Target` is the record base of such
a kernel: its launch is the launcher of ``kernels/launchers.py`` the record names (the same
keyword names as its oracles of ``oracles/vectorized_v2.py`` and ``oracles/loops_v2.py``), an
optional array a case leaves out is ``None`` to both, and a case's scalars go to both. The
drawing helpers (:func:`state_rows`, :func:`query_lengths`) and the checks (:func:`check_batch`,
...) are the pieces the folders' generators and rules are made of.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..core.case import Case
from ..core.errors import ContractViolation
from ..generation.choosers import Chooser
from .base import TritonTarget

I32, I64, F32, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.bool_)

INPUT_BATCH = "vllm/v1/worker/gpu/input_batch.py"
BLOCK_TABLE = "vllm/v1/worker/gpu/block_table.py"
REJECTION = "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py"
SPECULATOR = "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py"
"""The vLLM modules of §14-§27 (``Target.module``)."""

BLOCK = 1024
"""vLLM's ``BLOCK_SIZE`` of the V2 kernels that loop over blocks: a row of more elements takes
two blocks or more (a production extreme of those kernels)."""

MAX_MODEL_LEN = 1 << 17
"""A long-context ``max_model_len`` (131072) the generators reach (positions, counts)."""


def v2_oracles(function: str) -> dict[str, str]:
    """:attr:`~.base.Target.oracle_functions` of a V2 kernel: ``function`` of
    ``oracles/vectorized_v2.py`` (NumPy) and of ``oracles/loops_v2.py`` (Numba)."""
    return {"numpy": f"vectorized_v2.{function}", "numba": f"loops_v2.{function}"}


def npow2(n: int) -> int:
    """Triton's ``next_power_of_2`` (1 for ``n <= 1``)."""
    return 1 << max(0, int(n) - 1).bit_length()


class V2Target(TritonTarget):
    """A Model Runner V2 kernel launched through ``kernels/launchers.py``: :attr:`launcher`.

    The launcher and the oracles take the case's arrays (an :attr:`optional` one left out is
    ``None``), its outputs and its scalars by the same keyword names; the launch fields a case
    leaves ``None`` are vLLM's choice, which the launcher makes itself and :meth:`resolved`
    makes for the oracles. A record with arrays of its own layout (lists of tables) gives
    :meth:`arguments`.
    """

    runner = "V2"
    launcher: ClassVar[str]
    """The launcher of ``kernels/launchers.py`` that launches this kernel as vLLM does."""
    optional: ClassVar[tuple[str, ...]] = ()
    """Arrays a case may leave out: ``None`` to the kernel and the oracles (vLLM's ``None``)."""
    scalar_names: ClassVar[tuple[str, ...]] = ()
    launch_names: ClassVar[tuple[str, ...]] = ()

    def resolved(self, case: Case) -> dict[str, Any]:
        """The launch fields as the launch uses them: the case's, vLLM's choice where ``None``."""
        return {k: v for k, v in case.launch.items() if v is not None}

    def arguments(self, arrays: Mapping[str, Any], case: Case) -> dict[str, Any]:
        """The keyword arguments of the launcher and the oracles made of ``arrays`` (inputs and
        outputs by name); by default themselves, with ``None`` for an absent optional one."""
        return {n: None for n in self.optional} | dict(arrays)

    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        from ...kernels import launchers

        given = {k: v for k, v in case.launch.items() if v is not None}
        getattr(launchers, self.launcher)(kernel, **self.arguments(tensors, case), **case.scalars, **given)

    def call_oracle(self, oracle: Any, case: Case, outputs: Mapping[str, np.ndarray]) -> Any:
        takes = _parameters(oracle)  # a launch-only field (BLOCK_SIZE, say) changes nothing: not its
        kwargs = {**self.arguments({**case.arrays, **outputs}, case), **case.scalars, **self.resolved(case)}
        return oracle(**{k: v for k, v in kwargs.items() if k in takes})

    def programs(self, case: Case) -> int:
        return int(case.scalars.get("num_reqs", 1))

    # -- shrinking: batch rows are the requests ------------------------------------------

    per_row: ClassVar[Mapping[str, int]] = {}
    """The batch-indexed arrays (name -> 0 for ``[B, ...]``, 1 for a cumulative ``[B + 1]``):
    a sub-list of rows keeps these row by row (empty: the cases are not split)."""
    per_token: ClassVar[tuple[str, ...]] = ()
    """The token arrays, cut to the kept rows' tokens (``query_start_loc``'s ranges)."""

    state_index: ClassVar[tuple[str, ...]] = ()
    """The arrays whose elements are state rows (``idx_mapping``, ``expanded_idx_mapping``; a
    negative element names none): rows of the :attr:`per_state` arrays."""
    per_state: ClassVar[tuple[str, ...]] = ()
    """The arrays of one entry per state row along their first axis (``temperature``, ``seed``,
    a drafter's cache); the state rows no :attr:`state_index` element names are dropped by the
    shrink move :func:`compact_states`."""

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        """By default the state rows no request names dropped (:func:`compact_states`)."""
        compact = compact_states(case, self.state_index, self.per_state)
        return iter(() if compact is None else (compact,))

    def split_requests(self, case: Case) -> list[Any] | None:
        if not self.per_row:
            return None
        return list(range(int(case.scalars["num_reqs"])))

    def join_requests(self, case: Case, pieces: list[Any]) -> Case:
        return drop_rows(case, pieces, self.per_row, self.per_token)


def compact_states(case: Case, index: Sequence[str], states: Sequence[str]) -> Case | None:
    """``case`` with only the state rows its ``index`` arrays name (in their order of state
    row; the first alone when none is named), renumbered from 0 in those arrays, the ``states``
    arrays cut to them: a reproducer without a deployment's idle rows. ``None`` when every state
    row is kept (or the case has none of these arrays, or they do not agree on the state count)."""
    a = case.arrays
    idx = [n for n in index if n in a]
    st = [n for n in states if n in a and a[n].ndim >= 1]
    if not idx or not st:
        return None
    R = a[st[0]].shape[0]
    named = [a[n][a[n] >= 0] for n in idx]
    used = np.unique(np.concatenate(named)) if named else np.zeros(0, np.int64)
    used = used if used.size else np.zeros(1, np.int64)  # no row named: one state row kept
    if any(a[n].shape[0] != R for n in st) or used.size == R or (used.size and int(used.max()) >= R):
        return None
    arrays = {n: a[n][used].copy() for n in st}
    for n in idx:
        new = a[n].copy()
        live = new >= 0
        new[live] = np.searchsorted(used, new[live]).astype(new.dtype)
        arrays[n] = new
    return case.replace(arrays=arrays)


def _parameters(fn: Any) -> frozenset[str]:
    import inspect

    return frozenset(inspect.signature(fn).parameters)


# -- drawing ------------------------------------------------------------------------------------


def state_rows(c: Chooser, B: int, R: int) -> np.ndarray:
    """``B`` distinct state rows out of ``R`` (int64): a permutation's first ``B`` (shrinks to
    ``0, 1, ..., B - 1``)."""
    keys = c.array(np.int64, R, 0, 4 * R)
    return np.argsort(keys, kind="stable")[:B].astype(np.int64)


def state_count(c: Chooser, B: int) -> int:
    """``max_num_reqs``: the batch's rows, a few more, or many more (a deployment's
    ``max_num_seqs`` is larger than most batches)."""
    return B + c.integer_of([(0, 0), (0, 4), (0, 40)])


def lengths(c: Chooser, B: int, ranges: Sequence[tuple[int, int]]) -> list[int]:
    """``B`` lengths drawn from ``ranges`` (a mixture per batch: the longest regime first)."""
    lo, hi = ranges[c.integer(0, len(ranges) - 1)]
    return [int(x) for x in c.array(np.int64, B, lo, hi)]


def cumulative(counts: Sequence[int]) -> np.ndarray:
    """``[0, n0, n0 + n1, ...]`` as int32 (``query_start_loc``, ``cu_num_logits``)."""
    return np.concatenate([[0], np.cumsum(np.asarray(counts, dtype=np.int64))]).astype(np.int32)


# -- rules ----------------------------------------------------------------------------------------


def need(arrays: Mapping[str, np.ndarray], name: str, dtype: np.dtype, shape: tuple[int, ...] | None = None,
         ndim: int = 1, *, at_least: int | None = None) -> np.ndarray:
    """``arrays[name]``, which must be of ``dtype`` and ``shape`` (or ``ndim`` dimensions, and at
    least ``at_least`` elements along the first); else a :class:`ContractViolation`."""
    a = arrays.get(name)
    if a is None:
        raise ContractViolation(f"arrays.{name}", "is required")
    if a.dtype != dtype or (shape is not None and a.shape != shape) or a.ndim != (len(shape) if shape else ndim):
        what = f"of shape {list(shape)}" if shape is not None else f"{ndim}-D"
        raise ContractViolation(f"arrays.{name}", f"must be {dtype} {what}")
    if at_least is not None and a.shape[0] < at_least:
        raise ContractViolation(f"arrays.{name}", f"must have at least {at_least} entries")
    return a


def need_int(scalars: Mapping[str, Any], name: str, lo: int, hi: int | None = None, *, where: str = "scalars") -> int:
    """The int ``scalars[name]`` in ``[lo, hi]``; else a :class:`ContractViolation`."""
    v = scalars.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ContractViolation(f"{where}.{name}", f"must be an int {rng}")
    return v


def only(arrays: Mapping[str, np.ndarray], allowed: set[str]) -> None:
    """No array beyond ``allowed``."""
    extra = sorted(set(arrays) - allowed)
    if extra:
        raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")


@dataclass(frozen=True)
class Batch:
    """A batch as the rules see it: ``B`` rows, state rows ``s`` of ``R``, and (when the kernel
    takes ``query_start_loc``) the rows' token ranges ``qs``, ``qe``, ``qlen`` (int64)."""

    B: int
    R: int
    s: np.ndarray
    qs: np.ndarray
    qe: np.ndarray

    @property
    def qlen(self) -> np.ndarray:
        return self.qe - self.qs

    @property
    def tokens(self) -> int:
        return int(self.qe[-1]) if self.B else 0


def check_batch(case: Case, R: int, *, masked: bool = False, distinct: bool = True, qsl: bool = True,
                min_qlen: int = 1) -> Batch:
    """The batch rules of docs/CONTRACT.md §14.2: ``num_reqs = B >= 1`` rows, ``idx_mapping``
    int64 ``[B]`` of distinct state rows in ``[0, R)`` (``-1`` too when ``masked``), and
    ``query_start_loc`` int32 ``[B + 1]`` from 0 with every row at least ``min_qlen`` long."""
    a = case.arrays
    B = need_int(case.scalars, "num_reqs", 1)
    idx = need(a, "idx_mapping", I64, (B,))
    real = idx[idx >= 0] if masked else idx
    if np.any((idx < -1) if masked else (idx < 0)) or np.any(real >= R):
        raise ContractViolation("arrays.idx_mapping", f"must hold state rows in [0, {R})" + (" or -1" if masked else ""))
    if distinct and len(np.unique(real)) != len(real):
        raise ContractViolation("arrays.idx_mapping", "must name distinct state rows")
    if not qsl:
        z = np.zeros(B, dtype=np.int64)
        return Batch(B, R, idx.astype(np.int64), z, z)
    q = need(a, "query_start_loc", I32, (B + 1,)).astype(np.int64)
    if q[0] != 0 or np.any(np.diff(q) < min_qlen):
        raise ContractViolation("arrays.query_start_loc", f"must start at 0, every row at least {min_qlen} token(s) long")
    return Batch(B, R, idx.astype(np.int64), q[:-1], q[1:])


def check_cu(case: Case, B: int, lo: int, hi: int, name: str = "cu_num_logits") -> np.ndarray:
    """``cu_num_logits`` int32 ``[B + 1]`` from 0, each row's count in ``[lo, hi]``: the counts."""
    cu = need(case.arrays, name, I32, (B + 1,)).astype(np.int64)
    n = np.diff(cu)
    if cu[0] != 0 or np.any(n < lo) or np.any(n > hi):
        raise ContractViolation(f"arrays.{name}", f"must start at 0, each row's count in [{lo}, {hi}]")
    return n


def row_of(starts: np.ndarray, index: int) -> int | None:
    """The row whose range (starting at ``starts``, sorted) holds element ``index``."""
    if len(starts) == 0 or index < int(starts[0]):
        return None
    return int(np.searchsorted(starts, index, side="right") - 1)


def state_row(s: np.ndarray, state: int) -> int | None:
    """The batch row whose state row is ``state`` (``None``: no batch row names it)."""
    hit = np.flatnonzero(s == state)
    return int(hit[0]) if hit.size else None


def drop_rows(case: Case, keep: Sequence[int], per_row: Mapping[str, int], per_token: Sequence[str] = (),
              qsl: str = "query_start_loc") -> Case:
    """``case`` with only the batch rows ``keep``: the batch-indexed arrays of ``per_row`` (name ->
    extra trailing entries: 1 for a cumulative array's end) kept row by row, the token arrays of
    ``per_token`` cut to the kept rows' tokens, ``query_start_loc`` rebuilt."""
    keep = list(keep)
    arrays = dict(case.arrays)
    q = case.arrays[qsl].astype(np.int64) if qsl in case.arrays else None
    for name, extra in per_row.items():
        a = case.arrays[name]
        if extra:  # cumulative: rebuild from the kept rows' counts
            n = np.diff(a.astype(np.int64))[keep]
            arrays[name] = cumulative(n.tolist()).astype(a.dtype)
        else:
            arrays[name] = a[keep].copy()
    if q is not None and per_token:
        pieces = {n: [case.arrays[n][q[b] : q[b + 1]] for b in keep] for n in per_token}
        for n, parts in pieces.items():
            arrays[n] = np.concatenate(parts) if parts else case.arrays[n][:0].copy()
    if q is not None:
        arrays[qsl] = cumulative(np.diff(q)[keep].tolist())
    return case.replace(arrays=arrays, scalars={"num_reqs": len(keep)})


def row_subsets(B: int) -> Iterator[list[int]]:
    """Row subsets to shrink to, fewest rows first: each single row, then each half."""
    if B < 2:
        return
    for b in range(B):
        yield [b]
    h = B // 2
    yield list(range(h))
    yield list(range(h, B))
    for b in range(B):
        yield [r for r in range(B) if r != b]
