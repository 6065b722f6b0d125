"""Faults never give a wrong verdict nor leave an orphan: hangs, cost bombs, signals, kill -9.

- A kernel that never returns is a *hang* finding (saved with its case), and the campaign goes
  on with the next target.
- A case that ran past its time limit once (a stalled machine) but finishes when run again
  alone is no finding: its unit runs again and the run passes.
- A corpus case that would cost too much (``"grid_size": 1000000000``) is refused when it is
  loaded: one line, exit code 2, nothing runs.
- SIGTERM to the process group (``timeout``, a CI runner) interrupts a replay: "interrupted",
  exit code 143, no finding against the code under test.
- ``kill -9`` of ``eaglefuzz fuzz`` takes its worker with it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eaglefuzz.harness.checking.corpus import load_case, load_entry
from eaglefuzz.harness.core.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
PI = "eagle_prepare_inputs_padded_kernel"
EXT = "extend_all_queries_by_N"  # a fast target, taken from the bundled copy
CASE = ROOT / "corpus" / PI / "1d457694a3c0.json"
PROC = Path("/proc/self/task").is_dir()

# A port-style kernel (anything indexable as kernel[grid](...) is a kernel) that never returns.
HANGING_KERNEL = '''
import time


class _Hang:
    __name__ = "eagle_prepare_inputs_padded_kernel"

    def __getitem__(self, grid):
        return self._run

    @staticmethod
    def _run(cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc,
             token_indices_to_sample, num_rejected_tokens, num_reqs):
        while True:
            time.sleep(0.05)


eagle_prepare_inputs_padded_kernel = _Hang()
'''


# The production kernel, but its first launch on this machine stalls (a marker file says which
# launch was the first): what a loaded CI runner does to a case now and then.
STALLING_ONCE_KERNEL = '''
import os
import time

from eaglefuzz.kernels.spec_decode_utils import eagle_prepare_inputs_padded_kernel as _production

MARK = {mark!r}


class _StallOnce:
    __name__ = "eagle_prepare_inputs_padded_kernel"

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            try:
                os.close(os.open(MARK, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return _production[grid](*args, **kwargs)
            time.sleep(600)

        return run


eagle_prepare_inputs_padded_kernel = _StallOnce()
'''


# The production kernel, but every launch stalls except in a recheck's worker (its journal lies in a
# folder named for it): a case that a loaded machine always slows in the run, never alone.
STALLING_IN_THE_RUN_KERNEL = '''
import os
import time

from eaglefuzz.kernels.spec_decode_utils import eagle_prepare_inputs_padded_kernel as _production


class _StallInTheRun:
    __name__ = "eagle_prepare_inputs_padded_kernel"

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            if "eaglefuzz-recheck-" in os.environ.get("EAGLEFUZZ_JOURNAL", ""):
                return _production[grid](*args, **kwargs)
            time.sleep(600)

        return run


eagle_prepare_inputs_padded_kernel = _StallInTheRun()
'''


def _cli(*args: object) -> list[str]:
    return [sys.executable, "-m", "eaglefuzz.harness.cli", *(str(a) for a in args)]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    tmp = tmp_path / "tmp"  # the supervisor's journal folder lands here (tempfile honours TMPDIR)
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EAGLEFUZZ_CACHE": str(tmp_path / "cache"), "TMPDIR": str(tmp)}
    env.pop("EAGLEFUZZ_LIMITS", None)
    return {**env, **extra}


def _run(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``args`` in a process group of its own; on a timeout, kill the whole group (a worker
    left behind must not outlive the test)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie not yet reaped by its new parent counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def _wait_for(what: str, probe, limit_s: float = 240.0):  # noqa: ANN001, ANN202 - a local helper
    """Poll ``probe()`` until it returns something truthy (a generous bound: CI machines are slow)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        got = probe()
        if got:
            return got
        time.sleep(0.1)
    pytest.fail(f"gave up waiting for {what}")


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _end(pids: list[int]) -> None:
    """Clean-up after a failure: end the processes this test started that are still running."""
    for pid in pids:
        if not _gone(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.kernel
def test_a_hanging_kernel_is_a_hang_finding_and_the_campaign_goes_on(tmp_path):
    kernels = tmp_path / "hang.py"
    kernels.write_text(HANGING_KERNEL)
    corpus = tmp_path / "findings"
    proc = _run(_cli("fuzz", "--kernels", kernels, "--kernel", PI, "--kernel", EXT, "--examples", 3,
                     "--domain", "production", "--case-timeout", 1, "--corpus", corpus, "--json"),
                _env(tmp_path, EAGLEFUZZ_FAULT_SHRINK_BUDGET="2"), timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    (hang,) = doc["targets"][PI]["findings"]
    assert hang["kind"] == "hang"
    assert f"{PI} did not finish: it ran past its time limit of 1 s" in hang["report"]
    assert "failed to run" not in hang["report"]
    # checked again alone before it became a finding, where it hung again (no second run of the unit)
    assert f"{PI}: a case ran past its time limit of 1 s; running it again alone" in proc.stderr
    assert f"{PI}: alone it finished within its limit" not in proc.stderr
    entry = load_entry(hang["file"])  # saved with its case, and the report
    assert entry.case.kernel == PI and Path(hang["file"]).is_relative_to(corpus)
    assert "did not finish" in entry.finding["report"]
    # ... and the campaign went on with the next target, in a new worker.
    assert doc["targets"][EXT]["examples"] == 3
    assert doc["targets"][EXT]["findings"] == []
    assert "Traceback" not in proc.stderr


@pytest.mark.kernel
def test_a_case_that_stalled_once_but_finishes_alone_is_no_finding(tmp_path):
    """The stalled case is checked again alone in a fresh process; it finishes there, so the
    unit runs again from its start and passes: exit 0, no finding saved, and two lines say why."""
    mark = tmp_path / "stalled"
    kernels = tmp_path / "stall_once.py"
    kernels.write_text(STALLING_ONCE_KERNEL.format(mark=str(mark)))
    corpus = tmp_path / "findings"
    proc = _run(_cli("fuzz", "--kernels", kernels, "--kernel", PI, "--examples", 5, "--domain", "production",
                     "--case-timeout", 10, "--corpus", corpus, "--json"), _env(tmp_path), timeout=300)
    assert mark.exists()  # the stall happened
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["targets"][PI]["findings"] == [] and doc["targets"][PI]["examples"] == 5
    assert not corpus.exists() or not any(corpus.rglob("*.json"))
    assert f"{PI}: a case ran past its time limit of 10 s; running it again alone, in a fresh process" in proc.stderr
    assert f"{PI}: alone it finished within its limit: the machine was slow, the case does not hang (no finding); " \
        f"running {PI} again from its start" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.kernel
def test_a_unit_slowed_past_its_limit_a_third_time_is_a_hang_finding(tmp_path):
    """The rechecks are bounded: a case that runs past its limit in the run every time but
    finishes alone is put down to the machine twice (its target runs again each time), and the
    third time it is a hang finding, without a recheck; the run ends."""
    kernels = tmp_path / "stall_in_run.py"
    kernels.write_text(STALLING_IN_THE_RUN_KERNEL)
    proc = _run(_cli("fuzz", "--kernels", kernels, "--kernel", PI, "--examples", 3, "--domain", "production",
                     "--case-timeout", 5, "--corpus", tmp_path / "findings", "--json"),
                _env(tmp_path, EAGLEFUZZ_FAULT_SHRINK_BUDGET="1"), timeout=400)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    (hang,) = json.loads(proc.stdout)["targets"][PI]["findings"]
    assert hang["kind"] == "hang" and "ran past its time limit of 5 s" in hang["report"]
    assert proc.stderr.count(f"{PI}: a case ran past its time limit of 5 s; running it again alone") == 2
    assert proc.stderr.count(f"{PI}: alone it finished within its limit") == 2
    assert f"{PI}: a case ran past its time limit again, after 2 put down to a slow machine: a hang finding" in proc.stderr
    assert "Traceback" not in proc.stderr


def _grid_bomb(tmp_path: Path) -> Path:
    doc = json.loads(CASE.read_text())
    doc["launch"]["grid_size"] = 1_000_000_000
    doc["schema"], doc["tier"] = 2, "extended"  # a padded grid is outside vLLM's (§2.2): the cost check must still refuse it
    bomb = tmp_path / "bomb.json"
    bomb.write_text(json.dumps(doc))
    return bomb


@pytest.mark.kernel
def test_a_grid_bomb_is_refused_before_anything_runs(tmp_path):
    bomb = _grid_bomb(tmp_path)
    proc = _run(_cli("replay", bomb), _env(tmp_path), timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"eaglefuzz: error: {bomb}: launch.grid_size: a launch of 1000000000 programs")
    assert "exceeds the limit of 16777216" in line and "--limits grid=N" in line
    assert proc.stdout == ""


def test_cost_limits_are_checked_on_load_and_can_be_raised(tmp_path, monkeypatch):
    from eaglefuzz.harness.checking.costs import LimitExceeded, check_cost

    monkeypatch.delenv("EAGLEFUZZ_LIMITS", raising=False)
    bomb = _grid_bomb(tmp_path)
    with pytest.raises(UserError, match=r"launch\.grid_size: .* exceeds the limit of 16777216 \(grid;"):
        load_case(bomb)
    monkeypatch.setenv("EAGLEFUZZ_LIMITS", "grid=2000000000")
    case = load_case(bomb)  # raised: it loads
    with pytest.raises(LimitExceeded, match="interpreter_programs"):  # still too big for the interpreter
        check_cost(case, interpreter=True)
    monkeypatch.setenv("EAGLEFUZZ_LIMITS", "array_elements=4")
    with pytest.raises(UserError, match=r"arrays\.\w+\.shape: an array of [56] elements exceeds the limit of 4"):
        load_case(CASE)
    monkeypatch.setenv("EAGLEFUZZ_LIMITS", "file_bytes=10")
    with pytest.raises(UserError, match=r"\(file\): a file of \d+ bytes exceeds the limit of 10 \(file_bytes;"):
        load_case(CASE)
    monkeypatch.setenv("EAGLEFUZZ_LIMITS", "grid=lots")
    with pytest.raises(UserError, match="EAGLEFUZZ_LIMITS: grid: 'lots' is not an integer"):
        load_case(CASE)


def test_the_time_limit_grows_with_the_case_and_the_option_sets_it(monkeypatch):
    from eaglefuzz.harness.checking.costs import time_limit

    monkeypatch.delenv("EAGLEFUZZ_LIMITS", raising=False)
    case = load_case(CASE)
    big = case.replace(launch={"grid_size": 4096})
    assert time_limit(big, compiled=False) > time_limit(case, compiled=False) >= 30
    assert time_limit(big, compiled=True) < time_limit(big, compiled=False)
    monkeypatch.setenv("EAGLEFUZZ_LIMITS", "case_timeout=2")
    assert time_limit(big, compiled=False) == 2


@pytest.mark.kernel
def test_sigterm_during_replay_is_an_interruption_not_a_finding(tmp_path):
    kernels = tmp_path / "hang.py"
    kernels.write_text(HANGING_KERNEL)  # the case runs until the signal comes (its limit: 30 s and more)
    proc = subprocess.Popen(_cli("replay", CASE, "--kernels", kernels), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path), start_new_session=True)
    pids = [proc.pid]
    try:
        journal = _wait_for("the case in flight", lambda: sorted((tmp_path / "tmp").glob("eaglefuzz-journal-*/main-*.json")))
        pids.append(int(journal[0].stem.rsplit("-", 1)[1]))  # the worker's
        os.killpg(proc.pid, signal.SIGTERM)  # as `timeout` and CI runners do: the whole process group
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        _end(pids)
    said = f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"
    assert proc.returncode == 143, said
    assert "interrupted" in err and "interrupted: 1 file(s) not replayed" in out, said
    assert "FAIL" not in out and "failed to run" not in out and "finding" not in out + err, said
    assert "0 passed, 0 failed" in out, said
    assert _gone(pids[1]), said


@pytest.mark.kernel
@pytest.mark.skipif(not PROC, reason="finds the worker through /proc")
def test_kill_9_of_the_parent_takes_its_worker_with_it(tmp_path):
    # A worker of its own (no warm server): the worker is found as the supervisor's child. A
    # worker forked by a warm server watches the same lifeline pipe (harness/run/warm_servers.py).
    proc = subprocess.Popen(
        _cli("fuzz", "--kernel", EXT, "--examples", 1_000_000, "--corpus", tmp_path / "findings"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(tmp_path, EAGLEFUZZ_WARM="0"),
    )
    pids = [proc.pid]
    try:
        (worker,) = _wait_for("the worker", lambda: _children(proc.pid))
        pids.append(worker)
        _wait_for("the worker at work", lambda: list((tmp_path / "tmp").glob("eaglefuzz-journal-*/*")))
        proc.kill()
        proc.wait()
        _wait_for(f"worker {worker} to end with its parent", lambda: _gone(worker), limit_s=120)
    finally:
        _end(pids)


_PARENT = """
import subprocess, sys, time
from eaglefuzz.harness.run.lifeline import lifeline

line = lifeline()
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env={**__import__("os").environ, **line.env},
                         pass_fds=line.pass_fds)
line.spawned()
print(child.pid, flush=True)
time.sleep(600)
"""
_CHILD = "from eaglefuzz.harness.run.lifeline import arm; arm(); import time; print('armed', flush=True); time.sleep(600)"


@pytest.mark.skipif(not PROC, reason="watches the child through /proc")
@pytest.mark.parametrize("mode", ["", "pipe"], ids=["prctl-and-pipe", "pipe-alone (macOS)"])
def test_a_worker_dies_with_its_parent(tmp_path, mode):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EAGLEFUZZ_LIFELINE": mode}
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, _CHILD], stdout=subprocess.PIPE, text=True, env=env)
    pids = [parent.pid]
    try:
        child = int(parent.stdout.readline())
        pids.append(child)
        assert parent.stdout.readline().strip() == "armed"
        parent.kill()
        parent.wait()
        _wait_for(f"child {child} to end with its parent", lambda: _gone(child), limit_s=120)
    finally:
        _end(pids)


