"""A warm server: workers forked from a process that has imported torch, Numba and the harness.

A worker started from scratch spends seconds before its first case: importing torch (2.3 to
3.5 s on a 2-core machine), Numba and loading the compiled oracles (0.8 s). After a supervised
command (``fuzz``, ``replay``) has run, the supervisor leaves a server in the background
(:func:`start_server`) that has done all of that once. The next command's workers are forked
from it (:func:`spawn`) and start in a fraction of a second; the fault shrinker's many workers
too. Nothing of the code under test is loaded in the server: each worker imports the kernels it
is given, and Triton itself, as a fresh process would.

A server serves only commands that would start a worker identical to it (:func:`server_key`:
the Python executable, the environment variables read at import time, and every file of
eaglefuzz's own packages, so an edit to the harness retires it); the worker takes the
command's working directory, on ``sys.path`` too, as ``python -m`` would. It never
touches CUDA (a process that has, cannot be forked safely), and leaves after
``$EAGLEFUZZ_WARM_IDLE`` seconds without work (default 900), or on SIGTERM, SIGINT or SIGHUP
(:func:`stop_servers`, ``eaglefuzz stop-servers``, which stops the servers of its own
installation unless given ``--all``: it stops taking work at once and leaves
when the workers it forked have ended). ``EAGLEFUZZ_WARM=0`` turns it off: no server is used
or started.

A server's files in the folder (:func:`_dir`) are ``KEY.lock`` (held, ``flock``, for its life,
holding its pid and its :func:`installation`) and ``KEY.sock``; it removes both when it leaves. Those of a server killed
outright (SIGKILL) are stale: the lock is no longer held, and the next command that starts a
server removes them (:func:`sweep`).

The protocol, over a Unix socket private to the user: a request (JSON: argv, environment,
working directory) with the worker's standard streams and lifeline as file descriptors; the
reply ``pid N``, then ``exit CODE`` (``subprocess.Popen``'s return code) once the worker is gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import eaglefuzz

from .lifeline import MODE_ENV, PARENT_ENV, alive

OFF_ENV = "EAGLEFUZZ_WARM"
"""``0``: use no warm server and start none."""
IDLE_ENV = "EAGLEFUZZ_WARM_IDLE"
"""Seconds a server waits for work before it leaves (default :data:`IDLE_S`)."""
IDLE_S = 900.0
DIR_ENV = "EAGLEFUZZ_WARM_DIR"
"""Where the servers' sockets and lock files are (default ``$TMPDIR/eaglefuzz-warm-$UID``)."""
KEY_PREFIXES = ("PYTHON", "NUMBA_", "TORCH", "PYTORCH", "OMP_", "MKL_", "OPENBLAS", "HYPOTHESIS", "LD_", "CUDA_")
"""Environment variables read when the server imports its modules: a worker's must match."""
KEY_EXCLUDED = ("CUDA_VISIBLE_DEVICES",)  # read when CUDA starts, which is in the worker
RETIRE_CHECK_S = 30.0
"""How often an idle server checks that eaglefuzz's files are those it imported: after an edit
no command can match its key again, and it leaves instead of waiting out its idle time."""
_CONNECT_S = 2.0
_REPLY_S = 60.0
"""How long a client waits for its worker's pid once its request is sent (the server may be
busy a few seconds importing); past it the client starts a fresh worker, and the server kills
the one it forks for a client that is gone."""


def enabled() -> bool:
    return os.environ.get(OFF_ENV, "1") != "0" and hasattr(socket, "AF_UNIX") and hasattr(os, "fork")


def _package_files() -> list[Path]:

    files = [Path(eaglefuzz.__file__)]
    for root in map(Path, eaglefuzz.__path__):
        for sub in ("harness", "kernels", "oracles"):
            files += sorted((root / sub).rglob("*.py")) if (root / sub).is_dir() else []
    return files


