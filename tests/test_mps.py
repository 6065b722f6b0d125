"""``eaglefuzz fuzz --lanes N --mps``: the lanes of a GPU as clients of an MPS daemon of the
campaign's own (harness/core/mps.py). On this CPU machine a script stands in for
``nvidia-cuda-mps-control``; what MPS does on a GPU is measured in benchmarks/RESULTS.md."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from eaglefuzz.harness import cli
from eaglefuzz.harness.core import mps
from eaglefuzz.harness.core.errors import UserError
from eaglefuzz.harness.run import multi, supervisor
from eaglefuzz.harness.run.cuda_devices import FAKE_ENV
from eaglefuzz.harness.run.shards import ShardRun, child_args

CONTROL = """#!/bin/sh
# stands in for nvidia-cuda-mps-control: its arguments, standard input and pipe folder to the log
echo "args=$* pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY input=$(if [ $# -eq 0 ]; then cat; fi)" >> {log}
[ -d "$CUDA_MPS_PIPE_DIRECTORY" ] || exit 3
exit {code}
"""


CLIENT_PROBE = "import os, sys\nsys.exit(0 if os.path.isdir(os.environ.get('CUDA_MPS_PIPE_DIRECTORY', '')) else 1)\n"
"""Stands in for :data:`~eaglefuzz.harness.core.mps.CUDA_PROBE`: passes where it is the daemon's client."""


def _control(tmp_path: Path, code: int = 0) -> tuple[Path, Path]:
    """A fake control program on a PATH of its own, and the log it writes."""
    bin_dir, log = tmp_path / "bin", tmp_path / "control.log"
    bin_dir.mkdir()
    exe = bin_dir / mps.CONTROL
    exe.write_text(CONTROL.format(log=log, code=code))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return bin_dir, log


def test_alone_drops_the_daemon_and_keeps_the_rest():
    env = {mps.ENV[0]: "/p", mps.ENV[1]: "/l", "CUDA_VISIBLE_DEVICES": "0", "X": "1"}
    assert mps.under_mps(env) and not mps.under_mps({"X": "1"})
    assert mps.alone(env) == {"CUDA_VISIBLE_DEVICES": "0", "X": "1"}


def test_a_private_daemon_starts_in_its_own_folders_and_quits(tmp_path, monkeypatch):
    bin_dir, log = _control(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with mps.private_mps() as env:
        assert sorted(env) == sorted(mps.ENV)
        pipe = Path(env[mps.ENV[0]])
        assert pipe.is_dir() and Path(env[mps.ENV[1]]).is_dir() and pipe.parent.name.startswith("eaglefuzz-mps-")
        started = log.read_text().splitlines()
        assert started == [f"args=-d pipe={pipe} log={env[mps.ENV[1]]} input="]
    assert log.read_text().splitlines()[1:] == [f"args= pipe={pipe} log={env[mps.ENV[1]]} input=quit"]
    assert not pipe.exists()


def test_a_daemon_whose_client_cannot_start_stops_before_any_lane(tmp_path, monkeypatch):
    bin_dir, log = _control(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with mps.private_mps(probe=[sys.executable, "-c", CLIENT_PROBE]) as env:
        assert mps.under_mps(env)
    failing = [sys.executable, "-c", "import sys; sys.exit('RuntimeError: CUDA error: MPS client failed to connect')"]
    with pytest.raises(UserError, match="a CUDA process could not start as a client of .*: RuntimeError: CUDA error: MPS"):
        with mps.private_mps(probe=failing):
            pytest.fail("the campaign must not start")
    assert log.read_text().count("input=quit") == 2  # the daemon quit after the failed probe too


def test_a_daemon_that_does_not_start_or_is_missing_is_one_line(tmp_path, monkeypatch):
    bin_dir, _ = _control(tmp_path, code=1)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(UserError, match=f"--mps: {mps.CONTROL} -d exited with 1"), mps.private_mps():
        pass
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match=f"--mps: {mps.CONTROL} is not on PATH"), mps.private_mps():
        pass


@pytest.mark.parametrize(
    ("args", "path", "words"),
    [
        (["fuzz", "--mps"], None, "--mps: only with --lanes N, N of 2 or more (--lanes 1"),
        (["fuzz", "--lanes", "2", "--mps"], "empty", f"--mps: {mps.CONTROL} is not on PATH"),
    ],
)
def test_usage_errors_of_mps(capsys, monkeypatch, tmp_path, args, path, words):
    monkeypatch.setenv(FAKE_ENV, "1")
    if path:
        monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit) as exc:
        cli.main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and words in err, err


