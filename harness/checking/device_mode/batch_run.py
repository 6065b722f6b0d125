"""One device batch checked: the batched oracle, the guarded buffers, a launch per case, the
one wait, and, where something differs, which case differs alone.

The campaign (:mod:`.engine`) checks its ordinary batches this way, and the scale lane
(:mod:`.scale_lane`) its production-scale batches (tables past ``2**31`` elements, in a process
of their own): the same steps, whoever runs them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...targetkit.device import Arenas, DeviceTarget
from ...targetkit.device_batch import BatchArenas, DeviceBatch
from ...targets import Outcome


def _no_clock(stage: str, t0: float) -> float:
    return time.perf_counter()


@dataclass
class BatchRun:
    """What checking a batch came to: ``launched`` cases, ``bad`` elements not as expected
    (every case's, guard bands and inputs included), the failure of the code under test that
    ended the launches or the wait (``None``: none; fatal: a sticky CUDA error), and the
    batched oracle's ``writes``."""

    launched: int
    bad: int
    failed: Outcome | None
    writes: dict


def check_batch(dt: DeviceTarget, impl: Any, batch: DeviceBatch, device: str, bigs: dict,
                clock: Callable[[str, float], float] = _no_clock) -> BatchRun:
    """``batch`` checked on ``device``: :meth:`~...targetkit.device.DeviceTarget.oracle_batch`,
    :class:`~...targetkit.device_batch.BatchArenas`, ``impl`` launched once per case, one
    comparison. ``bigs``: the shared tables' guarded buffers of an earlier batch that left
    them intact (used again, and replaced by this batch's when it leaves them intact);
    ``clock(stage, t0)``: the caller's stage timer."""
    t = time.perf_counter()
    writes = dt.oracle_batch(batch)
    t = clock("oracle", t)
    arenas = BatchArenas(batch, writes, device, bigs)
    t = clock("buffers", t)
    views = arenas.views
    launched, failed = launch_each(lambda j: dt.launch(impl, views[j], batch.launch_case(j)), len(batch), device)
    t = clock("kernel", t)
    bad = 0
    if failed is None:
        bad, failed = wait(arenas.mismatch, device)  # the batch's one wait for the device
    bigs.clear()
    if not bad and failed is None:
        bigs.update({n: b for n, b in arenas.big.items() if b.writes is None})  # intact: the next batch guards them
    clock("compare", t)
    return BatchRun(launched, bad, failed, writes)


def first_failing(dt: DeviceTarget, impl: Any, batch: DeviceBatch, device: str) -> int | None:
    """The first case of ``batch`` that differs when checked alone (:class:`~...targetkit.device.Arenas`,
    the same oracle on that case alone), or ``None``."""
    for j in range(len(batch)):
        dc = batch.case(j)
        alone = Arenas(dc, dt.oracle(dc), device)
        dt.launch(impl, alone.views, dc)
        if int(alone.mismatch()):
            return j
    return None


def launch_each(run: Callable[[int], None], n: int, device: str) -> tuple[int, Outcome | None]:
    """A batch's launches, ``run(j)`` for its ``n`` cases in order, until one raises: the cases
    launched and that failure of the code under test (``None``: none raised; fatal: a sticky
    CUDA error, which may come from an earlier launch of the batch)."""
    for j in range(n):
        try:
            run(j)
        except Exception as exc:  # noqa: BLE001 - any failure of the code under test is a finding
            return j + 1, Outcome().crashed(exc, device)
    return n, None


def wait(mismatch: Callable[[], Any], device: str) -> tuple[int, Outcome | None]:
    """The batch's one wait for the device, its comparison ``mismatch()``: the elements not as
    expected, or a sticky CUDA error of its launches seen there (a fatal outcome; any other
    exception is the harness's own and raised)."""
    try:
        return int(mismatch()), None
    except Exception as exc:  # noqa: BLE001 - a fault of the batch's launches, seen at the wait
        outcome = Outcome().crashed(exc, device)
        if not outcome.fatal:
            raise
        return 0, outcome