def server_key(env: dict[str, str]) -> str:
    """What a worker started with ``env`` would be: the server serving it must match."""
    h = hashlib.sha256()
    h.update(json.dumps([sys.executable]).encode())
    keyed = sorted((k, v) for k, v in env.items() if k.startswith(KEY_PREFIXES) and k not in KEY_EXCLUDED)
    h.update(json.dumps(keyed).encode())
    h.update(_package_stamp().encode())
    return h.hexdigest()[:20]


def _package_stamp() -> str:
    """The paths, times and sizes of eaglefuzz's own files (part of every key)."""
    lines = []
    for f in _package_files():
        try:
            st = f.stat()
        except OSError:  # removed since it was listed
            lines.append(f"{f}:gone")
            continue
        lines.append(f"{f}:{st.st_mtime_ns}:{st.st_size}")
    return "\n".join(lines)


def _dir() -> Path:
    d = Path(os.environ.get(DIR_ENV) or Path(tempfile.gettempdir()) / f"eaglefuzz-warm-{os.getuid()}")
    d.mkdir(mode=0o700, exist_ok=True)
    if d.stat().st_uid != os.getuid() or d.stat().st_mode & 0o077:
        raise OSError(f"{d} is not private to this user")
    return d


def socket_path(key: str) -> Path:
    path = _dir() / f"{key}.sock"
    if len(str(path)) > 100:  # a Unix socket's path has about 104 bytes at most
        raise OSError(f"{path}: too long for a Unix socket")
    return path


