"""Signals from outside interrupt a run; they are never a finding against the code under test.

Ctrl-C (SIGINT), SIGTERM (``timeout``, a CI runner's cancel) and SIGHUP (a closed terminal)
raise :class:`KeyboardInterrupt` in the main thread inside :func:`interruptible`: the run stops,
keeps and reports what it found, and exits with ``128 + signal`` (1 when it found something).
"""

from __future__ import annotations

import gc
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SIGNALS: tuple[int, ...] = tuple(
    int(s) for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None
)
_received: list[int] = []
_deferred: list[int] = []
"""Signals that came inside a garbage-collector callback, to be raised at :func:`checkpoint`."""


def _raise(signum: int, frame: Any) -> None:
    _received.append(signum)
    if _in_gc_callback(frame):
        # Python drops an exception raised in a gc callback ("Exception ignored in: gc_callback"),
        # and the interruption with it: the run raises it at its next checkpoint instead.
        _deferred.append(signum)
        return
    raise KeyboardInterrupt


def _in_gc_callback(frame: Any) -> bool:
    """Whether ``frame`` runs inside a callback of :data:`gc.callbacks` (Hypothesis has one)."""
    codes = {getattr(cb, "__code__", None) for cb in gc.callbacks} - {None}
    while frame is not None and codes:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def checkpoint() -> None:
    """Raise :class:`KeyboardInterrupt` for a signal that came where it could not be raised (in
    a garbage-collector callback) since the last checkpoint; a run checks before every case."""
    if _deferred:
        _deferred.clear()
        raise KeyboardInterrupt


@contextmanager
def interruptible() -> Iterator[None]:
    """While the body runs, each of :data:`SIGNALS` raises :class:`KeyboardInterrupt` (in the
    main thread; elsewhere nothing changes); the previous handlers come back afterwards."""
    _received.clear()
    _deferred.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in SIGNALS}
    for s in SIGNALS:
        signal.signal(s, _raise)
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def hold() -> None:
    """Ignore further signals (until :func:`interruptible` ends): the report of an interrupted
    run must not be cut short."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def count() -> int:
    """How many signals have interrupted the current (or last) :func:`interruptible` run: a mark
    to pass to :func:`received_since`."""
    return len(_received)


def received_since(mark: int) -> int | None:
    """The first signal that came after :func:`count` returned ``mark`` (``None``: none)."""
    return _received[mark] if len(_received) > mark else None


def received() -> int | None:
    """The first signal that interrupted the last :func:`interruptible` run (``None``: none,
    or Ctrl-C outside it)."""
    return _received[0] if _received else None
