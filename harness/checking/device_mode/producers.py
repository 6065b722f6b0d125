"""Cases of a target checked on the host, made ahead of the launches by a pool of processes.

For ``checked_on = "host"`` targets (:class:`~.base.HostArenas`) everything but the launch is
host work: drawing the case, the NumPy oracle, laying out and pre-filling the buffers. On one
core that work, not the GPU, bounds a campaign. :class:`HostCases` hands the work to worker
processes (spawned: the parent may hold a CUDA context) a chunk of examples at a time, keeps a
few chunks in flight, and yields the cases in example order. Example ``i``'s case depends on
its seed only (:func:`host_case`), so a run with workers draws exactly the cases a run without
them draws. The pool is started once per process and kept for the next campaign (each worker
imports torch: seconds), and shut down at exit; a worker leaves by itself when the process
that started it is gone (one that ended without its exit handlers).
"""

from __future__ import annotations

import atexit
import mmap
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import wait

import numpy as np

from ...generation.strategies import derive_seed
from ...targetkit.device import DeviceCase, HostArenas
from ...targetkit.device_batch import HostBatchArenas
from . import device_targets

CHUNK = 8
"""Examples per task: enough to pay for the round trip to a worker."""


def default_workers(device: str, lanes: int = 1) -> int:
    """Worker processes for a campaign on ``device``: none on the CPU (the interpreted kernel
    costs far more than the host work), else up to 8, leaving two cores to the launching
    process and the rest of the machine; with ``lanes`` processes launching on the GPU at
    once (``--lanes``), each lane's share of those cores, at least one."""
    if device == "cpu":
        return 0
    spare = (os.cpu_count() or 1) - 2
    return max(0, min(8, spare)) if lanes <= 1 else max(1, min(8, spare // lanes))


_POOL: dict[int, ProcessPoolExecutor] = {}
"""The process's pool, by its number of workers (one at most)."""


def _pool(workers: int) -> ProcessPoolExecutor:
    if workers not in _POOL:
        _shutdown()
        _POOL[workers] = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_init_worker)
    return _POOL[workers]


def _init_worker() -> None:
    """A producer process: torch on one thread (the torch oracles of small cases; with a thread
    pool per process, eight producers on 16 cores took 9 ms a case instead of 0.14 ms, every
    small operation waiting for the pool), and gone with its parent."""
    import torch

    torch.set_num_threads(1)
    _die_with_parent()


def _die_with_parent() -> None:
    """In a producer process: leave as soon as the process that started it is gone. A process
    that ends without its exit handlers (``os._exit``: an xdist worker, a killed campaign) never
    shuts its pool down, and its producers (and multiprocessing's resource tracker, which waits
    for them) would live on as orphans."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(0)

    threading.Thread(target=watch, name="eaglefuzz-parent-watch", daemon=True).start()


@atexit.register
def _shutdown() -> None:
    for pool in _POOL.values():
        pool.shutdown(wait=True, cancel_futures=True)
    _POOL.clear()


def _discard(workers: int) -> None:
    pool = _POOL.pop(workers, None)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def host_case(name: str, seed: int, i: int, max_requests: int | None = None) -> tuple[DeviceCase, HostArenas]:
    """Example ``i`` of ``name`` under ``seed``: the case and its pre-filled buffers."""

    dt = device_targets()[name]
    rng = np.random.default_rng(derive_seed(seed, name, "device", i))
    dc = dt.draw(rng, None, "cpu") if max_requests is None else dt.draw(rng, None, "cpu", max_requests)
    return dc, HostArenas(dc, dt.oracle(dc))


def host_batch(name: str, seed: int, indices: list[int], max_requests: int | None = None) -> HostBatchArenas:
    """Examples ``indices`` of ``name`` under ``seed`` (each case the one :func:`host_case`
    draws) in one set of pre-filled buffers, with each case's features (the record's
    ``features_of``: every case of a batch is checked, element for element)."""
    from ...targets import TARGETS

    dt = device_targets()[name]
    cases = []
    for i in indices:
        rng = np.random.default_rng(derive_seed(seed, name, "device", i))
        cases.append(dt.draw(rng, None, "cpu") if max_requests is None else dt.draw(rng, None, "cpu", max_requests))
    writes = dt.oracle_many(cases)
    hb = HostBatchArenas(cases, writes)
    features = [dt.host_features(dc, w) for dc, w in zip(cases, writes, strict=True)]
    hb.features = [TARGETS[name].features_of(dt.to_case(dc)) if f is None else f
                   for dc, f in zip(cases, features, strict=True)]
    return hb


RECORD_BATCH_BYTES = 32 << 20
"""The bytes of arrays (inputs and outputs) after which a record host batch is cut: the next
cases of its examples make another batch (a batch of cases of tens of MB each would take
seconds to hand over and gigabytes to hold)."""


def record_batch(name: str, seed: int, indices: list[int], max_requests: int | None = None) -> list[HostBatchArenas]:
    """Examples ``indices`` of a target checked by its record
    (:class:`~...targetkit.device.RecordDevice`), each the case its record draws (the seed the
    case-at-a-time path draws it with), checked against the record's first (NumPy) oracle
    (:meth:`~...targetkit.device.RecordDevice.host_expectation`) in pre-filled buffers: one
    :class:`~...targetkit.device_batch.HostBatchArenas` of consecutive cases, or several where
    their arrays pass :data:`RECORD_BATCH_BYTES`. Each batch carries ``record`` (each case's
    :class:`~...targetkit.device.RecordExpectation`), ``features`` (as the run counts them:
    a tour shape's case its extremes only) and ``toured`` (a tour shape's case's others)."""
    from ...generation.strategies import is_tour_case
    from ...targetkit.device import record_device
    from ...targets import TARGETS

    dt = device_targets()[name]
    target = TARGETS[name]
    if dt.checked_on != "record":  # asked of a target that draws on the device: its record's device mode
        dt = record_device(target)
    extremes = set(target.extremes)
    out: list[HostBatchArenas] = []
    parts: list[tuple] = []
    size = 0

    def cut() -> None:
        hb = HostBatchArenas([p[0] for p in parts], [p[1] for p in parts])
        hb.record = [p[2] for p in parts]
        hb.features = [p[3] for p in parts]
        hb.toured = [p[4] for p in parts]
        out.append(hb)
        parts.clear()

    for i in indices:
        case = dt.draw_case(np.random.default_rng(derive_seed(seed, name, "device", i)), max_requests)
        dc, writes, rx = dt.host_expectation(case)
        reached = target.features_of(case)
        toured = frozenset()
        if is_tour_case(case):
            reached, toured = reached & extremes, reached - extremes
        parts.append((dc, writes, rx, frozenset(reached), toured))
        size += sum(a.nbytes for a in dc.inputs.values()) + sum(k * t.itemsize for t, k in dc.outputs.values())
        if size >= RECORD_BATCH_BYTES:
            cut()
            size = 0
    if parts:
        cut()
    return out


def _chunk(name: str, seed: int, indices: list[int], max_requests: int | None) -> list[tuple[DeviceCase, HostArenas]]:
    return [host_case(name, seed, i, max_requests) for i in indices]


def _batches(name: str, seed: int, batches: list[list[int]], max_requests: int | None,
             slot: tuple[str, int] | None = None, by_record: bool | None = None) -> list[HostBatchArenas]:
    """The batches of ``batches``; with ``slot`` (a worker's task: a file and its size), the
    first one's buffer written there instead of pickled back (:meth:`~...targetkit.device_batch.HostBatchArenas.put_in`);
    ``by_record``: record host batches (:func:`record_batch`) or host batches, as the process
    that asks sees the target (``None``: as this one does)."""
    if by_record is None:
        by_record = device_targets()[name].checked_on == "record"
    if by_record:  # a batch of examples may be cut into several
        out = [hb for indices in batches for hb in record_batch(name, seed, indices, max_requests)]
    else:
        out = [host_batch(name, seed, indices, max_requests) for indices in batches]
    if slot is not None and out:
        out[0].put_in(*slot)
    return out


def _remove_orphans(base: str, prefix: str) -> None:
    """Slot folders of processes that ended without their exit handlers (``os._exit``: a lost
    device, an xdist worker, a killed campaign): shared memory is memory, so the next run frees
    it."""
    for entry in os.listdir(base):
        if not entry.startswith(prefix):
            continue
        pid = entry[len(prefix) :].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(base, entry), ignore_errors=True)
        except PermissionError:  # another user's, alive
            pass


