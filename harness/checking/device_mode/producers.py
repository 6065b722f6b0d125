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
import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import wait

import numpy as np

from ...generation.strategies import derive_seed
from ...targetkit.device import DeviceCase, HostArenas
from . import device_targets

CHUNK = 8
"""Examples per task: enough to pay for the round trip to a worker."""


def default_workers(device: str) -> int:
    """Worker processes for a campaign on ``device``: none on the CPU (the interpreted kernel
    costs far more than the host work), else up to 8, leaving two cores to the launching
    process and the rest of the machine."""
    if device == "cpu":
        return 0
    return max(0, min(8, (os.cpu_count() or 1) - 2))


_POOL: dict[int, ProcessPoolExecutor] = {}
"""The process's pool, by its number of workers (one at most)."""


def _pool(workers: int) -> ProcessPoolExecutor:
    if workers not in _POOL:
        _shutdown()
        _POOL[workers] = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_die_with_parent)
    return _POOL[workers]


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


def _chunk(name: str, seed: int, indices: list[int], max_requests: int | None) -> list[tuple[DeviceCase, HostArenas]]:
    return [host_case(name, seed, i, max_requests) for i in indices]


class HostCases:
    """The cases of examples ``first, first + step, ...`` of ``name``, in that order, made by
    ``workers`` processes (0: in this process, as they are asked for). :meth:`close` drops the
    cases made ahead and not asked for; the workers stay for the next campaign."""

    def __init__(self, name: str, seed: int, first: int, step: int, max_requests: int | None, workers: int) -> None:
        self.args = (name, seed)
        self.next_index, self.step, self.max_requests = first, step, max_requests
        self.workers = workers
        self.pool = _pool(workers) if workers > 0 else None
        self.in_flight: deque[tuple[list[int], Future]] = deque()
        self.depth = 2 * workers
        self.ready: deque[tuple[DeviceCase, HostArenas]] = deque()
        self.pending: deque[int] = deque()  # examples to make here: the pool broke before making them

    def _indices(self, k: int) -> list[int]:
        out = [self.next_index + j * self.step for j in range(k)]
        self.next_index += k * self.step
        return out

    def __iter__(self) -> Iterator[tuple[DeviceCase, HostArenas]]:
        return self

    def __next__(self) -> tuple[DeviceCase, HostArenas]:
        if self.ready:
            return self.ready.popleft()
        if self.pool is None:
            i = self.pending.popleft() if self.pending else self._indices(1)[0]
            return host_case(*self.args, i, self.max_requests)
        while len(self.in_flight) < self.depth:
            indices = self._indices(CHUNK)
            self.in_flight.append((indices, self.pool.submit(_chunk, *self.args, indices, self.max_requests)))
        indices, future = self.in_flight[0]
        try:
            self.ready.extend(future.result())
        except BrokenProcessPool:
            # A worker could not start or died (a main module spawn cannot re-import, say):
            # the same cases, made here from now on.
            self.pending.extend(i for indices, _ in self.in_flight for i in indices)
            self.in_flight.clear()
            _discard(self.workers)
            self.pool = None
            return next(self)
        self.in_flight.popleft()
        return self.ready.popleft()

    def close(self) -> None:
        for _, future in self.in_flight:
            future.cancel()
        self.in_flight.clear()
        self.pool = None
