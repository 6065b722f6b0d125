"""Signals from outside interrupt a run; they are never a finding against the code under test.

Ctrl-C (SIGINT), SIGTERM (``timeout``, a CI runner's cancel) and SIGHUP (a closed terminal)
raise :class:`KeyboardInterrupt` in the main thread once :func:`install` ran: the run stops,
keeps and reports what it found, and exits with ``128 + signal`` (1 when it found something).
"""

from __future__ import annotations

import signal
from typing import Any

SIGNALS: tuple[int, ...] = tuple(
    int(s) for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None
)
_received: list[int] = []


def _raise(signum: int, frame: Any) -> None:
    _received.append(signum)
    raise KeyboardInterrupt


def install() -> None:
    """From now on each of :data:`SIGNALS` raises :class:`KeyboardInterrupt` (main thread only)."""
    for s in SIGNALS:
        signal.signal(s, _raise)


def hold() -> None:
    """Ignore further signals: the report of an interrupted run must not be cut short."""
    for s in SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def received() -> int | None:
    """The first signal that interrupted this process (``None``: none, or Ctrl-C before
    :func:`install`)."""
    return _received[0] if _received else None
