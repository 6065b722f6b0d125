"""The device campaign: draw, oracle, launch and compare on the GPU; confirm on the host.

Per example ``i`` (seeds ``derive_seed(seed, name, "device", i)`` for the host's choices and
the device generator): the target draws a case on the device, its inputs are staged to pinned
host memory (so a case that kills the CUDA context can still be reported; a batch's are not:
:mod:`.redraw` draws its cases again in a fresh process), the torch oracle
gives the elements the contract writes, :class:`~.base.Arenas` pre-fills every buffer, the
implementation runs, and one comparison per buffer counts the elements that are not as
expected. That count is the only value that crosses to the host. A target checked on the host
(``checked_on = "host"``: the prepare kernels, whose cases are a few thousand elements) draws
its case and computes the expected outputs there in NumPy (:class:`~.base.HostArenas`); only
the launch runs on the device.

A case with a difference is confirmed by the ordinary check (:func:`~..check.check_case`: the
NumPy and Numba oracles, the full report), then shrunk like any finding. Cases are also
cross-checked that way on a sample (the first, then as long as cross-checks take under
:data:`CROSS_CHECK_SHARE` of the time): the NumPy/Numba verdict must match the device
verdict, or the finding is an *oracle disagreement* (a bug of the harness). The first
:data:`WARMUP` examples (Triton's JIT compiles the kernel's specializations there) are timed
apart from the steady state.
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...core.case import Case
from ...core.compare import Difference
from ...core.exitcodes import EXIT_DEVICE_LOST
from ...core.mps import alone
from ...core.scale_examples import SCALE_AT, SCALE_EVERY
from ...generation.strategies import Scale, derive_seed
from ...sources import Implementations
from ...targetkit.device import Arenas, DeviceCase, DeviceTarget, HostArenas
from ...targetkit.device_batch import DeviceBatch, HostBatchArenas, epoch_of
from ...targetkit.scale import batches_fit, unreachable
from ...targets import TARGETS, Outcome
from ..check import CaseJournal, Finding, check_case
from ..fuzz import Stats, shrink_finding
from . import device_targets
from .batch_run import check_batch, first_failing, launch_each, wait
from .host_threads import one_thread, restore
from .memory import fitting
from .producers import HostCases, default_workers
from .scale_lane import (
    SCALE_TABLE_EPOCH,
    ScaleLane,
    Verdict,
    batch_minimal,
    batch_minimal_count,
    forget_scale_cases,
    load_case,
    minimise,
    scale_batch_size,
    scale_case,
)

CROSS_CHECK_SHARE = 0.05
WARMUP = 16
CPU_MAX_REQUESTS = 8
"""Requests per case when the device is the CPU (the Triton interpreter): tests only."""
CPU_BATCH = 4
HOST_BATCH = 64
"""Cases per batch of a target checked on the host (:class:`~...targetkit.device_batch.HostBatchArenas`:
one copy each way per dtype and one comparison for all of them, made ahead by the producers),
unless the target says (:attr:`~...targetkit.device.DeviceTarget.host_batch_size`)."""
RECORD_BATCH = 16
"""Cases per record host batch (:func:`~.producers.record_batch`): a record's draw and oracle
take milliseconds a case (up to hundreds at production scale), so a batch of 64 would keep a
producer busy for seconds before the first launch; the launches' overhead per batch is small
beside them."""
MIN_BATCHES = 8
"""Batches a run of ``examples`` cases makes at least (each batch draws some modes once for
all of its cases: with or without draft probabilities, synthetic mode)."""
"""Cases per batch when the device is the CPU (a target with :attr:`~...targetkit.device.DeviceTarget.batch`)."""
STAGES = ("draw", "stage", "oracle", "buffers", "kernel", "compare", "features", "cross-check", "scale")
# SCALE_EVERY, SCALE_AT (core.scale_examples): examples i with i % SCALE_EVERY == SCALE_AT of a
# target with production-scale cases are such a case, run in the scale lane (.scale_lane) where
# the GPU can hold them (targetkit.scale.unreachable)
SCALE_MIN_S = 15.0
"""A target's time budget left under which its scale examples are ordinary ones (starting a lane
and checking a case of gigabytes: 6-12 s on an H200, benchmarks/RESULTS.md); the report says so."""
CROSS_CHECK_S_PER_ELEMENT = 1e-7
"""What a cross-check is assumed to cost per element before one has been timed (one that would
not fit in the time left is not made: ``--time-budget`` holds)."""
SCALE_MINIMISE_ENV = "EAGLEFUZZ_SCALE_MINIMISE_BUDGET"
"""Seconds a scale finding may take to minimise (300 by default: each step is a case of
gigabytes)."""


class _Pinned:
    """Reusable pinned host buffers that the inputs of each case are copied into."""

    def __init__(self) -> None:
        self.bufs: dict[str, torch.Tensor] = {}

    def stage(self, dc: DeviceCase) -> dict[str, torch.Tensor]:
        out = {}
        for n, t in dc.inputs.items():
            buf = self.bufs.get(n)
            if buf is None or buf.dtype != t.dtype or buf.numel() < t.numel():
                buf = self.bufs[n] = torch.empty(max(t.numel(), 1 << 16), dtype=t.dtype, pin_memory=t.is_cuda)
            view = buf[: t.numel()].view(t.shape)
            view.copy_(t, non_blocking=True)
            out[n] = view
        return out


def _case(dt: DeviceTarget, dc: DeviceCase, host: dict[str, torch.Tensor | np.ndarray]) -> Case:
    """The case from its host copy ``host`` (a staged one: valid once the copies are done)."""
    copies = {n: t.copy() if isinstance(t, np.ndarray) else t.clone() for n, t in host.items()}
    return dt.to_case(DeviceCase(copies, dc.outputs, dc.scalars, dc.host))


REDRAW_S = 600.0
"""How long drawing a lost batch again may take (:func:`redrawn`: a fresh process imports torch,
makes a CUDA context and draws one batch)."""


def redrawn(name: str, seed: int, i: int, k: int, device: str, max_requests: int | None, launched: int) -> list[Case]:
    """The first ``launched`` cases of batch ``i`` of ``k`` cases of ``name``'s run of ``seed``
    on ``device``, drawn again in a fresh process (:mod:`.redraw`), as host cases: the suspects
    of a batch whose launches left this process's device unusable."""
    request = json.dumps({"name": name, "seed": seed, "i": i, "k": k, "device": device,
                          "max_requests": max_requests, "launched": launched})
    with tempfile.TemporaryDirectory(prefix="eaglefuzz-redraw-") as d:
        out = Path(d) / "cases.pickle"
        subprocess.run([sys.executable, "-m", "eaglefuzz.harness.checking.device_mode.redraw", request, str(out)],  # noqa: S603
                       check=True, timeout=REDRAW_S, env=alone(), stdout=subprocess.DEVNULL)  # outside MPS: its server refuses clients after a fault
        return pickle.loads(out.read_bytes())  # noqa: S301 - written by our own child, just now