def server_pid(path: Path) -> int | None:
    """The pid of the server of ``path`` (from its lock file), if one ever started."""
    try:
        return int(path.with_suffix(".lock").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def installation() -> str:
    """This eaglefuzz installation: the Python that runs it and the folders of its package (a
    checkout, a virtual environment's site-packages). A server records its own in its lock
    file; ``eaglefuzz stop-servers`` stops only those of its installation unless asked for all."""
    return json.dumps([sys.executable, *(str(Path(d).resolve()) for d in eaglefuzz.__path__)])


def server_installation(path: Path) -> str | None:
    """The :func:`installation` of the server of ``path`` (``None``: not recorded, a server of
    an eaglefuzz that did not record it)."""
    try:
        lines = path.with_suffix(".lock").read_text().splitlines()
    except OSError:
        return None
    return lines[1] if len(lines) > 1 else None


def _same_file(f: Any, path: Path) -> bool:
    """Whether the open file ``f`` is still the file at ``path`` (not removed or replaced)."""
    try:
        a, b = os.fstat(f.fileno()), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _holds(f: Any) -> bool:
    """Take ``f``'s lock without waiting; whether it was free (no live server holds it)."""
    import fcntl

    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def sweep(folder: Path | None = None) -> int:
    """Remove the stale files of ``folder`` (default the servers' folder): the lock file and
    socket of every server that is gone (its lock is not held: killed outright, or a crash),
    and a socket without a lock file that nothing answers on. The files of live servers, and
    of a server that is starting, are left alone. The number of files removed."""
    d = folder if folder is not None else _dir()
    removed = 0
    for lock_path in sorted(d.glob("*.lock")):
        try:
            f = open(lock_path, "r+")  # noqa: SIM115 - closed below, after the files are gone
        except OSError:
            continue
        with f:
            if not _holds(f) or not _same_file(f, lock_path):
                continue
            for stale in (lock_path.with_suffix(".sock"), lock_path):  # the lock last: still held
                try:
                    stale.unlink()
                    removed += 1
                except OSError:
                    pass
    for sock in sorted(d.glob("*.sock")):
        if not sock.with_suffix(".lock").exists() and not _up(sock):
            try:
                sock.unlink()
                removed += 1
            except OSError:
                pass
    return removed


@dataclass
class Stopped:
    """What :func:`stop_servers` did."""

    folder: Path
    pids: list[int]
    """The servers told to leave (SIGTERM)."""
    killed: list[int]
    """Those still there after the wait, killed (SIGKILL)."""
    finishing: list[int]
    """Those that stopped taking work but still wait for workers of a running command."""
    rss_mb: int
    """Their resident memory before, in MB (each server's own, as ``ps`` shows it)."""
    removed: int
    """Stale files removed (:func:`sweep`)."""
    others: list[int] = field(default_factory=list)
    """Servers of other installations, left running (``everything`` stops them)."""


def stop_servers(folder: Path | None = None, *, wait: float = 10.0, kill: bool = False,
                 everything: bool = False) -> Stopped:
    """Stop the warm servers of ``folder`` (default the servers' folder) of this installation
    (:func:`installation`; ``everything``: of any installation, whatever their key): SIGTERM to
    each whose lock is held, then up to ``wait`` seconds for each to leave. A server that
    serves a running command's worker leaves when that worker ends (it takes no new work);
    with ``kill`` it is killed after the wait (the command then loses its worker's exit
    status). Stale files are removed."""
    d = folder if folder is not None else _dir()
    pids: list[int] = []
    others: list[int] = []
    mine = installation()
    rss = 0
    for lock_path in sorted(d.glob("*.lock")):
        try:
            f = open(lock_path)  # noqa: SIM115 - closed at once
        except OSError:
            continue
        with f:
            free = _holds(f)
        pid = server_pid(lock_path.with_suffix(".sock"))
        if free or pid is None or not alive(pid):
            continue
        if not everything and server_installation(lock_path.with_suffix(".sock")) != mine:
            others.append(pid)
            continue
        rss += _rss_kb(pid)
        try:
            os.kill(pid, signal.SIGTERM)
            pids.append(pid)
        except OSError:
            pass
    start = time.monotonic()
    # A server that took the signal drops its files at once and leaves when its workers have
    # ended (at once when it has none): a second for that, up to ``wait`` for one that did not.
    while time.monotonic() < start + wait and any(
        alive(p) and (not _stopped_serving(d, p) or time.monotonic() < start + min(1.0, wait)) for p in pids
    ):
        time.sleep(0.05)
    finishing = [p for p in pids if alive(p)]
    killed = []
    if kill:
        for p in finishing:
            try:
                os.kill(p, signal.SIGKILL)
                killed.append(p)
            except OSError:
                pass
        finishing = []
    return Stopped(d, pids, killed, finishing, rss // 1024, sweep(d), others)


def _stopped_serving(folder: Path, pid: int) -> bool:
    """Whether the server ``pid`` no longer holds a lock file of ``folder`` (it takes no work)."""
    return all(server_pid(lock.with_suffix(".sock")) != pid for lock in folder.glob("*.lock"))


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
    except (OSError, ValueError, IndexError):
        return 0

class WarmWorker:
    """A worker forked by the server, with the part of ``subprocess.Popen``'s interface that
    :func:`~.supervisor.run_worker` uses (``pid``, ``wait``, ``poll``, ``returncode``)."""

    def __init__(self, conn: socket.socket, pid: int, received: bytes = b"") -> None:
        self.conn, self.pid, self.returncode = conn, pid, None
        self._buf = b""
        if received:  # the exit line came with the pid line: a worker that ended at once
            self._take(received)

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(["eaglefuzz worker", str(self.pid)], timeout)
            self._read(left)
        return self.returncode

    def _read(self, timeout: float | None) -> None:
        if not select.select([self.conn], [], [], timeout)[0]:
            return
        data = self.conn.recv(4096)
        if not data:  # the server went away without telling: wait for the worker itself
            while alive(self.pid):
                time.sleep(0.05)
            self.returncode = 3  # the worker's status is lost with its parent (EXIT_INTERNAL)
            self.conn.close()
            return
        self._take(data)

    def _take(self, data: bytes) -> None:
        self._buf += data
        if b"\n" in self._buf:
            word, value = self._buf.split(b"\n", 1)[0].split()
            if word == b"exit":
                self.returncode = int(value)
                self.conn.close()


def spawn(args: list[str], env: dict[str, str], pass_fds: tuple[int, ...], quiet: bool) -> WarmWorker | None:
    """A worker running ``eaglefuzz ARGS`` forked by a matching server, or ``None`` (no server
    is up: the caller starts one from scratch). Its standard streams are this process's (or
    ``/dev/null`` with ``quiet``); ``pass_fds`` keep their numbers in the worker."""
    if not enabled():
        return None
    cwd = os.getcwd()
    try:
        path = socket_path(server_key(env))
    except OSError:
        return None
    if not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    devnull = os.open(os.devnull, os.O_RDWR) if quiet else -1
    try:
        conn.settimeout(_CONNECT_S)
        conn.connect(str(path))
        streams = [0, devnull, devnull] if quiet else [0, 1, 2]
        fds = streams + list(pass_fds)
        body = json.dumps({"argv": args, "env": env, "cwd": cwd, "fds": [0, 1, 2, *pass_fds]}).encode()
        socket.send_fds(conn, [struct.pack("!I", len(body)) + body], fds)
        conn.settimeout(_REPLY_S)
        data = b""
        while b"\n" not in data:
            chunk = conn.recv(64)
            if not chunk:
                raise OSError("the warm server closed the connection")
            data += chunk
        line, rest = data.split(b"\n", 1)
        word, value = line.split()
        if word != b"pid":
            raise OSError(f"the warm server said {line!r}")
        conn.settimeout(None)
        return WarmWorker(conn, int(value), rest)
    except OSError:
        conn.close()
        return None
    finally:
        if devnull >= 0:
            os.close(devnull)


def _up(path: Path) -> bool:
    """Whether a server answers on ``path`` (a server killed outright leaves its socket file)."""
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(_CONNECT_S)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def start_server(wait: float = 0.0) -> None:
    """Leave a server for this process's workers (their environment) in the background, unless
    one is up or warm servers are off; wait up to ``wait`` seconds for it to take work (the
    fault shrinker, which starts many workers, waits; the end of a command does not)."""
    if not enabled():
        return
    env = dict(os.environ)
    try:
        path = socket_path(server_key(env))
        sweep()  # the files of servers killed outright
    except OSError:
        return
    if path.with_suffix(".failed").exists():
        return  # this kind of server could not start here: its reason is in that file
    if not _up(path):
        env.pop("EAGLEFUZZ_WORKER", None)
        try:
            subprocess.Popen([sys.executable, "-m", "eaglefuzz.harness.warm", str(path)], env=env, cwd=os.getcwd(),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True, close_fds=True)
        except OSError:
            return  # no server: workers start from scratch, as without one
    end = time.monotonic() + wait
    while not path.exists() and not path.with_suffix(".failed").exists() and time.monotonic() < end:
        time.sleep(0.05)


# ---- the server ----------------------------------------------------------------------------


def can_fork() -> bool:
    """Whether this process may fork workers: it has imported no Triton (a worker imports it
    itself, after it has chosen its backend; so TorchDynamo, which imports Triton, is out too)
    and initialised no CUDA (a process that has cannot fork safely)."""
    return "triton" not in sys.modules and not ("torch" in sys.modules and sys.modules["torch"].cuda.is_initialized())


def _recv_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    conn.settimeout(_CONNECT_S)
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 16)
    if len(data) < 4:
        raise OSError("short request")
    (n,) = struct.unpack("!I", data[:4])
    body = data[4:]
    while len(body) < n:
        chunk = conn.recv(n - len(body))
        if not chunk:
            raise OSError("short request")
        body += chunk
    return json.loads(body), fds


def _child(request: dict[str, Any], fds: list[int], close: list[int], run: Callable[[list[str]], None]) -> None:
    """In the forked worker: become what ``python -m eaglefuzz.harness.cli ARGV`` would be, and
    ``run`` the command (it leaves the process)."""
    code = 3
    try:
        signal.set_wakeup_fd(-1)
        for fd in close:
            os.close(fd)
        os.setsid()
        for s in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import fcntl

        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 256) for fd in fds]  # out of the way of the targets
        for fd in fds:
            os.close(fd)
        for fd, target in zip(high, request["fds"], strict=True):
            os.dup2(fd, target)  # inheritable, as the worker's pass_fds and streams are
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # found again from the command's TMPDIR, not the server's

        if PARENT_ENV in os.environ:  # the server is this worker's parent; the pipe watches the supervisor
            os.environ[PARENT_ENV] = str(os.getppid())
            os.environ[MODE_ENV] = "pipe"
        os.chdir(request["cwd"])
        if sys.path and sys.path[0] == _SERVER_CWD:  # python -m: the working directory comes first
            sys.path[0] = request["cwd"]

        random.seed()  # a fresh process's state, not the server's
        sys.argv = [sys.argv[0], *request["argv"]]
        run(list(request["argv"]))
    except BaseException:  # noqa: BLE001 - nothing may return into the server's loop

        traceback.print_exc()
    finally:
        os._exit(code)


