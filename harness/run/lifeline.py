"""A worker process dies with its parent: no orphan keeps running after ``kill -9`` of eaglefuzz.

Two mechanisms, both armed in every worker (:func:`arm`):

- Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, so the kernel kills the worker when its parent
  dies. The parent may already be gone when the worker sets it: the worker then compares
  ``os.getppid()`` with the parent's pid it was given and leaves at once.
- Everywhere (macOS has no prctl): a pipe. The parent keeps its write end open for the
  worker's lifetime and never writes; a daemon thread of the worker blocks reading the read
  end and ends the process when it reads end-of-file, which happens when the parent is gone.

This module imports nothing heavy: the worker arms it before importing torch or triton.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass, field

FD_ENV = "EAGLEFUZZ_LIFELINE_FD"
"""The worker's read end of the lifeline pipe (a file descriptor number)."""
PARENT_ENV = "EAGLEFUZZ_PARENT_PID"
"""The pid of the worker's parent, to detect a parent that died before the worker armed."""
MODE_ENV = "EAGLEFUZZ_LIFELINE"
"""``pipe`` arms the pipe alone (what macOS gets; for tests on Linux); default: both."""
EXIT_PARENT_GONE = 125
"""The exit status of a worker whose parent is gone (nobody reads it)."""

PR_SET_PDEATHSIG = 1


@dataclass
class Lifeline:
    """The parent's side: pass :attr:`env` and :attr:`pass_fds` to the child, then call
    :meth:`spawned`; :meth:`close` when the child is gone (the parent's exit also does it)."""

    read_fd: int
    write_fd: int
    env: dict[str, str] = field(default_factory=dict)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self.read_fd,)

    def spawned(self) -> None:
        """The child holds its read end now; the parent no longer needs it."""
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1

    def close(self) -> None:
        self.spawned()
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1


def lifeline() -> Lifeline:
    """A new lifeline for one child process (the write end is not inherited by any child)."""
    r, w = os.pipe()
    os.set_inheritable(w, False)
    return Lifeline(r, w, {FD_ENV: str(r), PARENT_ENV: str(os.getpid())})


def _set_pdeathsig() -> bool:
    """Ask Linux to SIGKILL this process when its parent dies; whether that worked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(fd: int) -> None:
    try:
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    os._exit(EXIT_PARENT_GONE)


def arm() -> None:
    """In a worker: die with the parent that set :data:`FD_ENV`/:data:`PARENT_ENV` (no-op
    when they are not set). Call it first thing, before anything slow."""
    fd, parent = os.environ.pop(FD_ENV, None), os.environ.pop(PARENT_ENV, None)
    if fd is None and parent is None:
        return
    if os.environ.get(MODE_ENV) != "pipe":
        _set_pdeathsig()
    if parent is not None and os.getppid() != int(parent):
        os._exit(EXIT_PARENT_GONE)  # the parent died before the death signal was set
    if fd is not None:
        threading.Thread(target=_watch, args=(int(fd),), name="eaglefuzz-lifeline", daemon=True).start()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (dead, not yet reaped by its parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")