def device_fuzz_target(
    name: str,
    impls: Implementations,
    device: str,
    scale: Scale | None = None,
    *,
    seed: int = 0,
    examples: int | None = 100,
    time_budget: float | None = None,
    shrink: bool = True,
    stop_on_finding: bool = True,
    on_progress: Callable | None = None,
    chunk_offset: int = 0,
    chunk_step: int = 1,
    journal: CaseJournal | None = None,
    stats: object | None = None,
    domain: str = "production",
    profile: bool = False,
    cross_check_share: float = CROSS_CHECK_SHARE,
    workers: int | None = None,
    scale_first: float | None = None,
    scale_cases: bool = True,
    min_batches: int = MIN_BATCHES,
    shared_gpu: bool = False,
    keep_batches: bool = False,
) -> object:
    """Fuzz ``name`` on the device (production tier only); the same signature and
    :class:`~..fuzz.Stats` as :func:`~..fuzz.fuzz_target`, with ``stats.stages`` (seconds per
    stage), ``stats.cross_checked`` and ``stats.warmup`` filled in. ``profile`` waits for the
    device after every stage, so that the stage times add up to where the time goes (slower);
    ``cross_check_share`` is the share of the time cross-checks may take (1: every case);
    ``workers``: processes that make a host-checked target's cases ahead of the launches
    (:mod:`.producers`; ``None``: :func:`~.producers.default_workers`; with them the ``draw``
    stage is the wait for the next case, its oracle and buffers included).

    ``scale_first`` (seconds; the campaign's, under a time budget): the target's first
    production-scale example runs before any other, in up to that much of the run's time
    (more than :data:`SCALE_MIN_S`, else it is skipped and the report says why), and
    ``time_budget`` counts the ordinary examples after it. ``scale_cases=False``: no production-scale
    case (their examples are ordinary ones). ``min_batches``: the batches a run of ``examples``
    cases makes at least (1: the batches of a run without ``examples``, whole, the same cases:
    a batch's cases depend on its size). ``shared_gpu``: other processes fuzz the same GPU
    (``--lanes``): a batch that does not fit waits longer for their memory
    (:func:`~.memory.fitting`). ``keep_batches``: ``stats.batches`` lists the batches checked
    (a benchmark's: the kernel alone on exactly those cases).

    The objects that exist when the run starts (modules, compiled kernels, caches: most of the
    heap) are frozen for the run (``gc.freeze``, after a collection: garbage frozen with them, a
    cycle holding a device tensor of an earlier run, would keep its memory for the run), so that
    the collector's passes scan only what the run makes; unless the caller froze its own, they
    are unfrozen when it ends. On a GPU the run's torch work is on one thread
    (:mod:`.host_threads`), the caller's count given back when it ends."""

    dt = device_targets()[name]
    impl = impls[name]
    origin = impls.origin[name]
    stats = stats if stats is not None else Stats()
    stages = stats.stages = dict.fromkeys(STAGES, 0.0)
    stats.scale_cases = 0
    stats.scale_unfit = 0  # scale examples that did not fit in the device's free memory (lanes): not checked
    lane = (ScaleLane(name, origin.spec, device, seed, batches=dt.scale_batches and batches_fit(device))
            if scale_cases and dt.scale and unreachable("device", device) is None else None)
    pinned = _Pinned()
    start = time.monotonic()
    cross_s, cross_elements = 0.0, 0
    i = chunk_offset
    on_device = dt.checked_on == "device"
    gen = torch.Generator(device=device) if on_device else None  # reseeded per example, one per run
    max_requests = CPU_MAX_REQUESTS if device == "cpu" else None
    record_batches = dt.checked_on == "record" and dt.batches_on_host(impl)
    by_record = dt.checked_on == "record" and not record_batches
    host_k = CPU_BATCH if device == "cpu" else RECORD_BATCH if record_batches else dt.host_batch_size or HOST_BATCH
    if examples is not None:  # a run of few examples: at least MIN_BATCHES batches
        host_k = max(1, min(host_k, -(-examples // min_batches)))
    producer = None if on_device or by_record else HostCases(
        name, seed, chunk_offset, chunk_step, max_requests,
        default_workers(device) if workers is None else workers, batch=host_k, limit=examples,
        ramp=time_budget is not None)

    def clock(stage: str, t0: float) -> float:
        if profile and device != "cpu":
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        stages[stage] += t1 - t0
        return t1

    def confirm(case: Case, device_bad: bool) -> Finding | None:
        finding = check_case(case, impls, device, journal)
        if finding is None and not device_bad:
            return None
        if finding is None:  # the device check saw a difference the NumPy/Numba oracles do not
            finding = Finding(case, Outcome(), origin)
            finding.outcome.oracle_disagreements.append(Difference(
                name, None, "the kernel's outputs (the NumPy and Numba oracles agree with them)",
                "a difference", None, "device oracle", dt.oracle_name))
        elif not device_bad and not finding.outcome.crash:
            finding.outcome.oracle_disagreements.append(Difference(
                name, None, "a difference (the NumPy and Numba oracles found one)", "no difference",
                None, "device oracle", dt.oracle_name))
        return finding

    batched = on_device and dt.batch > 0
    cross = [0.0, 0]  # a batched run's cross-checks: seconds, elements
    bigs: dict = {}
    bigs_epoch = None  # the table epoch whose guarded tables bigs holds
    first = None  # the example run first as a scale case (scale_first)
    if lane is not None and scale_first is not None:
        first = next((j for j in range(chunk_offset, chunk_offset + SCALE_EVERY * chunk_step, chunk_step)
                      if j % SCALE_EVERY == SCALE_AT), None)
        if first is not None and scale_first < SCALE_MIN_S:
            stats.scale_skipped = (f"{max(scale_first, 0):.0f} s of the run's time budget could go to a scale case, "
                                   f"under the {SCALE_MIN_S:.0f} s one needs")
            first = None
    begun = start

    def after_batch(finding: Finding | None) -> bool:
        """A batch's finding (device or host batch): a lost device ends the process, else the
        finding is shrunk and kept; whether the run stops here."""
        if finding is not None and finding.fatal and journal is not None:
            journal.abandon(finding.case, f"the device became unusable: {finding.outcome.crash}", finding.suspects)
            os._exit(EXIT_DEVICE_LOST)
        if finding is not None:
            stats.unshrunk = finding
            if on_progress is not None:
                on_progress(stats)
            if shrink and not finding.outcome.oracle_disagreements and not finding.fatal:
                finding = shrink_finding(finding, impls, device, journal=journal)
            stats.findings.append(finding)
            stats.unshrunk = None
        if on_progress is not None:
            on_progress(stats)
        return finding is not None and (finding.fatal or stop_on_finding)

    spared = gc.get_freeze_count() == 0  # unless the caller froze its own (it then keeps them)
    if spared:  # the heap before the run (modules, compiled kernels, caches) out of the collector's passes
        gc.collect()  # the garbage first: frozen, a cycle holding a device tensor would hold it for the run
        gc.freeze()
    threads = one_thread(device)
    try:
        if first is not None:
            t = time.perf_counter()
            finding = _scale_example(lane, name, origin, first, stats, shrink,
                                     minimise_s=scale_first - (time.monotonic() - start))
            stages["scale"] += time.perf_counter() - t
            if finding is not None:
                stats.findings.append(finding)
            if on_progress is not None:
                on_progress(stats)
            if finding is not None and stop_on_finding:
                examples = 0  # the target stops at its first finding
            start = time.monotonic()  # the ordinary examples' budget counts from here
        while (examples is None or stats.examples < examples) and (
            time_budget is None or time.monotonic() - start < time_budget
        ):
            t = time.perf_counter()
            left = None if time_budget is None else time_budget - (time.monotonic() - start)
            if i == first:  # it ran first
                i += chunk_step
                continue
            if lane is not None and i % SCALE_EVERY == SCALE_AT and left is not None and left < SCALE_MIN_S:
                if not stats.scale_cases and not getattr(stats, "scale_skipped", None):
                    stats.scale_skipped = f"{left:.0f} s of the time budget left, under the {SCALE_MIN_S:.0f} s a scale case needs"
            elif lane is not None and i % SCALE_EVERY == SCALE_AT:
                finding = _scale_example(lane, name, origin, i, stats, shrink)
                stages["scale"] += time.perf_counter() - t
                i += chunk_step
                if finding is None:
                    if on_progress is not None and stats.examples % 16 == 0:
                        on_progress(stats)
                    continue
                stats.findings.append(finding)
                if on_progress is not None:
                    on_progress(stats)
                if stop_on_finding:
                    break
                continue
            if batched:
                k = CPU_BATCH if device == "cpu" else dt.batch
                # a run of few examples: at least MIN_BATCHES batches (a batch shares its modes)
                k = k if examples is None else max(1, min(k, -(-examples // min_batches), examples - stats.examples))
                if epoch_of(i, dt.table_epoch)[0] != bigs_epoch:  # the last epoch's guarded tables (and the
                    bigs.clear()  # tables they hold) go before the next epoch's are drawn: one epoch's at a time
                    bigs_epoch = epoch_of(i, dt.table_epoch)[0]
                finding = _batch(dt, impl, origin, device, seed, i, k, max_requests, bigs, stats, clock, confirm,
                                 start, time_budget, cross_check_share, cross, shared_gpu)
                if keep_batches:
                    stats.batches.append((i, k))
                if stats.warmup == 0.0 and (stats.examples >= WARMUP or (examples is not None and stats.examples >= examples)):
                    stats.warmup = time.monotonic() - start
                i += chunk_step
                if after_batch(finding):
                    break
                continue
            if by_record:  # drawn by the record, run on the device and checked by its check
                case = dt.draw_case(np.random.default_rng(derive_seed(seed, name, "device", i)), max_requests)
                t = clock("draw", t)
                finding = check_case(case, impls, device, journal)
                clock("kernel", t)
                stats.examples += 1
                stats.cross_checked += 1
                stats.tokens += TARGETS[name].output_tokens(case)
                stats.reach(name, case)
                if stats.examples == WARMUP or (examples is not None and stats.examples == examples and stats.examples < WARMUP):
                    stats.warmup = time.monotonic() - start
                i += chunk_step
                if finding is not None:
                    stats.unshrunk = finding
                    if on_progress is not None:
                        on_progress(stats)
                    if shrink and not finding.fatal:
                        finding = shrink_finding(finding, impls, device, journal=journal)
                    stats.findings.append(finding)
                    stats.unshrunk = None
                if on_progress is not None and (finding is not None or stats.examples % 16 == 0):
                    on_progress(stats)
                if finding is not None and (finding.fatal or stop_on_finding):
                    break
                continue
            if producer is not None and producer.batch:
                # the run's deadline, once a case is checked (a target's first batch, a single case
                # under a time budget, is waited for: every target checks one case at least)
                producer.deadline = None if time_budget is None or not stats.examples else start + time_budget
                try:
                    hb = next(producer)  # drawn, its oracle run and its buffers laid out
                except StopIteration:
                    break
                t = clock("draw", t)
                if record_batches:
                    finding = _record_batch(dt, impl, origin, device, hb, stats, clock, confirm,
                                            lambda case: check_case(case, impls, device, journal), start, time_budget,
                                            cross_check_share, cross)
                else:
                    finding = _host_batch(dt, impl, origin, device, hb, stats, clock, confirm, start, time_budget,
                                          cross_check_share, cross)
                if stats.warmup == 0.0 and (stats.examples >= WARMUP or (examples is not None and stats.examples >= examples)):
                    stats.warmup = time.monotonic() - start
                i += chunk_step * len(hb)
                if after_batch(finding):
                    break
                continue
            if on_device:
                s = derive_seed(seed, name, "device", i)
                gen.manual_seed(s)
                rng = np.random.default_rng(s)
                dc = dt.draw(rng, gen, device) if max_requests is None else dt.draw(rng, gen, device, max_requests)
                t = clock("draw", t)
                host = pinned.stage(dc)
                t = clock("stage", t)
                writes = dt.oracle(dc)
                t = clock("oracle", t)
                arenas = Arenas(dc, writes, device)
                views = arenas.views
            else:
                dc, arenas = next(producer)  # drawn, its oracle run and its buffers laid out
                host = dc.inputs
                t = clock("draw", t)
                views = arenas.upload(device)
            t = clock("buffers", t)
            finding = None
            try:
                dt.launch(impl, views, dc)
                t = clock("kernel", t)
                if not on_device:
                    arenas.download()
                bad = int(arenas.mismatch())
            except Exception as exc:  # noqa: BLE001 - any failure of the code under test is a finding
                outcome = Outcome().crashed(exc, device)
                case = _case(dt, dc, host) if outcome.fatal else None
                if outcome.fatal and journal is not None:
                    journal.abandon(case, f"the device became unusable: {outcome.crash}")

                    os._exit(EXIT_DEVICE_LOST)
                finding = Finding(case, outcome, origin) if outcome.fatal else confirm(_case(dt, dc, host), True)
                bad = 0
            t = clock("compare", t)
            stats.examples += 1
            stats.tokens += dc.tokens
            if stats.examples == WARMUP or (examples is not None and stats.examples == examples and stats.examples < WARMUP):
                stats.warmup = time.monotonic() - start
            elapsed = time.monotonic() - start
            size = sum(int(getattr(a, "size", 0) if isinstance(a, np.ndarray) else a.numel()) for a in dc.inputs.values())
            if finding is None and (bad or _may_cross_check(cross_s, cross_elements, size, elapsed, cross_check_share,
                                                            time_budget)):
                t0 = time.perf_counter()
                case = _case(dt, dc, host)
                stats.reach(name, case)
                finding = confirm(case, bad > 0)
                stats.cross_checked += 1
                cross_s += time.perf_counter() - t0
                cross_elements += size
                stages["cross-check"] += time.perf_counter() - t0
            if finding is not None:
                stats.unshrunk = finding
                if on_progress is not None:
                    on_progress(stats)
                if shrink and not finding.outcome.oracle_disagreements:
                    finding = shrink_finding(finding, impls, device, journal=journal)
                stats.findings.append(finding)
                stats.unshrunk = None
            if on_progress is not None and (finding is not None or stats.examples % 16 == 0):
                on_progress(stats)
            i += chunk_step
            if finding is not None and (finding.fatal or stop_on_finding):
                break
    finally:
        restore(threads)
        dt.release_tables()
        bigs.clear()
        if spared:
            gc.unfreeze()
        if producer is not None:
            producer.close()
        if lane is not None:
            lane.close()
            forget_scale_cases()
    stats.seconds = time.monotonic() - begun
    return stats


def batch_of(dt: DeviceTarget, seed: int, i: int, k: int, device: str, max_requests: int | None = None) -> DeviceBatch:
    """Batch ``i`` of ``k`` cases of a run of ``seed``, as :func:`device_fuzz_target` draws it
    (its table epoch's tables, its own seed): the same batch whoever asks (the benchmark's
    kernel alone launches the batches a run checked)."""
    epoch, share = epoch_of(i, dt.table_epoch)
    tables = derive_seed(seed, dt.name, "device tables", epoch)
    s = derive_seed(seed, dt.name, "device", i)
    return (dt.draw_batch((tables, s), device, k, share=share) if max_requests is None
            else dt.draw_batch((tables, s), device, k, max_requests, share=share))


def _batch(dt: DeviceTarget, impl: Any, origin: object, device: str, seed: int, i: int, k: int, max_requests: int | None,
           bigs: dict, stats: Any, clock: Callable, confirm: Callable, start: float,
           time_budget: float | None, cross_check_share: float, cross: list[float],
           shared_gpu: bool = False) -> Finding | None:
    """Batch ``i`` of ``k`` cases (:meth:`~...targetkit.device.DeviceTarget.draw_batch`): one
    draw, one oracle, one set of buffers and one comparison, ``k`` launches. A batch with a
    difference (or an exception) has its cases checked one at a time (the same oracle on each
    case alone), the first that fails confirmed by the NumPy and Numba oracles; a difference no
    case alone shows is an oracle disagreement. A share of the cases is cross-checked as
    :func:`device_fuzz_target` does. A batch that meets the device out of memory (lanes on one
    GPU; ``shared_gpu``: waiting longer) is drawn and checked again, the same cases
    (:func:`~.memory.fitting`). ``bigs``: the
    shared tables' guarded buffers, kept while they are intact; ``cross``: seconds and elements
    of cross-checks so far (updated)."""
    name = dt.name
    asked = k

    def attempt() -> tuple[DeviceBatch, Any]:
        t = time.perf_counter()
        batch = batch_of(dt, seed, i, asked, device, max_requests)
        clock("draw", t)
        return batch, check_batch(dt, impl, batch, device, bigs, clock)

    def retried() -> None:
        stats.oom_retries += 1

    batch, run = fitting(attempt, bigs.clear, f"{name}, device batch {i} of {asked} cases", device, retried, shared_gpu)
    k = len(batch)  # a target may draw fewer (steps of large tables)

    def host_case(j: int) -> Case:  # the batch's own tensors are as drawn (the launches write the arenas)
        dc = batch.case(j)
        return _case(dt, dc, {n: t.cpu() for n, t in dc.inputs.items()})

    t = time.perf_counter()
    launched, bad, failed = run.launched, run.bad, run.failed
    stats.examples += launched
    if failed is not None and failed.fatal:  # this process's device is gone: the suspects drawn again elsewhere
        return _lost(failed, redrawn(name, seed, i, asked, device, max_requests, launched), origin)
    stats.tokens += sum(batch.tokens(j) for j in range(launched))
    if failed is not None:
        return confirm(host_case(launched - 1), True)  # a finding either way (device_bad)
    if not bad:  # every case checked: the features its sizes and modes decide
        stats.features.update(*dt.batch_features(batch, run.writes))
        t = clock("features", t)
    if bad:
        j = first_failing(dt, impl, batch, device)  # which case: each alone, as a case at a time is checked
        if j is not None:
            finding = confirm(host_case(j), True)
        else:
            finding = confirm(host_case(0), False)
            if finding is None:
                finding = Finding(host_case(0), Outcome(), origin)
            finding.outcome.oracle_disagreements.append(Difference(
                name, None, f"{bad} element(s) not as expected in a batch of {k} cases", "no case alone differs",
                None, "device oracle", dt.oracle_name + ", batched"))
        stats.stages["cross-check"] += time.perf_counter() - t
        return finding
    sizes = batch.input_sizes()
    return _cross_check_clean(name, range(k), lambda j: int(sizes[j]), host_case, confirm, stats, start, time_budget,
                              cross_check_share, cross)




def _host_batch(dt: DeviceTarget, impl: Any, origin: object, device: str, hb: HostBatchArenas, stats: Any,
                clock: Callable, confirm: Callable, start: float, time_budget: float | None, cross_check_share: float,
                cross: list[float]) -> Finding | None:
    """A batch of cases of a target checked on the host (:class:`~...targetkit.device_batch.HostBatchArenas`,
    made by the producers): one copy to the device, the launches, one comparison of every
    element of every case (on the device; the buffer copied back only where something
    differs). A batch with a difference has its cases checked one at a time
    (:class:`~...targetkit.device.HostArenas`, the same oracle), the first that fails confirmed
    by the NumPy and Numba oracles; a difference no case alone shows is an oracle disagreement.
    A share of the cases is cross-checked as :func:`_batch` does. The batch is released at the
    end (its producer's slot takes another batch)."""
    try:
        return _host_batch_checked(dt, impl, origin, device, hb, stats, clock, confirm, start, time_budget,
                                   cross_check_share, cross)
    finally:
        hb.release()


def _host_batch_checked(dt: DeviceTarget, impl: Any, origin: object, device: str, hb: HostBatchArenas, stats: Any,
                        clock: Callable, confirm: Callable, start: float, time_budget: float | None,
                        cross_check_share: float, cross: list[float]) -> Finding | None:
    name = dt.name
    t = time.perf_counter()
    views = hb.upload(device)
    t = clock("buffers", t)

    def host_case(k: int) -> Case:
        dc = hb.case(k)
        return _case(dt, dc, dc.inputs)

    launch, cases = dt.launch, hb.launch_cases
    launched, failed = launch_each(lambda j: launch(impl, views[j], cases[j]), len(hb), device)
    t = clock("kernel", t)
    bad = 0
    if failed is None:
        bad, failed = wait(hb.mismatch, device)
    if failed is not None:
        stats.examples += launched
        if failed.fatal:
            return _lost(failed, [host_case(x) for x in range(launched)], origin)
        stats.tokens += cases[launched - 1].tokens
        return confirm(host_case(launched - 1), True)
    t = clock("compare", t)
    stats.examples += len(hb)
    stats.tokens += hb.tokens
    if not bad:  # every case checked, every element: the features each reached
        stats.features.update(*hb.features)
    if bad:
        for k in range(len(hb)):  # which case: each alone, as a case at a time is checked
            dc = hb.case(k)
            alone = HostArenas(dc, dt.oracle(dc))
            dt.launch(impl, alone.upload(device), dc)
            alone.download()
            if alone.mismatch():
                finding = confirm(host_case(k), True)
                break
        else:
            finding = confirm(host_case(0), False)
            if finding is None:
                finding = Finding(host_case(0), Outcome(), origin)
            finding.outcome.oracle_disagreements.append(Difference(
                name, None, f"{bad} element(s) not as expected in a batch of {len(hb)} cases", "no case alone differs",
                None, "device oracle", dt.oracle_name + ", batched"))
        stats.stages["cross-check"] += time.perf_counter() - t
        return finding
    return _cross_check_clean(name, range(len(hb)), hb.input_elements.__getitem__,
                              host_case, confirm, stats, start, time_budget, cross_check_share, cross)


def _lost(outcome: Outcome, suspects: list[Case], origin: object) -> Finding:
    """The finding of a batch whose launches left the device unusable (a sticky CUDA error,
    seen at a launch or at the batch's wait): a CUDA fault surfaces at a later call than the
    launch that made it, so every case launched so far is a suspect. The finding's case is the
    first; the CLI's supervisor runs the suspects one at a time in a fresh process to find the
    one (:func:`~...run.supervisor.locate_fault`) before it shrinks it."""
    if len(suspects) > 1:
        outcome.crash = (f"{outcome.crash} (in a batch: one of the {len(suspects)} cases launched before the "
                         "device failed)")
    return Finding(suspects[0], outcome, origin, suspects=suspects)


def _record_batch(dt: Any, impl: Any, origin: object, device: str, hb: HostBatchArenas, stats: Any, clock: Callable,
                  confirm: Callable, check: Callable[[Case], Finding | None], start: float, time_budget: float | None,
                  cross_check_share: float, cross: list[float]) -> Finding | None:
    """A record host batch (:func:`~.producers.record_batch`: cases of a target checked by its
    record, the first oracle's expectation laid out by the producers): one copy to the device,
    each case launched through the record's launch (its outputs in the shapes the record gives
    them, an aliased output in its input's buffer), one comparison of every element of every
    case. An element the first oracle bounds (``loose``) may differ from its expected value
    within its bound; any other difference names its case. Such a case is checked by the
    record's check (``check``: the NumPy and Numba oracles, settlement): one whose difference
    the contract does not leave open and that the check does not fail is an oracle
    disagreement, as a host batch's; one the contract leaves open (windows, an in-place bounded
    element as it was) the check settles. A share of the clean cases is cross-checked as
    :func:`_batch` does. The batch is released at the end (its producer's slot takes another
    batch)."""
    try:
        return _record_batch_checked(dt, impl, origin, device, hb, stats, clock, confirm, check, start, time_budget,
                                     cross_check_share, cross)
    finally:
        hb._expected = None  # views of the buffer (HostBatchArenas.inputs), gone before its slot is reused
        hb.release()


def _record_batch_checked(dt: Any, impl: Any, origin: object, device: str, hb: HostBatchArenas, stats: Any,
                          clock: Callable, confirm: Callable, check: Callable[[Case], Finding | None], start: float,
                          time_budget: float | None, cross_check_share: float, cross: list[float]) -> Finding | None:
    name = dt.name
    record = dt.record
    t = time.perf_counter()
    views = hb.upload(device)
    t = clock("buffers", t)

    def host_case(k: int) -> Case:
        dc = hb.case(k)
        return dt.to_case(DeviceCase(dc.inputs | hb.record[k].inputs, dc.outputs, dc.scalars, dc.host))

    launch = record.launch

    def run(j: int) -> None:
        v, dc, rx = views[j], hb.launch_cases[j], hb.record[j]
        arrays = hb.inputs(j)  # as drawn: a launch may read sizes off them (vLLM's max_query_len)
        if rx.inputs:
            arrays |= rx.inputs
        for n, shape in rx.shapes.items():
            v[n] = v[n].view(shape)
        for out, inp in rx.alias.items():
            v[out] = v[inp]
        launch(impl, v, Case(name, arrays, dc.scalars, dc.host.get("launch", {})))

    with np.errstate(all="ignore"):  # the interpreter's NumPy ops, as the record's check runs them
        launched, failed = launch_each(run, len(hb), device)
    t = clock("kernel", t)
    bad = 0
    if failed is None:
        bad, failed = wait(hb.mismatch, device)
    if failed is not None:
        stats.examples += launched
        if failed.fatal:
            return _lost(failed, [host_case(x) for x in range(launched)], origin)
        stats.tokens += sum(rx.tokens for rx in hb.record[:launched])
        return confirm(host_case(launched - 1), True)
    loose_outputs = any(n in dc.outputs for dc, rx in zip(hb.launch_cases, hb.record, strict=True) for n in rx.loose)
    if loose_outputs and not bad:
        hb.download()  # bounded outputs are compared on the host, written or not
    flagged = _unsettled(hb, bad) if bad or loose_outputs else {}
    t = clock("compare", t)
    stats.examples += len(hb)
    stats.tokens += sum(rx.tokens for rx in hb.record)
    if not flagged:  # every case checked, every element: the features each reached
        stats.features.update(*hb.features)
        stats.toured.update(*hb.toured)
        return _cross_check_clean(name, range(len(hb)), hb.input_elements.__getitem__, host_case, confirm, stats, start,
                                  time_budget, cross_check_share, cross)
    finding = None
    for j in range(len(hb)):
        if j not in flagged:
            stats.features.update(hb.features[j])
            stats.toured.update(hb.toured[j])
            continue
        case = host_case(j)
        stats.reach(name, case)
        finding = check(case) if flagged[j] else confirm(case, True)  # settled by the record's check, or confirmed
        stats.cross_checked += 1
        if finding is not None:
            break
    stats.stages["cross-check"] += time.perf_counter() - t
    return finding


def _unsettled(hb: HostBatchArenas, bad: int) -> dict[int, bool]:
    """The cases of record host batch ``hb`` (after its launches; ``bad``: its elements not
    as expected) with an element not as the contract says, each with whether the record's
    check settles it (its oracle met windows, or its only differences are an in-place input's
    bounded elements within their bounds holding what they held before the launch: written
    with their own value, or not written) rather than confirms it (any other difference).
    Bounded elements (:class:`~...targetkit.device.RecordExpectation`'s ``loose``) may lie
    within their bound of the expected value: an output's (the sentinel in the expected
    buffers) are every one compared so, an in-place input's where they differ."""
    from ...core.compare import within

    differing = hb.differing() if bad else {}
    names: dict[int, list[str]] = {}
    for j, n in differing:
        names.setdefault(j, []).append(n)
    flagged: dict[int, bool] = {}
    for j, (dc, rx) in enumerate(zip(hb.launch_cases, hb.record, strict=True)):
        for n in dict.fromkeys([*names.get(j, ()), *rx.loose]):
            index = differing.get((j, n), _NONE)
            if n not in rx.loose:
                if index.size:
                    flagged[j] = False
                    break
                continue
            at, expected, before, bound = rx.loose[n]
            if n in dc.outputs:  # every bounded element, written or not
                k = np.arange(at.size)
                outside = np.setdiff1d(index, at, assume_unique=True)
            else:
                k = np.minimum(np.searchsorted(at, index), max(at.size - 1, 0))
                outside = index[(at.size == 0) | (at[k] != index)] if at.size else index
            if outside.size:  # a difference outside the bounded elements
                flagged[j] = False
                break
            actual = hb.array(j, n)[at[k]]
            bits = actual.view(before.dtype)
            same = bits == expected[k].view(before.dtype)
            if not (same | within(expected[k], actual, bound[k])).all():
                flagged[j] = False
                break
            if (~same & (bits == before[k])).any():
                flagged[j] = True
    return {j: settles or hb.record[j].windows for j, settles in flagged.items()}


_NONE = np.zeros(0, dtype=np.int64)


def _may_cross_check(spent: float, elements: int, size: int, elapsed: float, share: float,
                     time_budget: float | None) -> bool:
    """Whether a run that has spent ``spent`` seconds cross-checking ``elements`` elements, after
    ``elapsed`` seconds, cross-checks a case of ``size`` elements: its cost predicted at the rate
    so far (:data:`CROSS_CHECK_S_PER_ELEMENT` before any) keeps the cross-checks within
    ``share`` of the run's time (the run's first is made at once; ``share`` 1: every case) and
    fits the budget."""
    rate = spent / max(elements, 1) if elements else CROSS_CHECK_S_PER_ELEMENT
    fits = time_budget is None or elapsed + rate * size < time_budget
    return fits and (not spent or share >= 1 or spent + rate * size <= share * elapsed)


def _cross_check_clean(name: str, cases: Iterable[Any], size_of: Callable[[Any], int], host_case: Callable[[Any], Case],
                       confirm: Callable[[Case, bool], Finding | None], stats: Stats, start: float,
                       time_budget: float | None, cross_check_share: float, cross: list) -> Finding | None:
    """A clean batch's cases (device or host batch), in order, confirmed by the NumPy and Numba
    oracles while the cross-checks' seconds, the next one's included (at the rate measured so
    far, ``cross``: seconds, elements), stay within ``cross_check_share`` of the run's (1: every
    case) and the next one fits the budget; the run's first cross-check is made at once, on the
    batch's smallest case. The first that differs is the batch's finding."""
    cases = list(cases)
    if not cross[0] and len(cases) > 1:  # the run's first: its cheapest case (the rate is not known yet)
        cases.insert(0, cases.pop(min(range(len(cases)), key=lambda j: size_of(cases[j]))))
    for c in cases:
        elapsed = time.monotonic() - start
        size = size_of(c)
        if not _may_cross_check(cross[0], cross[1], size, elapsed, cross_check_share, time_budget):
            break
        t0 = time.perf_counter()
        case = host_case(c)
        stats.reach(name, case)
        finding = confirm(case, False)
        stats.cross_checked += 1
        cross[0] += time.perf_counter() - t0
        cross[1] += size
        stats.stages["cross-check"] += time.perf_counter() - t0
        if finding is not None:
            return finding
    return None


def _say(name: str, line: str) -> None:
    """One line of a scale case's progress on stderr (such a case takes tens of seconds)."""
    print(f"eaglefuzz: {name}: {line}", file=sys.stderr, flush=True)


def _verdict(v: Verdict) -> str:
    if v.unfit:
        return f"not checked: it did not fit in the device's free memory ({v.unfit})"
    if v.crash or v.hang:
        return f"{'crash' if v.crash else 'hang'}: {v.crash or v.hang}"
    if not v.bad:
        return "as the contract says"
    confirmed = ("confirmed by the NumPy and Numba oracles" if v.outcome is not None and not v.outcome.ok
                 else "NOT confirmed by the NumPy and Numba oracles" if v.confirmed else "not confirmed")
    return f"{v.bad} element(s) differ on the device, {confirmed}"


def _scale_finding(case: Case, v: Verdict, origin: object) -> Finding:
    """The finding of a production-scale case the lane failed: the ordinary check's (the
    NumPy and Numba oracles) when it confirmed a difference; else the fault; else the lane's
    device check and the ordinary one disagree (an oracle disagreement, a harness bug)."""
    if v.outcome is not None and not v.outcome.ok:
        return _with_features(Finding(case, v.outcome, origin), v)
    if v.crash or v.hang:
        return _with_features(Finding(case, Outcome(crash=v.crash, hang=v.hang), origin), v)
    outcome = Outcome()
    outcome.oracle_disagreements.append(Difference(
        case.kernel, None, "the kernel's outputs (the NumPy and Numba oracles agree with them)",
        f"{v.bad} element(s) not as expected", None, "device oracle",
        f"torch oracle (oracles/{'tensor_ops_v2' if TARGETS[case.kernel].runner == 'V2' else 'tensor_ops'}.py), scale lane"))
    return _with_features(Finding(case, outcome, origin), v)


def _with_features(finding: Finding, v: Verdict) -> Finding:
    """``finding`` showing the features the lane found of its case (a lane that died before it
    did: the report finds them)."""
    return finding.given_features(v.features) if v.features else finding


def _scale_example(lane: ScaleLane, name: str, origin: object, i: int, stats: Any, shrink: bool,
                   minimise_s: float | None = None) -> Finding | None:
    """Example ``i`` as a production-scale case in ``lane``; its finding (minimised when
    ``shrink``: one row past ``2**31``, plain values, within ``minimise_s`` seconds or
    ``$EAGLEFUZZ_SCALE_MINIMISE_BUDGET``, the less, the first minimal case tried in any case
    unless that is 0), or ``None``. The NumPy and Numba oracles
    confirm the case reported: the minimal one (the drawn one, of billions of elements, only
    where none of the minimal ones fails or ``shrink`` is off). A target with scale batches
    checks a batch instead (:func:`_scale_batch_example`)."""
    if lane.batches:
        return _scale_batch_example(lane, name, origin, i, stats, shrink, minimise_s)
    v = lane.run(i, confirm=not shrink)
    _say(name, f"production-scale case {i}: {_verdict(v)} ({v.seconds:.0f} s)")
    if v.unfit:
        stats.scale_unfit += 1
        return None
    stats.examples += 1
    stats.scale_cases += 1
    stats.tokens += v.tokens
    stats.features |= set(v.features)
    if not v.failed:
        return None
    if not shrink:
        return _scale_finding(scale_case(name, lane.seed, i), v, origin)
    budget = float(os.environ.get(SCALE_MINIMISE_ENV, "300"))  # 0: not minimised
    k, mv = minimise(lane, i, budget if minimise_s is None else min(budget, minimise_s), first_anyway=budget > 0)
    _say(name, f"production-scale case {i} minimised: " + ("none of the minimal cases fails" if k is None else
                                                          f"minimal case {k}: {_verdict(mv)} ({mv.seconds:.0f} s)"))
    stats.shrink_attempts += 1 if k is None else k + 1
    if k is not None:
        return _scale_finding(scale_case(name, lane.seed, i, k), mv, origin)
    again = lane.run(i, confirm=True)  # the drawn case, confirmed by the NumPy and Numba oracles
    _say(name, f"production-scale case {i} confirmed: {_verdict(again)} ({again.seconds:.0f} s)")
    if again.unfit:  # neither a minimal case nor the drawn one's confirmation fits here now: not checked
        stats.scale_unfit += 1
        return None
    finding = _scale_finding(scale_case(name, lane.seed, i), again if again.failed else v, origin)
    if not finding.outcome.oracle_disagreements:
        finding.shrink = "not minimised: no minimal production-scale case (one row past 2**31) fails the same way"
    return finding


def scale_epoch(i: int) -> int:
    """The scale epoch of scale example ``i`` (:data:`~.scale_lane.SCALE_TABLE_EPOCH` consecutive
    scale examples, one in :data:`SCALE_EVERY` examples, share their tables)."""
    return (i // SCALE_EVERY) // SCALE_TABLE_EPOCH


def _scale_batch_example(lane: ScaleLane, name: str, origin: object, i: int, stats: Any, shrink: bool,
                         minimise_s: float | None = None) -> Finding | None:
    """Scale example ``i`` of a target with scale batches: its
    :func:`~.scale_lane.scale_batch_size` production-scale cases drawn and checked in ``lane``
    (:meth:`~.scale_lane.ScaleLane.batch`),
    over the tables of its scale epoch (:data:`~.scale_lane.SCALE_TABLE_EPOCH` examples). A
    failing batch's finding is, when ``shrink``, the first minimal case of its vocabulary that
    fails (as :func:`_scale_example` minimises); else, or where none fails, the batch's case
    that failed (found by a fresh lane after a fault or a hang), written to files by the lane
    and confirmed there by the NumPy and Numba oracles where the lane survived it."""
    k = scale_batch_size(device_targets()[name], lane.device)
    epoch = scale_epoch(i)
    v = lane.batch(i, epoch, k)
    _say(name, f"production-scale batch {i}, {v.examples} case(s) launched: {_verdict(v)} ({v.seconds:.0f} s)")
    if v.unfit:
        stats.scale_unfit += 1
        return None
    stats.examples += v.examples
    stats.scale_cases += v.examples
    stats.tokens += v.tokens
    stats.features |= set(v.features)
    if not v.failed:
        return None
    if shrink:
        budget = float(os.environ.get(SCALE_MINIMISE_ENV, "300"))  # 0: not minimised
        m, mv = minimise(lane, i, budget if minimise_s is None else min(budget, minimise_s), first_anyway=budget > 0,
                         epoch=epoch)
        _say(name, f"production-scale batch {i} minimised: " + ("none of the minimal cases fails" if m is None else
                                                               f"minimal case {m}: {_verdict(mv)} ({mv.seconds:.0f} s)"))
        stats.shrink_attempts += batch_minimal_count(name, lane.seed, epoch) if m is None else m + 1
        if m is not None:
            return _scale_finding(batch_minimal(name, lane.seed, epoch, m), mv, origin)
    j, located = v.case, None
    if v.crash or v.hang:  # launched a case at a time in a fresh lane, the device waited for after each
        located = lane.locate(i, epoch, k)
        j = located if located is not None else max(v.examples - 1, 0)
    survived = not (v.crash or v.hang)
    directory = tempfile.mkdtemp(prefix="eaglefuzz-scale-case-")
    saved = lane.save(i, epoch, k, 0 if j is None else j, directory, confirm=survived)
    if saved.unfit:  # the confirmation of the case that failed did not fit: not checked
        shutil.rmtree(directory, ignore_errors=True)
        _say(name, f"production-scale batch {i}: case {j}: {_verdict(saved)}")
        stats.scale_unfit += 1
        return None
    if saved.crash or saved.hang:
        shutil.rmtree(directory, ignore_errors=True)
        raise RuntimeError(f"{name}: the scale lane could not write case {j} of batch {i}: {saved.crash or saved.hang}")
    case = load_case(directory)
    if survived:
        said = ("the NumPy and Numba oracles confirm it" if saved.outcome is not None and not saved.outcome.ok
                else "the NumPy and Numba oracles do not confirm it")
    else:
        said = (f"the case whose launch {'faulted' if v.crash else 'hung'} when a fresh lane ran the batch a case at a time"
                if located is not None else "the last case launched (a fresh lane running the batch a case at a time did not fail)")
    _say(name, f"production-scale batch {i}: case {j} written out: {said}")
    if j is None and survived:  # no case alone differs: the batched check and the cases alone disagree
        outcome = saved.outcome if saved.outcome is not None else Outcome()
        outcome.oracle_disagreements.append(Difference(
            name, None, f"{v.bad} element(s) not as expected in a scale batch of {v.examples} cases",
            "no case alone differs", None, "device oracle", device_targets()[name].oracle_name + ", batched"))
        return _with_features(Finding(case, outcome, origin), v)
    finding = _scale_finding(case, saved if survived and saved.failed else v, origin)
    if shrink and not finding.outcome.oracle_disagreements:
        finding.shrink = "not minimised: no minimal production-scale case (one row past 2**31) fails the same way"
    return finding