def test_the_lanes_get_the_daemon_and_the_shards_do_not_get_the_flag(tmp_path, monkeypatch):
    bin_dir, log = _control(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv(FAKE_ENV, "1")
    seen = []

    def fake(argv, shards, devices, corpus, lanes=1, env=None):  # noqa: ANN001, ANN202
        seen.append(dict(env))
        assert log.read_text().count("args=-d") == 1  # the daemon runs while the lanes do
        return [ShardRun(s, "x", 0, None, []) for s in shards]

    monkeypatch.setattr(multi, "run_on_devices", fake)
    monkeypatch.setattr(multi, "CUDA_PROBE", CLIENT_PROBE)
    common = {"ray_address": None, "shards": None, "corpus": tmp_path, "backend": "auto", "as_json": True,
              "devices": None, "lanes": 2, "shard": (0, 1)}
    multi.fuzz_in_shards(["fuzz"], mps=True, **common)
    multi.fuzz_in_shards(["fuzz"], **common)
    assert sorted(seen[0]) == sorted(mps.ENV) and seen[1] == {}
    assert log.read_text().count("input=quit") == 1
    assert "--mps" not in child_args(["fuzz", "--lanes", "2", "--mps", "--seed", "3"], "1/2", tmp_path)


def test_a_worker_alone_is_no_client_of_the_daemon(tmp_path, monkeypatch):
    """The workers that locate, confirm and shrink a fault run outside MPS; a campaign's own
    worker keeps the lanes' daemon."""
    monkeypatch.setenv(mps.ENV[0], str(tmp_path / "pipe"))
    monkeypatch.setenv(mps.ENV[1], str(tmp_path / "log"))
    envs = []

    def spawn(args, env, pass_fds, quiet):  # noqa: ANN001, ANN202
        envs.append(env)
        return SimpleNamespace(wait=lambda timeout=None: 0, poll=lambda: 0, pid=os.getpid())

    monkeypatch.setattr(supervisor.warm, "spawn", spawn)
    supervisor.run_worker(["x"], tmp_path / "j", supervisor.Signals(), alone=True)
    supervisor.run_worker(["x"], tmp_path / "j", supervisor.Signals())
    assert not mps.under_mps(envs[0]) and envs[0][supervisor.WORKER_ENV] == "1"
    assert envs[1][mps.ENV[0]] == str(tmp_path / "pipe")


class _Log:
    """A run log of one unit (``unit``), done once :meth:`add` is called."""

    def __init__(self) -> None:
        self.added: list[str] = []

    def remaining(self) -> list[str]:
        return [] if self.added else ["unit"]

    def meta(self) -> dict:
        return {"command": "fuzz", "backend": "interpreter"}

    def current(self) -> str:
        return "unit"

    def add(self, unit: str, record: dict) -> None:
        self.added.append(unit)


def _supervision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 outside: Callable[..., int] | None = None) -> supervisor._Supervision:
    """A supervised run of one unit (:class:`_Log`) whose merged report is 99, which may report
    no finding (``_fault``) and, unless ``outside`` stands in for it, none outside any case."""
    sup = supervisor._Supervision(["fuzz"], source=SimpleNamespace(origin=lambda k: SimpleNamespace(spec="bundled")),
                                  corpus_dir=tmp_path, as_json=True, save=True, backend="interpreter",
                                  signals=supervisor.Signals(), journal_dir=tmp_path)
    sup.log = _Log()
    monkeypatch.setattr(sup, "_fault", lambda *a: pytest.fail("no finding"))
    monkeypatch.setattr(sup, "_outside_any_case", outside or (lambda *a: pytest.fail("no finding outside any case")))
    monkeypatch.setattr(sup, "_report", lambda: 99)
    return sup


