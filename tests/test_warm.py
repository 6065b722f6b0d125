"""Warm servers (``harness/warm.py``): a worker forked from one reports what a fresh worker
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

from eaglefuzz.harness import warm

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
    listener.settimeout(30)  # should the client never come, the stand-in gives up (no hang)

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
        assert worker.wait(timeout=10) == 2
    finally:
        server.join(timeout=10)
        listener.close()
