"""A kernel that kills the process is still reported, with the case that killed it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eaglefuzz.harness.checking.corpus import load_entry

ROOT = Path(__file__).resolve().parent.parent
CRASH = "crash_wild_write_prepare_inputs"  # tests/seeded_bugs/mutants.py, CRASH_MUTANTS
PI = "eagle_prepare_inputs_padded_kernel"


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "EAGLEFUZZ_CACHE": str(tmp_path / "cache"),
            "EAGLEFUZZ_TEST_FINDINGS": str(tmp_path / "test-findings")}  # a nested pytest's findings: its own


@pytest.fixture
def crash_bug(mutants, tmp_path) -> Path:
    return mutants.write(mutants.BY_NAME[CRASH], tmp_path / "bugs")


@pytest.mark.kernel
def test_cli_reports_the_case_that_killed_the_process(tmp_path, crash_bug):
    corpus = tmp_path / "corpus"
    proc = subprocess.run(
        [sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--kernels", str(crash_bug), "--kernel", PI,
         "--examples", "100", "--corpus", str(corpus), "--json"],
        # As a user runs it, warm servers on (the suite's, tests/conftest.py): the shrinker starts
        # one if none is up and forks its workers from it (a worker killed by a signal, its status
        # passed back through the server). Shrinking runs to its end (its rounds, not a budget
        # sized for a fast machine): the case is asserted small below.
        capture_output=True, text=True, env={**_env(tmp_path), "EAGLEFUZZ_FAULT_SHRINK_BUDGET": "600"},
        timeout=600, check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    # Interpreter: the process dies (the supervisor reports); compiled: CUDA raises (a crash finding).
    findings = doc["findings"] if "crashed" in doc else doc["targets"][PI]["findings"]
    (finding,) = findings
    assert "Traceback" not in finding["report"]
    if "crashed" in doc:  # the worker's death reached the supervisor through the warm server
        assert "the process died (signal SIG" in finding["report"], finding["report"]
        assert list(Path(os.environ["EAGLEFUZZ_WARM_DIR"]).glob("*.sock")), "no warm server for the shrinker"
    entry = load_entry(finding["file"])
    assert entry.case.kernel == PI
    assert entry.case.scalars["num_reqs"] <= 2, "the crashing case was not shrunk"
    cu = entry.case.arrays["cu_num_draft_tokens"].astype(int)
    assert (abs(cu[0]) > 2) or any(b - a > 2 for a, b in zip(cu[:-1], cu[1:], strict=False)), "the case must trigger the bug"


@pytest.mark.kernel
def test_pytest_reports_the_case_that_killed_a_worker(tmp_path, crash_bug):
    corpus = tmp_path / "corpus"
    # From another directory, on one xdist worker; no replacement worker is started after the
    # crash (there is nothing left for one to run: it would only cost a start-up).
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "1", "--max-worker-restart", "0", "-p", "no:cacheprovider",
         f"{ROOT / 'tests' / 'test_differential.py'}::test_matches_oracles[{PI}-0]", "--kernels", str(crash_bug), "--eaglefuzz-corpus", str(corpus)],
        capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path, timeout=600, check=False,
    )
    assert proc.returncode == 1, proc.stdout[-3000:]
    saved = sorted(corpus.rglob("*.json"))
    assert saved, proc.stdout[-3000:]
    if "eaglefuzz: crash" in proc.stdout:  # the interpreter: a worker died, the controller reported it
        assert "a test process died while checking a case" in proc.stdout
    for f in saved:
        assert load_entry(f).case.kernel == PI


@pytest.mark.kernel
def test_the_supervisor_finds_which_case_of_a_faulted_batch_faults(tmp_path, crash_bug, monkeypatch):
    """A device batch that left the process unusable names every case it launched as a suspect
    (tests/test_device.py); the supervisor runs them one at a time in a fresh worker, and the
    first that faults alone is the case reported and shrunk: here the second of three (a request
    of more than two drafts makes the seeded bug's wild store), not the batch's first."""
    import numpy as np

    from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE
    from eaglefuzz.harness.run.supervisor import Signals, locate_fault
    from eaglefuzz.harness.targets import TARGETS

    for k, v in _env(tmp_path).items():
        monkeypatch.setenv(k, v)
    rng = np.random.default_rng(0)
    clean, bad = [], []
    while len(clean) < 2 or not bad:
        c = TARGETS[PI].random_case(rng, INTERPRETER_SCALE)
        drafts = np.diff(np.concatenate([[0], c.arrays["cu_num_draft_tokens"].astype(int)]))
        (bad if drafts.max(initial=0) > 2 else clean).append(c)
    suspects = [clean[0], bad[0], clean[1]]
    case, message, found = locate_fault(suspects, "the device became unusable", spec=f"file:{crash_bug}",
                                        backend="interpreter", signals=Signals())
    assert found, message
    assert case.kernel == PI and (case.arrays["cu_num_draft_tokens"] == bad[0].arrays["cu_num_draft_tokens"]).all()
    case, message, found = locate_fault([clean[0], clean[1]], "the device became unusable", spec=f"file:{crash_bug}",
                                        backend="interpreter", signals=Signals())
    assert not found and "none of the batch's 2 cases faults alone" in message
    assert (case.arrays["cu_num_draft_tokens"] == clean[0].arrays["cu_num_draft_tokens"]).all()