@pytest.mark.parametrize(("under", "alone_faults"), [(True, False), (True, True), (False, False)])
def test_a_crash_under_mps_is_a_finding_only_where_its_case_faults_alone(tmp_path, monkeypatch, under, alone_faults):
    """One lane's CUDA fault ends every lane's context under MPS: a lane's crash whose cases in
    flight do not fault alone (in a process outside MPS) is another lane's, and its unit runs
    again in a new worker; one whose case faults alone is a crash finding of that case; without
    MPS a crash is a finding as it always was (no extra run)."""
    from eaglefuzz.harness.run import journal

    for k in mps.ENV:
        if under:
            monkeypatch.setenv(k, str(tmp_path / k))
        else:
            monkeypatch.delenv(k, raising=False)
    case, other = SimpleNamespace(kernel="k"), SimpleNamespace(kernel="k", n=2)
    codes = iter([70, 0, 0])
    workers, located, faults = [], [], []

    def run_worker(args, jdir, signals, env=None, **kw):  # noqa: ANN001, ANN202
        workers.append(env)
        return supervisor.Ended(next(codes))

    def orphans(jdir):  # noqa: ANN001, ANN202
        return [SimpleNamespace(case=case, message="the device became unusable", suspects=(case, other), error="",
                                remove=lambda: None)] if len(workers) == 1 else []

    def locate_fault(suspects, message, **kw):  # noqa: ANN001, ANN202
        located.append(suspects)
        return (other, "faults alone", True) if alone_faults else (suspects[0], "none faults alone", False)

    monkeypatch.setattr(supervisor, "run_worker", run_worker)
    monkeypatch.setattr(journal, "orphans", orphans)
    monkeypatch.setattr(supervisor, "locate_fault", locate_fault)
    sup = _supervision(tmp_path, monkeypatch)
    monkeypatch.setattr(sup, "_fault", lambda kind, c, m, s=None: (faults.append((kind, c, m, s)), sup.log.add("unit", {})))
    assert sup.run() == 99  # the merged report: a second worker ran
    assert located == ([[case, other]] if under else [])
    if under and not alone_faults:
        assert faults == [] and workers == [None, {supervisor.REPORT_ENV: "0"}]
    elif under:
        assert faults == [("crash", other, "faults alone", [])]
    else:
        assert faults == [("crash", case, "the device became unusable", [case, other])]


def test_the_benchmark_without_the_daemon_is_one_usage_error(tmp_path):
    """benchmarks/device_throughput.py --mps where no control program is: exit 2, saying so."""
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "device_throughput.py"), "--mps", "--lanes", "2",
                           "--backend", "interpreter", "--kernel", "expand_kernel"],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PATH": str(tmp_path), "TRITON_INTERPRET": "1"})
    assert proc.returncode == 2 and f"--mps: {mps.CONTROL} is not on PATH" in proc.stderr, proc.stderr


def test_locating_and_shrinking_a_fault_run_alone(tmp_path, monkeypatch):
    """The workers that find which case faulted, and shrink it, are no clients of the daemon."""
    import numpy as np

    from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE
    from eaglefuzz.harness.targets import TARGETS

    seen = []

    def run_worker(args, jdir, signals, **kw):  # noqa: ANN001, ANN202
        seen.append((args[0], kw.get("alone")))
        return supervisor.Ended(0)

    monkeypatch.setattr(supervisor, "run_worker", run_worker)
    monkeypatch.setattr(supervisor.warm, "start_server", lambda wait=0.0: None)
    case = TARGETS["eagle_prepare_inputs_padded_kernel"].random_case(np.random.default_rng(0), INTERPRETER_SCALE)
    supervisor.locate_fault([case, case], "m", spec="bundled", backend="interpreter", signals=supervisor.Signals())
    supervisor.shrink_fault(case, "crash", "m", spec="bundled", backend="interpreter", signals=supervisor.Signals(),
                            budget_s=60)
    assert seen == [("_locate-fault", True), ("_shrink-fault", True)]


def test_a_scale_lane_and_a_redraw_run_outside_the_daemon(tmp_path, monkeypatch):
    """A production-scale case (which may fault, the int32 wrap) and a faulted batch's cases drawn
    again make CUDA contexts of their own: a fault there ends no lane, and a daemon that refuses
    clients after a fault does not refuse them."""
    from eaglefuzz.harness.checking.device_mode import engine, scale_lane

    monkeypatch.setenv(mps.ENV[0], str(tmp_path / "pipe"))
    envs = []

    def started(*a, env=None, **kw):  # noqa: ANN002, ANN003, ANN202
        envs.append(env)
        raise RuntimeError("stop here")

    monkeypatch.setattr(scale_lane.subprocess, "Popen", started)
    monkeypatch.setattr(engine.subprocess, "run", started)
    with pytest.raises(RuntimeError, match="stop here"):
        scale_lane.ScaleLane("expand_kernel", "bundled", "cuda", 0)._start()
    with pytest.raises(RuntimeError, match="stop here"):
        engine.redrawn("expand_kernel", 0, 0, 4, "cuda", None, 1)
    assert len(envs) == 2 and not any(mps.under_mps(e) for e in envs) and all("PATH" in e for e in envs)


def test_a_new_worker_refused_after_another_lanes_fault_is_started_again(tmp_path, monkeypatch):
    """After a fault the daemon refuses clients until every old one is gone: a lane's new
    worker that ends outside any case after one is started again (never a crash finding outside any case)."""
    from eaglefuzz.harness.run import journal

    monkeypatch.setenv(mps.ENV[0], str(tmp_path / "pipe"))
    monkeypatch.setattr(supervisor, "MPS_WAIT_S", 0.0)
    case = SimpleNamespace(kernel="k")
    codes, workers = iter([70, 70, 0]), []
    monkeypatch.setattr(supervisor, "run_worker", lambda *a, env=None, **kw: (workers.append(env), supervisor.Ended(next(codes)))[1])
    monkeypatch.setattr(journal, "orphans", lambda jdir: [SimpleNamespace(
        case=case, message="m", suspects=(), error="", remove=lambda: None)] if len(workers) == 1 else [])
    monkeypatch.setattr(supervisor, "locate_fault", lambda suspects, message, **kw: (case, "none", False))
    sup = _supervision(tmp_path, monkeypatch)
    assert sup.run() == 99 and len(workers) == 3


