"""The command line: exit codes, one-line errors, reproducible reports, campaigns into the corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eaglefuzz.harness import cli
from eaglefuzz.harness.checking.corpus import CORPUS_DIR, load_entry

ROOT = Path(__file__).resolve().parent.parent
BUG = "pi_cu_read_as_exclusive"  # a seeded bug (tests/seeded_bugs/mutants.py)
PI = "eagle_prepare_inputs_padded_kernel"


SHRINK_TO_THE_END = {"EAGLEFUZZ_SHRINK_BUDGET": "600"}
"""For a test that asserts how small a shrunk case is: shrinking ends when no move helps, on any
machine, not when a budget sized for a fast one runs out."""


def run_cli(*args: str, cwd: Path | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    return subprocess.run(
        [sys.executable, "-m", "eaglefuzz.harness.cli", *args],
        capture_output=True, text=True, env=env, cwd=cwd or ROOT, timeout=600, check=False,
    )


def without_timings(report: dict) -> dict:
    for t in report["targets"].values():
        t.pop("seconds", None)
    return report


def replay_in_process(*args: str) -> int:
    """``eaglefuzz replay ARGS`` in this process (no worker: a replay's verdict is the same, and
    the separate process is proven elsewhere); its exit code."""
    with pytest.raises(SystemExit) as exc:
        cli.main(["replay", *args, "--no-isolate"])
    return exc.value.code


def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    return exc.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["fuzz", "--kernel", "no_such_kernel"], ["--kernel", "no_such_kernel"]),
        (["fuzz", "--kernels", "/nonexistent/utils.py"], ["--kernels", "/nonexistent/utils.py"]),
        (["fuzz", "--shard", "3/2"], ["--shard", "3/2"]),
        (["fuzz", "--shard", "x"], ["--shard"]),
        (["fuzz", "--examples", "0"], ["--examples"]),
        (["fuzz", "--no-such-option"], ["--no-such-option"]),
        (["replay", "/nonexistent/case.json"], ["/nonexistent/case.json"]),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(capsys, args, names):
    code, err = in_process(capsys, *args)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("eaglefuzz: error: ")
    assert "Traceback" not in err
    for n in names:
        assert n in err


def test_missing_gpu_for_cuda_backend_is_a_usage_error(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: --backend cuda is valid here")
    code, err = in_process(capsys, "replay", str(CORPUS_DIR / PI), "--backend", "cuda", "--no-isolate")
    assert code == 2 and err.count("\n") == 1 and "--backend cuda" in err and "no CUDA GPU" in err


def test_malformed_corpus_file_is_a_usage_error(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": 1, "kernel": ')
    code, err = in_process(capsys, "replay", str(bad))
    assert code == 2 and err.count("\n") == 1 and str(bad) in err


def test_list_names_every_target(capsys):
    from eaglefuzz.harness.targets import TARGETS

    with pytest.raises(SystemExit) as exc:
        cli.main(["list"])
    out = capsys.readouterr().out
    assert exc.value.code in (0, None)
    for name, t in TARGETS.items():
        assert name in out
        assert all(f in out for f in t.features)


@pytest.mark.kernel
def test_same_seed_same_report(tmp_path, capsys):
    args = ["fuzz", "--kernel", PI, "--examples", "8", "--seed", "7", "--json", "--corpus", str(tmp_path)]
    a, b = run_cli(*args), run_cli(*args)  # two processes (each with its own hash seed)
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    ra, rb = json.loads(a.stdout), json.loads(b.stdout)
    assert without_timings(ra) == without_timings(rb)
    assert ra["targets"][PI]["examples"] == 16 and ra["targets"][PI]["tiers_searched"] == ["production", "extended"]
    # another seed, another report (in this process: only the difference matters here)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        cli.main(["fuzz", "--kernel", PI, "--examples", "8", "--seed", "8", "--json", "--corpus", str(tmp_path),
                  "--no-isolate", "--no-progress"])
    assert exc.value.code == 0
    rc = json.loads(capsys.readouterr().out)
    assert rc["targets"][PI]["examples"] == 16
    assert without_timings(rc) != without_timings(ra)


@pytest.mark.kernel
@pytest.mark.parametrize("mode", ["hypothesis", "bulk"])
def test_campaign_finding_lands_in_corpus_and_replays(tmp_path, mode, seeded_bugs_dir):
    bug = seeded_bugs_dir / f"{BUG}.py"
    found = run_cli("fuzz", "--kernels", str(bug), "--kernel", PI, "--examples", "200", "--mode", mode,
                    "--corpus", str(tmp_path), "--json", **SHRINK_TO_THE_END)
    assert found.returncode == 1, found.stdout + found.stderr
    report = json.loads(found.stdout)
    (finding,) = report["targets"][PI]["findings"]
    entry = load_entry(finding["file"])
    assert entry.case.kernel == PI and entry.case.scalars["num_reqs"] <= 3, "the saved case is not small"
    assert "shrinking stopped" not in finding["report"]
    assert entry.finding and "replay" in entry.finding and str(bug) in entry.finding["replay"]
    assert "cu_num_draft_tokens" in entry.finding["report"] or "token_indices_to_sample" in entry.finding["report"]
    # The replay fails while the bug is there and passes against the production kernel.
    assert replay_in_process(str(tmp_path), "--kernels", str(bug)) == 1
    assert replay_in_process(str(tmp_path)) == 0


def test_shards_split_the_bulk_examples(monkeypatch):
    from eaglefuzz.harness.checking import fuzz
    from eaglefuzz.harness.checking.corpus import case_hash
    from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE
    from eaglefuzz.harness.sources import Implementations

    seen: list[str] = []
    monkeypatch.setattr(fuzz, "check_case", lambda case, *a, **k: seen.append(case_hash(case)))
    impls = Implementations({}, {})

    def cases(offset: int, step: int, n: int) -> list[str]:
        seen.clear()
        fuzz.bulk_fuzz_target(PI, impls, "cpu", INTERPRETER_SCALE, seed=5, examples=n, chunk_offset=offset, chunk_step=step)
        return list(seen)

    whole, first, second = cases(0, 1, 12), cases(0, 2, 6), cases(1, 2, 6)
    assert not set(first) & set(second)
    assert sorted(first + second) == sorted(whole)


# A port-style kernel (anything indexable as kernel[grid](...) is one): wrong on the first case it
# sees; from the second call on (the shrinker at work) it says so in a file and blocks until a
# signal stops it, so the signal is sure to come while the finding is being shrunk.
SLOW_TO_SHRINK = '''
import os
import time
from pathlib import Path

_calls = []


class _Kernel:
    __name__ = "eagle_prepare_inputs_padded_kernel"

    def __getitem__(self, grid):
        return self._run

    @staticmethod
    def _run(cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc,
             token_indices_to_sample, num_rejected_tokens, num_reqs):
        _calls.append(1)
        if len(_calls) == 1:
            return  # writes nothing: a difference on any case
        Path(os.environ["SHRINKING_MARKER"]).touch()
        while True:
            time.sleep(0.05)


eagle_prepare_inputs_padded_kernel = _Kernel()
'''


@pytest.mark.kernel
def test_interrupted_campaign_keeps_its_finding(tmp_path):
    """SIGTERM (a timeout) while a finding is being shrunk: the finding is kept, as first found,
    and the report says it was not shrunk; exit 1."""
    import signal
    import time

    bug = tmp_path / "slow_to_shrink.py"
    bug.write_text(SLOW_TO_SHRINK)
    marker, corpus = tmp_path / "shrinking", tmp_path / "corpus"
    proc = subprocess.Popen(
        [sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--kernels", str(bug), "--kernel", PI,
         "--examples", "500", "--corpus", str(corpus), "--json"],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SHRINKING_MARKER": str(marker)},
    )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), "the shrinker never called the kernel again"
        assert list(corpus.rglob("*.json")), "the finding was not saved before shrinking"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1
    files = sorted(corpus.rglob("*.json"))
    assert files, "the finding was lost"
    report = json.loads(out)
    assert report["interrupted"] is True
    (finding,) = report["targets"][PI]["findings"]
    assert Path(finding["file"]) in files
    assert "shrinking was interrupted before its first step: this is the case as first found" in finding["report"]
    assert load_entry(finding["file"]).case.kernel == PI
    assert replay_in_process(str(corpus), "--kernels", str(bug)) == 1


def test_list_imports_no_torch(tmp_path):
    """`eaglefuzz list` took 22 s on a cold machine: for the bundled copy it imported torch and
    Triton (through the module) only to say which targets the module defines. It reads the
    file instead; what it prints is the same (tests/test_readme.py checks the matrix)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPROFILEIMPORTTIME"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "eaglefuzz.harness.cli", "list"],
                          capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT)}, cwd=tmp_path,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "eagle_prepare_inputs_padded_kernel (triton kernel, model runner V1): kernels/spec_decode_utils.py::" in proc.stdout
    assert ("compute_new_slot_mapping (python function, model runner V1): not defined by bundled production copy"
            in proc.stdout)
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")}
    heavy = sorted(m for m in imported if m.split(".")[0] in {"torch", "triton", "numba"})
    assert not heavy, heavy[:10]


