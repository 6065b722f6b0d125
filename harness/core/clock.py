"""When a command started: what ``--time-budget`` counts from, in every process of one run.

The outermost ``eaglefuzz`` process notes its start (:func:`mark_start`, wall-clock seconds) in
``$EAGLEFUZZ_STARTED_AT``; its workers (the supervised worker, a worker restarted after a
crash, the shards of ``--devices``) inherit it, so that a budget covers the start-up, loading
the code under test, the oracles' compilation and every worker, not only the cases.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

STARTED_ENV = "EAGLEFUZZ_STARTED_AT"
"""Wall-clock time (``time.time()``) at which the command started."""


def started_at() -> float:
    """When this command started (``$EAGLEFUZZ_STARTED_AT``; now where it is unset or not a number)."""
    try:
        return float(os.environ[STARTED_ENV])
    except (KeyError, ValueError):
        return time.time()


def deadline(budget: float, start: float | None = None) -> float:
    """The ``time.monotonic()`` value at which ``budget`` seconds counted from ``start`` (a
    wall-clock time; default :func:`started_at`) end."""
    return time.monotonic() + budget - (time.time() - (started_at() if start is None else start))


@contextmanager
def mark_start(when: float) -> Iterator[None]:
    """Within the block, this command started at ``when`` (wall clock), unless an outer
    process already said when (a worker inherits its command's start)."""
    if STARTED_ENV in os.environ:
        yield
        return
    os.environ[STARTED_ENV] = repr(when)
    try:
        yield
    finally:
        os.environ.pop(STARTED_ENV, None)
