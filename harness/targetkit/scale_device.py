"""The device role of a record-checked target with production-scale cases (docs/CONTRACT.md
§28-§35: Model Runner V2's verification past ``2**31`` elements), the shape every such role
shares: its scale cases and their minimal forms (the target folder's functions), a scale case's
tables on the device a block of rows at a time after a wrap's band of poison
(:class:`~.scale_rows.DeviceTable`), its small arrays copied whole, its outputs between guard
bands (:class:`~.scale_rows.DeviceOutput`), the launch, the untouched elements counted (guard
bands, every input as given), then the target's own comparison with its torch oracle
(:meth:`ScaleRecordDevice.expect`) and, with ``confirm``, the NumPy and Numba oracles on the
rows that matter (:meth:`ScaleRecordDevice.confirm_on`, :func:`~.scale_rows.confirm_rows`).
A target folder's role says only what is its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...oracles.host_copy import host_to
from ..core.case import Case
from .base import Outcome
from .device import _TORCH, RecordDevice
from .device_draws import scale_vocab
from .scale import flat_limit, past_limit
from .scale_rows import DeviceOutput, DeviceTable, confirm_rows, guard_difference


class ScaleRun:
    """One production-scale case on ``device``: ``tables`` (:class:`DeviceTable`, the arrays
    named in ``table_names`` the case has), ``small`` (the arrays named in ``small``, default
    every other array, whole), ``outs``
    (:class:`DeviceOutput` per output of ``specs``: name -> (NumPy dtype, shape)), and
    ``views``: what the launch takes (copies of the small arrays, the tables' and outputs'
    views, ``None`` for an absent table)."""

    def __init__(self, case: Case, device: str, table_names: tuple[str, ...],
                 specs: dict[str, tuple[np.dtype, tuple[int, ...]]], in_place: tuple[str, ...] = (),
                 small: tuple[str, ...] | None = None) -> None:  # fmt: skip
        a = case.arrays
        self.device = device
        self.in_place = in_place
        self.tables = {n: DeviceTable(a[n], device) for n in table_names if n in a}
        names = [n for n in a if n not in self.tables] if small is None else [n for n in small if n in a]
        self.small = {n: host_to(np.ascontiguousarray(a[n]), device) for n in names}
        self.outs = {n: DeviceOutput(tuple(shape), _TORCH[np.dtype(dt)], device) for n, (dt, shape) in specs.items()}
        self.views: dict[str, Any] = dict.fromkeys(table_names)
        self.views |= {n: t.clone() for n, t in self.small.items()} | {n: t.view for n, t in self.tables.items()}
        self.views |= {n: o.view for n, o in self.outs.items()}
        self.written: dict[str, tuple[int, int | None]] = {}

    def untouched(self) -> int:
        """After the launch: elements of the tables' and outputs' guard bands written, and
        elements of the inputs (tables and small arrays) no longer as given."""
        if self.device != "cpu":
            torch.cuda.synchronize()
        self.written = {n: t.guard_writes() for n, t in self.tables.items()}
        bad = sum(w for w, _ in self.written.values()) + sum(o.guard_writes() for o in self.outs.values())
        bad += sum(t.changed() for n, t in self.tables.items() if n not in self.in_place)
        bad += sum(int((self.views[n].view(torch.uint8) != t.view(torch.uint8)).sum()) for n, t in self.small.items())
        return bad

    def rows(self, rows: list[int]) -> dict[str, np.ndarray]:
        """Rows ``rows`` (consecutive) of every output (and table written in place) as the run
        left them, on the host."""
        views = {n: o.view for n, o in self.outs.items()} | {n: self.tables[n].view for n in self.in_place}
        return {n: v[rows[0] : rows[-1] + 1].cpu().numpy() for n, v in views.items()}

    def sentinels(self) -> dict[str, int]:
        return {n: o.sentinel for n, o in self.outs.items()}

    def guard_findings(self, outcome: Outcome) -> None:
        """The tables' guard bands written, first among ``outcome``'s differences."""
        for n, (k, at) in self.written.items():
            if k:
                outcome.differences.insert(0, guard_difference(n, k, at, self.tables[n].poison))

    def close(self) -> None:
        self.tables.clear()
        self.outs.clear()
        self.views.clear()
        if self.device != "cpu":
            torch.cuda.empty_cache()


class ScaleRecordDevice(RecordDevice):
    """A record-checked target's device mode (:class:`~.device.RecordDevice`) with production-scale
    cases: ``draw_scale(rng)`` a scale case, ``minimal(case)`` its minimal forms (simplest
    first), checked by :meth:`scale_check`. A subclass gives :meth:`expect` (its torch oracle
    against the run) and :meth:`confirm_on` (the rows the NumPy and Numba oracles confirm a
    difference on); ``tables`` names its production-scale arrays."""

    scale = True
    scale_by_rows = True
    tables: tuple[str, ...] = ("target_logits", "draft_logits")
    """The arrays uploaded a block of rows at a time after a wrap's band of poison (absent ones
    are passed as ``None``); the others are small and copied whole."""
    in_place: tuple[str, ...] = ()
    """Tables the kernel writes in place (an output: :meth:`expect` compares them)."""
    small: tuple[str, ...] | None = None
    """The arrays copied to the device whole and launched (``None``: every array not a table)."""

    def __init__(self, record: Any, draw_scale: Callable[[np.random.Generator], Case],
                 minimal: Callable[[Case], list[Case]]) -> None:  # fmt: skip
        self.record = record
        self.name = record.name
        self.launch_names = record.launch_names
        self._draw_scale, self._minimal = draw_scale, minimal

    def scale_case(self, rng: np.random.Generator) -> Case:
        return self._draw_scale(rng)

    def scale_batch_vocab(self, tables_seed: int) -> int:
        """A scale epoch's vocabulary: the first draw of its tables
        (:func:`~.scale_steps.scale_epoch`, the temperature kernel's ``scale_table``)."""
        return scale_vocab(np.random.default_rng(tables_seed))

    def scale_minimal(self, case: Case) -> list[Case]:
        return self._minimal(case)

    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor | int:
        """The elements of ``run``'s outputs not as the torch oracle allows (written ones within
        their bounds, the others their sentinel)."""
        raise NotImplementedError

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        """The case restricted to the rows that matter, and which output rows of ``case`` its
        output rows are (consecutive)."""
        raise NotImplementedError

    def verified(self, case: Case, run: ScaleRun) -> int:
        """The elements a check verifies (by default every output element)."""
        return sum(o.n for o in run.outs.values())

    def scale_check(self, impl: Any, case: Case, device: str, confirm: bool) -> tuple[int, int, Outcome | None]:
        """``case`` (a production-scale step) run on ``device`` and checked there: the guard
        bands, every input as given, every output element by :meth:`expect`; with ``confirm``,
        a difference is checked by the NumPy and Numba oracles on :meth:`confirm_on`'s rows.
        Returns the elements not as expected, the elements verified, and the confirmation's
        outcome (``None``: not asked, or nothing to confirm)."""
        run = ScaleRun(case, device, self.tables, self.record.output_specs(case), self.in_place, self.small)
        try:
            self.record.launch(impl, run.views, case)
            bad = run.untouched()
            bad += int(self.expect(case, run))
            outcome = None
            if confirm and bad:
                small, rows = self.confirm_on(case)
                outcome = confirm_rows(self.record, small, rows, run.rows(rows), run.sentinels())
                run.guard_findings(outcome)
            return bad, self.verified(case, run), outcome
        finally:
            run.close()


def requests_past_limit(starts: np.ndarray, ends: np.ndarray, W: int) -> list[int]:  # noqa: N803
    """Requests (rows ``[starts[r], ends[r])`` of a table ``W`` wide) with a row past the flat
    limit, and the one before them: the requests a scale finding is confirmed on."""
    past = [r for r in range(starts.size) if past_limit(int(ends[r] - 1) * W)]
    return list(range(max(0, (past[0] if past else starts.size) - 1), starts.size))


def live_requests(case: Case) -> list[int]:
    """The requests of a chain kernel's ``case`` (its ``cu_num_logits``) with a row past the
    limit, and the one before them."""
    cu = case.arrays["cu_num_logits"].astype(np.int64)
    return requests_past_limit(cu[:-1], cu[1:], case.arrays["target_logits"].shape[1])


def first_row(W: int) -> int:  # noqa: N803
    """The first row of a table ``W`` wide whose offset ``row * W`` an int32 cannot hold."""
    return -(-flat_limit() // W)


def sentinel_step(V: int, with_draft: bool, draft_logit: float = 5.0, method: str = "standard") -> Any:  # noqa: N803
    """A random request of one draft (temperature 1, seed 0, position 0) whose drafted row holds a
    single target logit 1 at its last column, the drafted token (the drafter's cache, if any,
    zeros but ``draft_logit`` there): ``lp_t`` about -11.5, ``lp_t - lp_d`` about ``1 -
    draft_logit``. By standard verification (§33's uniform 0.798 there) the draft is rejected on
    its own row and accepted on a read of any other (a wrap's poison, 13323083.0), and §34 draws
    that row less the token; §31's joint ratio shows a read of another row as well. A
    :class:`~.runner_v2_verify.Step` of ``method``, ``K = 16``."""
    from .runner_v2 import cumulative
    from .runner_v2_verify import Step

    x = np.zeros((2, V), np.float32)
    x[0, V - 1] = 1.0
    dl = None
    if with_draft:
        dl = np.zeros((1, 16, V), np.float32)
        dl[0, 0, V - 1] = draft_logit
    return Step(x, dl, np.array([0, V - 1], np.int32), cumulative([2]), np.array([0, 1], np.int64),
                np.zeros(1, np.int64), np.ones(1, np.float32), np.zeros(1, np.int64), 16, method)


def standard_scale_case(rng: np.random.Generator, build: Callable[[Any, Any], Case],
                        fills: dict[str, float]) -> tuple[Case, int]:  # fmt: skip
    """A production standard-verification step of a chain kernel (its folder's ``build(step,
    chain)``) just past ``2**31`` target logits (a current model's vocabulary): greedy requests of
    16 drafts, zero rows (their arrays ``fills``), up to the limit, then the request of
    :func:`sentinel_step` (its drafted row the first past the limit), then a random request of
    16 drafts drawn and settled as the records draw them (its logits, drafts, the drafter's cache
    or one-hot drafts, either noise path): 19 rows past the limit, every one a wrapped offset
    moves before the table. Returns the case and its greedy requests' count."""
    from dataclasses import replace

    from .device_draws import scale_vocab
    from .runner_v2_verify import _rng_chooser, chain, draw_step, settle_step
    from .scale_rows import join_steps, minimal_request_rows, splice

    V = scale_vocab(rng)
    step = draw_step(_rng_chooser(rng), B=1, K=16, V=V, method="standard", min_drafts=16, greedy=(0.0,),
                     other_width=0.0, same=False)  # fmt: skip
    step, ch = settle_step(step)
    s = replace(sentinel_step(V, step.draft_logits is not None), use_fp64=step.use_fp64)
    counts = minimal_request_rows(first_row(V))[:-1]
    live = join_steps(build(s, chain(s)), build(step, ch))
    return splice(live, counts, fills).replace(note="a production-scale step (eaglefuzz fuzz --mode device)"), len(counts)


def minimal_standard_case(V: int, build: Callable[[Any, Any], Case], fills: dict[str, float]) -> tuple[Case, int]:  # noqa: N803
    """The smallest step of :func:`standard_scale_case`'s kind: greedy requests of 17 rows up to
    the limit, then the request of :func:`sentinel_step` (one-hot drafts) whose drafted row is
    the first past it, a table of zeros with one entry. Returns it and its greedy requests'
    count."""
    from .runner_v2_verify import chain
    from .scale_rows import minimal_request_rows, splice

    counts = minimal_request_rows(first_row(V))[:-1]
    s = sentinel_step(V, False)
    return splice(build(s, chain(s)), counts, fills).replace(note="the int32 row offset past 2**31, minimised"), len(counts)