def _status(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


_SERVER_CWD = os.getcwd()


def serve(path: Path, idle: float, *, preload: Callable[[], None], run: Callable[[list[str]], None]) -> None:
    """Serve workers on ``path`` until ``idle`` seconds pass without any, or a SIGTERM, SIGINT
    or SIGHUP comes (then it takes no more work and leaves once its workers have ended). It
    leaves its folder as it found it: its socket and lock file removed.

    ``preload`` imports, once, what every worker needs (it must not touch CUDA or import
    Triton); each forked worker calls ``run`` with its command's arguments, and ``run`` leaves
    the process (the command line's main: :mod:`..warm` gives both)."""
    lock_path = path.with_suffix(".lock")
    lock = open(lock_path, "a+")  # noqa: SIM115 - held for the server's life
    if not _holds(lock) or not _same_file(lock, lock_path):
        lock.close()
        return  # another server for the same key is starting or up (or a sweep took the file)
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n{installation()}\n")
    lock.flush()
    listener: socket.socket | None = None

    def leave_folder() -> None:
        """Take no more work: the socket, then the lock file (still held), gone."""
        nonlocal listener
        if listener is not None:
            listener.close()
            listener = None
        path.unlink(missing_ok=True)
        if _same_file(lock, lock_path):
            lock_path.unlink(missing_ok=True)

    stopping: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    try:
        try:
            preload()
        except BaseException as exc:  # noqa: BLE001 - a server that cannot start must say why, once
            path.with_suffix(".failed").write_text(f"{type(exc).__name__}: {exc}\n")
            raise
        if stopping:
            return
        path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(64)
        _serve(listener, idle, lock, stopping, leave_folder, _package_stamp(), run)
    finally:
        leave_folder()
        lock.close()


def _serve(listener: socket.socket, idle: float, lock: Any, stopping: list[int], leave: Any, stamp: str,
           run: Callable[[list[str]], None]) -> None:
    """The server's loop (see :func:`serve`); ``stamp``: :func:`_package_stamp` at its start."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    last = checked = time.monotonic()
    serving = True
    while True:
        if stopping and serving:
            leave()
            serving = False
        if not serving and not children:
            break
        timeout = None if children or not serving else idle - (time.monotonic() - last)
        if timeout is not None and timeout <= 0:
            break
        if serving and not children and time.monotonic() >= checked + RETIRE_CHECK_S:
            checked = time.monotonic()
            if _package_stamp() != stamp:  # retired: nothing can match this server any more
                stopping.append(0)
                continue
        if timeout is not None:
            timeout = min(timeout, RETIRE_CHECK_S)
        waited = [listener, wake_r] if serving else [wake_r]
        ready = select.select(waited, [], [], timeout)[0]
        if wake_r in ready:
            os.read(wake_r, 512)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                try:
                    conn.sendall(f"exit {_status(status)}\n".encode())
                except OSError:
                    pass
                conn.close()
            last = time.monotonic()
        if serving and listener in ready and not stopping:
            conn, _ = listener.accept()
            try:
                request, fds = _recv_request(conn)
            except (OSError, ValueError):
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                _child(request, fds, [listener.fileno(), conn.fileno(), wake_r, wake_w, lock.fileno()], run)
            for fd in fds:
                os.close(fd)
            children[pid] = conn
            try:
                conn.sendall(f"pid {pid}\n".encode())
            except OSError:  # the client is gone (and starts a fresh worker): none of this one
                os.kill(pid, signal.SIGKILL)
            last = time.monotonic()
