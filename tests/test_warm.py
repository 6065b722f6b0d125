"""Warm servers (``harness/run/warm_servers.py``): a worker forked from one reports what a fresh worker
reports, and a server serves only the commands whose workers it matches."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eaglefuzz.harness.run import warm_servers as warm

ROOT = Path(__file__).resolve().parent.parent
BUG, TARGET = "ce_masked_includes_bonus", "copy_and_expand_eagle_inputs_kernel"

pytestmark = pytest.mark.kernel


def _fuzz(bug: Path, corpus: Path, env: dict[str, str]) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--kernels", str(bug), "--kernel", TARGET,
         "--examples", "20", "--corpus", str(corpus), "--json"],
        # shrinking to its end, not to a time budget: the two reports must be equal on any machine
        capture_output=True, text=True, env={**env, "EAGLEFUZZ_SHRINK_BUDGET": "600"}, cwd=ROOT, timeout=300,
        check=False)
    return proc.returncode, json.loads(proc.stdout)


def _finding(doc: dict, corpus: Path) -> dict:
    (f,) = doc["targets"][TARGET]["findings"]
    return {"kind": f["kind"], "report": f["report"].replace(str(corpus), "CORPUS"), "file": Path(f["file"]).name}


def test_a_worker_forked_by_a_warm_server_reports_as_a_fresh_one(warm_env, seeded_bugs_dir, tmp_path, monkeypatch):
    bug = seeded_bugs_dir / f"{BUG}.py"
    monkeypatch.chdir(ROOT)
    path = warm.socket_path(warm.server_key(warm_env))
    assert not path.exists()

    cold_code, cold = _fuzz(bug, tmp_path / "cold", warm_env)  # no server yet: a fresh worker; it leaves one
    deadline = time.monotonic() + 120
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert path.exists(), "no warm server came up after a command"

    monkeypatch.setenv("EAGLEFUZZ_WARM", "1")
    served = warm.spawn(["list"], warm_env, (), quiet=True)  # the server takes this command's workers
    assert served is not None and served.wait(timeout=120) == 0
    assert warm.spawn(["list"], {**warm_env, "PYTHONOPTIMIZE": "1"}, (), quiet=True) is None  # not its kind

    warm_code, warmed = _fuzz(bug, tmp_path / "warm", warm_env)
    assert (warm_code, _finding(warmed, tmp_path / "warm")) == (cold_code, _finding(cold, tmp_path / "cold"))
    assert cold_code == 1
    assert warmed["targets"][TARGET]["examples"] == cold["targets"][TARGET]["examples"]

    # `eaglefuzz stop-servers`: the server leaves on SIGTERM, and leaves its folder empty.
    pid = warm.server_pid(path)
    stopped = warm.stop_servers(warm._dir())
    assert stopped.pids == [pid] and not stopped.killed and not stopped.finishing, stopped
    assert not _alive_after(pid, 10), "the server is still running"
    assert sorted(p.name for p in warm._dir().iterdir()) == []


def _alive_after(pid: int, seconds: float) -> bool:
    from eaglefuzz.harness.run.lifeline import alive

    end = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    return alive(pid)


def test_no_server_is_started_or_used_when_they_are_off(warm_env, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("EAGLEFUZZ_WARM", "0")
    warm.start_server(wait=1.0)
    assert not warm._dir().exists() or not list(warm._dir().iterdir())
    assert warm.spawn(["list"], warm_env, (), quiet=True) is None


def _reads_environment(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "os"
               and n.attr in ("environ", "getenv") for n in ast.walk(node))


def test_no_module_reads_the_environment_when_it_is_imported():
    """A warm server imports the harness once; its workers get each command's environment
    after that. A value read from the environment at import time (a module constant, a class
    attribute, a default argument) would be the server's, not the command's."""
    offenders = []
    for folder in ("harness", "kernels", "oracles"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    checked = [*node.args.defaults, *node.args.kw_defaults, *node.decorator_list]
                elif isinstance(node, ast.ClassDef):
                    checked = [n for n in node.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
                elif isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
                    checked = []
                else:
                    checked = [node]
                if any(c is not None and _reads_environment(c) for c in checked):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders


def test_a_worker_that_ends_at_once_still_gets_its_exit_status(warm_env, monkeypatch):
    """The server's ``pid`` and ``exit`` lines can reach the client in one read (a worker that
    ends at once): the client takes both. A stand-in server answers in one write."""
    import socket
    import threading

    monkeypatch.setenv("EAGLEFUZZ_WARM", "1")
    path = warm.socket_path(warm.server_key(warm_env))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(120)  # should the client never come, the stand-in gives up (no hang)

    def serve_once() -> None:
        conn, _ = listener.accept()
        _, fds, _, _ = socket.recv_fds(conn, 1 << 16, 16)
        for fd in fds:
            os.close(fd)
        conn.sendall(b"pid 4242\nexit 2\n")
        conn.close()

    server = threading.Thread(target=serve_once, daemon=True)
    server.start()
    try:
        worker = warm.spawn(["list"], warm_env, (), quiet=True)
        assert worker is not None and worker.pid == 4242
        assert worker.wait(timeout=120) == 2
    finally:
        server.join(timeout=120)
        listener.close()


# -- a server's files: removed when it leaves, stale ones swept (no kernel, no torch to load) --


@pytest.fixture
def folder(monkeypatch):
    """A short private folder for servers (a socket's path has about 104 bytes at most)."""
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="efwt", dir="/tmp"))
    monkeypatch.setenv("EAGLEFUZZ_WARM_DIR", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def in_process(monkeypatch):
    """:func:`warm.serve` run in this process, without its imports (the point is its files);
    the signal handlers it installs are put back afterwards."""
    import signal

    serve = warm.serve
    monkeypatch.setattr(warm, "serve", lambda path, idle: serve(path, idle, preload=lambda: None,
                                                               run=lambda argv: os._exit(0)))
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD)}
    wakeup = signal.set_wakeup_fd(-1)
    yield
    signal.set_wakeup_fd(wakeup)
    for s, handler in saved.items():
        signal.signal(s, handler)


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_server_leaves_its_folder_empty_when_idle(folder, in_process):
    warm.serve(folder / "k.sock", idle=0.2)
    assert _files(folder) == []