@pytest.mark.kernel
def test_a_signal_that_lands_in_a_gc_callback_still_interrupts_the_run(monkeypatch):
    """Hypothesis keeps a garbage-collector callback; a signal whose handler runs inside it
    raised KeyboardInterrupt there, which Python drops ("Exception ignored in: gc_callback",
    pytest's PytestUnraisableExceptionWarning), and the run went on. It stops at its next case."""
    import gc
    import sys
    import threading

    from eaglefuzz.harness.checking.check import check_case
    from eaglefuzz.harness.core import interrupts
    from eaglefuzz.harness.sources import implementations_for, parse_source

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers run in the main thread only")
    dropped: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", dropped.append)
    impls = implementations_for(parse_source("bundled"), [PI])
    fired: list[int] = []

    def gc_callback(phase: str, info: dict) -> None:  # the signal arrives while a collection runs
        if phase == "start" and not fired:
            fired.append(1)
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # Python runs the handler here, inside the callback
                pass

    gc.callbacks.append(gc_callback)
    try:
        with pytest.raises(KeyboardInterrupt), interrupts.interruptible():
            gc.collect()
            check_case(load_case(CASE), impls, "cpu")
    finally:
        gc.callbacks.remove(gc_callback)
    assert fired and interrupts.received() == signal.SIGTERM
    assert not dropped, [getattr(d, "exc_value", d) for d in dropped]