CUDA_FAULT = "CUDA error: an illegal memory access was encountered"


def test_a_cuda_error_is_a_shared_fault_only_under_the_daemon(tmp_path):
    under = {mps.ENV[0]: str(tmp_path / "pipe"), mps.ENV[1]: str(tmp_path / "log")}
    assert mps.shared_fault(RuntimeError(CUDA_FAULT), under)
    assert mps.shared_fault(RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered"), under)
    assert not mps.shared_fault(RuntimeError(CUDA_FAULT), {})
    assert not mps.shared_fault(ValueError("a bug of the harness"), under)


@pytest.mark.parametrize("under", [True, False])
def test_a_cuda_error_outside_any_launch_under_mps_is_a_lost_device_not_an_internal_error(under, tmp_path, monkeypatch,
                                                                                          capsys):
    """Under MPS a lane's draw or oracle meets another lane's fault: the worker says so in one
    line and exits as a lost device (the supervisor starts it again); without MPS the same
    error is the harness's own (an internal error, its traceback)."""
    from eaglefuzz.harness.core.exitcodes import EXIT_DEVICE_LOST, EXIT_INTERNAL

    for k in mps.ENV:
        if under:
            monkeypatch.setenv(k, str(tmp_path / k))
        else:
            monkeypatch.delenv(k, raising=False)

    def fails(**kw):  # noqa: ANN003, ANN202
        raise RuntimeError(CUDA_FAULT)

    monkeypatch.setattr(cli.cli, "main", fails)
    with pytest.raises(SystemExit) as exited:
        cli._main(["fuzz"])
    err = capsys.readouterr().err
    if under:
        assert exited.value.code == EXIT_DEVICE_LOST
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "under --mps" in err
    else:
        assert exited.value.code == EXIT_INTERNAL and "Traceback" in err and "internal error" in err


@pytest.mark.parametrize("under", [True, False])
def test_a_worker_that_lost_the_device_outside_any_case_under_mps_is_started_again(under, tmp_path, monkeypatch):
    """A lane's first worker that lost its device outside any case (exit 70, no case in its
    journal) under MPS ran into another lane's fault: a new worker runs the unit (no finding);
    without MPS it is reported as a process that ended outside any case."""
    from eaglefuzz.harness.run import journal

    for k in mps.ENV:
        if under:
            monkeypatch.setenv(k, str(tmp_path / k))
        else:
            monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(supervisor, "MPS_WAIT_S", 0.0)
    codes, workers, outside = iter([70, 0]), [], []
    monkeypatch.setattr(supervisor, "run_worker", lambda *a, env=None, **kw: (workers.append(env), supervisor.Ended(next(codes)))[1])
    monkeypatch.setattr(journal, "orphans", lambda jdir: [])
    sup = _supervision(tmp_path, monkeypatch, outside=lambda *a: (outside.append(a), 1)[1])
    if under:
        assert sup.run() == 99 and workers == [None, {supervisor.REPORT_ENV: "0"}] and not outside
    else:
        assert sup.run() == 1 and len(workers) == 1 and outside[0][1] == 70


def test_a_lane_that_keeps_meeting_faults_not_of_its_own_leaves_the_daemon(tmp_path, monkeypatch):
    """After MPS_PASSES faults that no case of the lane makes alone (here: its device lost outside
    any case, every time), the lane's next workers run outside the daemon (time-sliced, a CUDA
    context of their own), and the run ends without a finding."""
    from eaglefuzz.harness.run import journal

    monkeypatch.setenv(mps.ENV[0], str(tmp_path / "pipe"))
    monkeypatch.setattr(supervisor, "MPS_WAIT_S", 0.0)
    codes = iter([70] * supervisor.MPS_PASSES + [0])
    alone = []

    def run_worker(*a, env=None, **kw):  # noqa: ANN002, ANN003, ANN202
        alone.append(kw.get("alone", False))
        return supervisor.Ended(next(codes))

    monkeypatch.setattr(supervisor, "run_worker", run_worker)
    monkeypatch.setattr(journal, "orphans", lambda jdir: [])
    sup = _supervision(tmp_path, monkeypatch)
    assert sup.run() == 99
    assert alone == [False] * supervisor.MPS_PASSES + [True]