def test_a_server_leaves_its_folder_empty_on_sigterm(folder, in_process):
    import signal
    import threading

    seen: list[list[str]] = []

    def stop() -> None:
        seen.append(_files(folder))  # up: its lock file and socket
        os.kill(os.getpid(), signal.SIGTERM)

    timer = threading.Timer(0.5, stop)
    timer.start()
    warm.serve(folder / "k.sock", idle=60)
    timer.join()
    assert seen == [["k.lock", "k.sock"]]
    assert _files(folder) == []


def test_a_server_whose_files_changed_leaves(folder, in_process, monkeypatch):
    """After an edit of eaglefuzz (or a reinstall) no command can match a server's key: it
    leaves at its next check instead of waiting out its idle time."""
    stamps = iter(["as imported", "edited"])
    monkeypatch.setattr(warm, "_package_stamp", lambda: next(stamps, "edited"))
    monkeypatch.setattr(warm, "RETIRE_CHECK_S", 0.05)
    start = time.monotonic()
    warm.serve(folder / "k.sock", idle=60)
    assert time.monotonic() - start < 30
    assert _files(folder) == []


def _stale(folder: Path, key: str) -> None:
    """What a server killed outright leaves: its lock file (held by no one) and its socket
    (nothing listening)."""
    import socket

    (folder / f"{key}.lock").write_text("999999")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(folder / f"{key}.sock"))
    s.close()


def test_stale_files_are_swept_and_a_live_servers_are_not(folder, monkeypatch):
    import fcntl
    import socket

    _stale(folder, "dead")
    live = open(folder / "live.lock", "a+")  # a live server holds its lock
    fcntl.flock(live, fcntl.LOCK_EX | fcntl.LOCK_NB)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / "live.sock"))
    listener.listen(1)
    try:
        assert warm.sweep(folder) == 2
        assert _files(folder) == ["live.lock", "live.sock"]
    finally:
        listener.close()
        live.close()
    # The next command that would start a server sweeps first (here it cannot start one).
    _stale(folder, "dead")
    monkeypatch.setenv("EAGLEFUZZ_WARM", "1")

    def no_server(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise OSError("not here")

    monkeypatch.setattr(warm.subprocess, "Popen", no_server)
    warm.start_server()
    assert "dead.lock" not in _files(folder) and "dead.sock" not in _files(folder)


def _live_server(folder: Path, key: str, install: str | None) -> subprocess.Popen:
    """A process standing for a server of ``install`` (None: one that did not record it): its
    lock file held (flock) by it, with its pid and installation, as serve() writes them."""
    lines = "" if install is None else f"\n{install}"
    code = ("import fcntl, os, signal, sys, time\n"
            f"f = open({str(folder / (key + '.lock'))!r}, 'a+'); fcntl.flock(f, fcntl.LOCK_EX)\n"
            f"f.truncate(0); f.write(str(os.getpid()) + {lines!r}); f.flush()\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
            "print('up', flush=True)\n"
            "while True: time.sleep(0.05)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "up"
    return proc


def test_stop_servers_stops_this_installations_servers_unless_asked_for_all(folder, capsys):
    """`eaglefuzz stop-servers` stopped every server of the user, another environment's running
    job's included: it stops this installation's, says how many others it left, and --all
    stops them too."""
    from eaglefuzz.harness import cli

    other = json.dumps(["/elsewhere/venv/bin/python", "/elsewhere/site-packages/eaglefuzz"])
    procs = {"mine": _live_server(folder, "mine", warm.installation()), "other": _live_server(folder, "other", other),
             "older": _live_server(folder, "older", None)}
    try:
        with pytest.raises(SystemExit) as exc:
            cli.main(["stop-servers"])
        out = capsys.readouterr().out
        assert exc.value.code == 0
        assert procs["mine"].wait(timeout=120) == 0
        assert procs["other"].poll() is None and procs["older"].poll() is None, "another installation's stopped"
        assert out.startswith("stopped 1 warm server(s) of this installation") and \
            "left 2 server(s) of other eaglefuzz installations running" in out and "--all" in out, out
        with pytest.raises(SystemExit):
            cli.main(["stop-servers", "--all"])
        assert "stopped 2 warm server(s) (" in capsys.readouterr().out
        assert procs["other"].wait(timeout=120) == 0 and procs["older"].wait(timeout=120) == 0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def test_help_says_how_to_stop_the_servers(capsys, folder):
    from eaglefuzz.harness import cli

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Warm servers" in out and "eaglefuzz stop-servers" in out and "EAGLEFUZZ_WARM=0" in out
    _stale(folder, "dead")
    with pytest.raises(SystemExit) as exc:
        cli.main(["stop-servers"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"stopped 0 warm server(s) of this installation in {folder}") and "removed 2 stale file(s)" in out, out
    assert _files(folder) == []
    assert "eaglefuzz stop-servers" in (ROOT / "README.md").read_text()