class _SwallowsInterrupts:
    """A kernel that catches the interrupt and raises an error of its own instead."""

    def __getitem__(self, grid):  # noqa: ANN001, ANN204
        return self._run

    @staticmethod
    def _run(*args):  # noqa: ANN002, ANN205
        try:
            time.sleep(30)
        except KeyboardInterrupt:
            raise RuntimeError("the kernel swallowed the interrupt") from None


@pytest.mark.kernel
def test_a_signal_is_never_blamed_on_the_kernel_even_when_it_swallows_it(backend):
    import threading

    from eaglefuzz.harness.checking.check import check_case, warm_oracles
    from eaglefuzz.harness.core import interrupts
    from eaglefuzz.harness.sources import Implementations, Origin

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers run in the main thread only")
    impls = Implementations({PI: _SwallowsInterrupts()}, {PI: Origin("test", "test", PI)})
    # The oracles loaded first: the signal must land in the kernel, not in Numba's first import
    # (an import cut short leaves Numba half-initialised for the rest of this process).
    warm_oracles([PI])
    before = signal.getsignal(signal.SIGTERM)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    with pytest.raises(KeyboardInterrupt), interrupts.interruptible():
        check_case(load_case(CASE), impls, "cpu")  # without the guard: a crash finding
    timer.join()
    assert interrupts.received() == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before  # the handlers are restored
    # the signal belongs to that run: a later check in this process is not interrupted by it
    from eaglefuzz.harness.sources import implementations_for, parse_source

    later = check_case(load_case(CASE), implementations_for(parse_source("bundled")), backend.device)
    assert later is None, later.report()