def test_audit_prints_progress_lines(capsys, monkeypatch):
    """`eaglefuzz audit` runs for minutes and printed nothing until its report: a line on stderr
    every $EAGLEFUZZ_PROGRESS_EVERY seconds, as fuzz prints without a terminal (0: every example)."""
    monkeypatch.setenv("EAGLEFUZZ_PROGRESS_EVERY", "0")
    with pytest.raises(SystemExit) as exc:
        cli.main(["audit", "--kernel", PI, "--examples", "2"])
    err = capsys.readouterr().err
    assert exc.value.code == 0, err
    assert f"eaglefuzz audit: {PI}: 1 example, " in err and f"eaglefuzz audit: {PI}: 2 examples, " in err, err


@pytest.mark.parametrize("command", ["fuzz", "replay"])
def test_the_supervising_process_imports_no_torch(command, tmp_path):
    """Only the worker imports torch and the kernels: the supervisor that watches it must not pay
    for them too (they doubled the time to the first example). ``replay``'s supervisor checks the
    corpus files against the targets' contracts first: it may import the targets (NumPy,
    Hypothesis), never torch."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPROFILEIMPORTTIME"}
    args = {"fuzz": ["fuzz", "--kernel", "extend_all_queries_by_N", "--examples", "1", "--no-progress",
                     "--corpus", str(tmp_path)],
            "replay": ["replay", str(sorted((CORPUS_DIR / "extend_all_queries_by_N").glob("*.json"))[0])]}[command]
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "eaglefuzz.harness.cli", *args],
        capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # -X importtime is the supervisor's alone (its worker starts without it)
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")}
    assert "eaglefuzz.harness.run.supervisor" in imported
    banned = {"torch", "triton", "numba"} | ({"hypothesis"} if command == "fuzz" else set())
    heavy = sorted(m for m in imported if m.split(".")[0] in banned)
    assert not heavy, heavy[:10]


@pytest.mark.parametrize("mode", ["bulk", "hypothesis"])
def test_the_time_budget_counts_from_the_commands_start(tmp_path, mode):
    """``--time-budget`` counts from when the command started (start-up, loading the source,
    compiling the oracles included), in the supervised worker too: a command whose start lies
    a whole budget back (``$EAGLEFUZZ_STARTED_AT``, as the outermost process notes it) checks no
    case, says where its budget went, and reports what it did not reach."""
    import time

    from eaglefuzz.harness.core.clock import STARTED_ENV

    r = run_cli("fuzz", "--mode", mode, "--time-budget", "60", "--domain", "production", "--json",
                "--kernel", PI, "--kernel", "copy_and_expand_eagle_inputs_kernel", "--corpus", str(tmp_path),
                **{STARTED_ENV: repr(time.time() - 60)})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["startup_seconds"] >= 60
    stages = doc["startup_stages"]  # where it went: the process before the campaign (here the minute back), then its phases
    assert list(stages) == ["process", "backend", "source", "plan", "oracles", "torch.compile"] and stages["process"] >= 60
    assert sum(stages.values()) == pytest.approx(doc["startup_seconds"], abs=0.01)
    for t in doc["targets"].values():
        assert t["examples"] == 0 and t["features_missed"] and not t["features_reached"], t


def test_the_commands_start_is_noted_once_for_its_workers(monkeypatch):
    """The outermost process notes when the command started; a nested one (a worker, which
    inherits it) keeps it; deadlines count from it."""
    import time

    from eaglefuzz.harness.core import clock

    monkeypatch.delenv(clock.STARTED_ENV, raising=False)
    with clock.mark_start(1000.0):
        assert clock.started_at() == 1000.0
        with clock.mark_start(2000.0):
            assert os.environ[clock.STARTED_ENV] == "1000.0"
    assert clock.STARTED_ENV not in os.environ
    with clock.mark_start(time.time() - 30):
        assert clock.deadline(40) - time.monotonic() == pytest.approx(10, abs=1)