class _Slots:
    """Files in shared memory (``/dev/shm`` where there is one) that producers write their
    batches' buffers to and the launching process maps, each reused batch after batch: a batch
    travels as its layout alone, not as megabytes pickled by the producer and unpickled by the
    launching process (where the pool's result thread competed with the launches for the
    interpreter). A slot is handed to one task at a time and back when its batch is done with
    (or lost with a task of a closed run: never reused then); a batch larger than its slot
    travels pickled, and later slots are made larger."""

    PREFIX = "eaglefuzz-slots-"

    def __init__(self) -> None:
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
        _remove_orphans(base, self.PREFIX)
        self.dir = tempfile.mkdtemp(prefix=f"{self.PREFIX}{os.getpid()}-", dir=base)
        self.free: list[str] = []
        self.maps: dict[str, mmap.mmap] = {}
        self.size: dict[str, int] = {}
        self.capacity = 4 << 20
        self.count = 0
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.dir, True)

    def take(self, limit: int) -> tuple[str, int] | None:
        """A free slot (made if fewer than ``limit`` exist), at least as large as the largest
        batch seen; ``None`` where none is free."""
        if self.free:
            path = self.free.pop()
        elif self.count < limit:
            path = os.path.join(self.dir, f"slot{self.count}")
            self.count += 1
            self.size[path] = 0
        else:
            return None
        if self.size[path] < self.capacity:
            old = self.maps.pop(path, None)
            if old is not None:
                try:
                    old.close()
                except BufferError:  # a view of a released batch still alive: unmapped when it goes
                    pass
            with open(path, "ab"):
                pass
            os.truncate(path, self.capacity)
            self.size[path] = self.capacity
        return path, self.size[path]

    def mapping(self, path: str) -> mmap.mmap:
        if path not in self.maps:
            with open(path, "r+b") as f:
                self.maps[path] = mmap.mmap(f.fileno(), self.size[path])
        return self.maps[path]

    def grow(self, nbytes: int) -> None:
        """A batch of ``nbytes`` travelled pickled: later slots hold one twice its size."""
        self.capacity = max(self.capacity, -(-2 * nbytes // (1 << 20)) << 20)

    def close(self) -> None:
        for m in self.maps.values():
            try:
                m.close()
            except BufferError:  # a batch still viewing it: unmapped when that goes
                pass
        self.maps.clear()
        self._cleanup()


class HostCases:
    """The cases of examples ``first, first + step, ...`` of ``name``, in that order, made by
    ``workers`` processes (0: in this process, as they are asked for). :meth:`close` drops the
    cases made ahead and not asked for; the workers stay for the next campaign.

    ``batch`` (> 0): each item is a :class:`~...targetkit.device_batch.HostBatchArenas` of
    ``batch`` consecutive examples (the same cases, in the same order), the last one shorter
    where ``limit`` examples in all end the run."""

    def __init__(self, name: str, seed: int, first: int, step: int, max_requests: int | None, workers: int,
                 batch: int = 0, limit: int | None = None, ramp: bool = False) -> None:
        self.args = (name, seed)
        self.by_record = device_targets()[name].checked_on == "record"
        self.next_index, self.step, self.max_requests = first, step, max_requests
        self.workers = workers
        self.batch, self.left = batch, limit
        self.pool = _pool(workers) if workers > 0 else None
        self.slots = _Slots() if self.pool is not None and batch else None
        self.in_flight: deque[tuple[list, Future, tuple[str, int] | None]] = deque()
        self.depth = 2 * workers
        self.ramp = 1 if ramp else 0
        """With ``ramp``, the first batches are of 1, 2, 4, ... cases up to ``batch`` (the same
        cases in the same order, grouped so): a run under a time budget of a few seconds checks
        its first cases while the later batches are made, instead of waiting for a whole batch
        of production-scale draws (a record target's take seconds)."""
        self.deadline: float | None = None
        """When (``time.monotonic()``) the run's time is up: a batch still being made then ends
        the iteration (``--time-budget`` holds within one batch's launches, not its making).
        The engine sets it once its target has checked a case."""
        self.ready: deque = deque()
        self.pending: deque = deque()  # examples (batches) to make here: the pool broke before making them

    def _indices(self, k: int) -> list[int]:
        out = [self.next_index + j * self.step for j in range(k)]
        self.next_index += k * self.step
        return out

    def _work(self, chunks: int) -> list:
        """The next ``chunks`` units of work: example indices, or lists of them (batches)."""
        if not self.batch:
            return self._indices(chunks)
        out = []
        for _ in range(chunks):
            k = self.batch if self.left is None else min(self.batch, self.left)
            if self.ramp:
                k, self.ramp = min(k, self.ramp), self.ramp * 2
            if k <= 0:
                break
            if self.left is not None:
                self.left -= k
            out.append(self._indices(k))
        return out

    def _make(self, work: list) -> list:
        return (_batches(*self.args, work, self.max_requests, None, self.by_record) if self.batch
                else _chunk(*self.args, work, self.max_requests))

    def __iter__(self) -> Iterator[tuple[DeviceCase, HostArenas]]:
        return self

    def __next__(self) -> tuple[DeviceCase, HostArenas] | HostBatchArenas:
        if self.ready:
            return self.ready.popleft()
        if self.pool is None:
            work = [self.pending.popleft()] if self.pending else self._work(1)
            if not work:
                raise StopIteration
            self.ready.extend(self._make(work))
            return self.ready.popleft()
        while len(self.in_flight) < self.depth:
            work = self._work(1 if self.batch else CHUNK)
            if not work:
                break
            if self.batch:
                slot = self.slots.take(self.depth + 2)
                future = self.pool.submit(_batches, *self.args, work, self.max_requests, slot, self.by_record)
            else:
                slot, future = None, self.pool.submit(_chunk, *self.args, work, self.max_requests)
            self.in_flight.append((work, future, slot))
        if not self.in_flight:
            raise StopIteration
        indices, future, slot = self.in_flight[0]
        try:
            made = future.result(timeout=None if self.deadline is None else max(0.0, self.deadline - time.monotonic()))
        except FutureTimeout:  # the run's time is up before this batch is made: it ends here
            raise StopIteration from None
        except BrokenProcessPool:
            # A worker could not start or died (a main module spawn cannot re-import, say):
            # the same cases, made here from now on.
            self.pending.extend(i for indices, _, _ in self.in_flight for i in indices)
            self.in_flight.clear()
            _discard(self.workers)
            self.pool = None
            return next(self)
        self.in_flight.popleft()
        if slot is not None:
            hb = made[0]
            if hb.slot == slot[0]:
                hb.take_from(self.slots.mapping(slot[0]), lambda path=slot[0]: self.slots.free.append(path))
            else:  # it travelled pickled: too large for the slot, or the slot could not be written
                self.slots.free.append(slot[0])
                self.slots.grow(hb.host.nbytes)
        self.ready.extend(made)
        return self.ready.popleft()

    def close(self) -> None:
        for _, future, _ in self.in_flight:
            future.cancel()
        self.in_flight.clear()
        self.pool = None
        if self.slots is not None:  # a task still running writes into its slot's file, unlinked here
            self.slots.close()
            self.slots = None