def _lost_device(case, impl, device):  # noqa: ANN001, ANN202 - stands in for Target.check
    from eaglefuzz.harness.targetkit.base import Outcome

    return Outcome().crashed(RuntimeError("CUDA error: device-side assert triggered"), "cuda")


def _check_with_journal(directory: str) -> None:
    from eaglefuzz.harness.checking.check import check_case
    from eaglefuzz.harness.run.journal import Journal
    from eaglefuzz.harness.sources import implementations_for, parse_source

    check_case(load_case(CASE), implementations_for(parse_source("bundled"), [PI]), "cpu", Journal(Path(directory)))
    os._exit(0)  # reached only if the lost device did not end the process


@pytest.mark.kernel
def test_a_lost_device_ends_the_process_with_its_case_journaled(tmp_path, monkeypatch):
    """A sticky CUDA error (faked here: no GPU needed): with a journal the process exits at once
    with EXIT_DEVICE_LOST and leaves the case and why; without one the finding comes back
    unshrunk and the run draws no further case."""
    import multiprocessing

    from eaglefuzz.harness.checking.fuzz import fuzz_target
    from eaglefuzz.harness.core.exitcodes import EXIT_DEVICE_LOST
    from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE
    from eaglefuzz.harness.run.journal import orphans
    from eaglefuzz.harness.sources import implementations_for, parse_source
    from eaglefuzz.harness.targets import TARGETS

    monkeypatch.setattr(TARGETS[PI], "check", _lost_device)
    proc = multiprocessing.get_context("fork").Process(target=_check_with_journal, args=(str(tmp_path / "j"),))
    proc.start()
    proc.join(60)
    assert proc.exitcode == EXIT_DEVICE_LOST
    (orphan,) = orphans(tmp_path / "j")
    assert orphan.case == load_case(CASE)
    assert "device became unusable" in orphan.message

    stats = fuzz_target(PI, implementations_for(parse_source("bundled"), [PI]), "cpu", INTERPRETER_SCALE,
                        examples=50, shrink=True, stop_on_finding=False)
    (finding,) = stats.findings
    assert stats.examples == 1 and finding.fatal and finding.kind == "crash"
    assert finding.shrink.startswith("not shrunk: the device became unusable"), finding.shrink
