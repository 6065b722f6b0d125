"""``replay --sanitize``: compute-sanitizer's errors parsed and tied to the case that made them.

There is no GPU and no compute-sanitizer on a CPU machine: a fake ``compute-sanitizer`` first
on ``PATH`` runs the command it is given (the interpreter replays the case) and then, for the
case file it is told to flag, writes a canned memcheck error block to its log and exits with
the error exit code, as the real one does. The real run is benchmarks/gpu_sanitize.sh.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from eaglefuzz.harness import cli
from eaglefuzz.harness.run.cuda_devices import FAKE_ENV
from eaglefuzz.harness.run.sanitize import ERROR_EXIT, KIND, _record, error_blocks, summary_errors

ROOT = Path(__file__).resolve().parent.parent
PI = "eagle_prepare_inputs_padded_kernel"

LOG = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at eagle_prepare_inputs_padded_kernel+0x2b0 in utils.py:42
=========     by thread (5,0,0) in block (0,0,0)
=========     Address 0x7f3a00000414 is out of bounds
=========     and is 4 bytes after the nearest allocation at 0x7f3a00000400 of size 16 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f1e4] in libcuda.so.1
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaStreamSynchronize.
=========
========= Target application returned an error
========= ERROR SUMMARY: 2 errors
"""

FAKE = f"""#!{sys.executable}
import os, subprocess, sys
args, i = sys.argv[1:], 0
log = None
while i < len(args) and args[i].startswith("--"):
    if args[i] == "--log-file":
        log = args[i + 1]
    i += 1 if args[i] in ("--version",) else 2
with open(os.environ["FAKE_SANITIZER_SEEN"], "a") as seen:
    seen.write(repr((args[i:], os.environ.get("EAGLEFUZZ_WARM"))) + "\\n")
if os.environ.get("FAKE_SANITIZER_HANG"):  # a case that never ends under the sanitizer
    child = subprocess.Popen(["sleep", "600"])
    with open(os.environ["FAKE_SANITIZER_HANG"], "w") as f:
        f.write(f"{{os.getpid()}} {{child.pid}}")
    child.wait()
code = subprocess.call(args[i:])
if any(os.environ["FAKE_SANITIZER_FLAG"] in a for a in args[i:]):
    with open(log, "w") as f:
        f.write({LOG!r})
    sys.exit({ERROR_EXIT})
sys.exit(code)
"""


def test_error_blocks_and_summary_are_parsed():
    blocks = error_blocks(LOG)
    assert [b[0] for b in blocks] == [
        "Invalid __global__ write of size 4 bytes",
        'Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call '
        "to cudaStreamSynchronize."]
    assert blocks[0][3] == "Address 0x7f3a00000414 is out of bounds"
    assert summary_errors(LOG) == 2 and error_blocks("plain output\n") == [] and summary_errors("") == 0


def test_a_sanitizer_error_outranks_the_replays_verdict():
    ok = {"replayed": 1, "failed": [], "not_replayed": {}}
    r = _record("a.json", PI, 10, ERROR_EXIT, ok, LOG)
    assert r["kind"] == KIND and r["status"] == "failed"
    assert "Invalid __global__ write of size 4 bytes while replaying a.json" in r["report"]
    assert "Host Frame" not in r["report"] and "1 more error" in r["report"]
    assert _record("a.json", PI, 10, 0, ok, "========= ERROR SUMMARY: 0 errors\n")["status"] == "ok"


def test_a_sanitized_process_that_dies_without_its_report_is_a_crash():
    r = _record("a.json", PI, 10, -11, None, "", "Fatal Python error: Segmentation fault\n")
    assert (r["status"], r["kind"]) == ("failed", "crash")
    assert r["report"].startswith(f"{PI} failed to run: under compute-sanitizer the replay of a.json was "
                                  "killed by signal SIGSEGV without its report")
    assert "Segmentation fault" in r["report"]
    assert "exited with 3" in _record("a.json", PI, 10, 3, None, "", "Traceback ...")["report"]


@pytest.fixture
def fake_sanitizer(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "compute-sanitizer"
    exe.write_text(FAKE)
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("FAKE_SANITIZER_SEEN", str(tmp_path / "seen.txt"))
    return exe


@pytest.mark.parametrize(
    ("args", "env", "path_has_it", "words"),
    [
        (["--sanitize"], {FAKE_ENV: "1"}, False, "compute-sanitizer is not on PATH"),
        (["--sanitize"], {FAKE_ENV: "0"}, True, "--sanitize: no CUDA device here"),
        (["--sanitize", "--backend", "interpreter"], {FAKE_ENV: "1"}, True, "--backend interpreter runs no CUDA code"),
    ],
)
def test_sanitize_usage_errors(capsys, monkeypatch, tmp_path, fake_sanitizer, args, env, path_has_it, words):
    if not path_has_it:
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SystemExit) as exc:
        cli.main(["replay", str(ROOT / "corpus" / PI), *args])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and words in err, err


@pytest.mark.kernel
def test_invalid_access_is_a_finding_of_its_case(capsys, monkeypatch, tmp_path, fake_sanitizer):
    files = sorted((ROOT / "corpus" / PI).glob("*.json"))[:2]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f in files:
        shutil.copy(f, corpus / f.name)
    bad, good = corpus / files[0].name, corpus / files[1].name
    monkeypatch.setenv(FAKE_ENV, "1")
    monkeypatch.setenv("FAKE_SANITIZER_FLAG", bad.name)
    with pytest.raises(SystemExit) as exc:
        cli.main(["replay", "--sanitize", str(corpus)])
    out = capsys.readouterr().out
    assert exc.value.code == 1, out
    assert f"FAIL {bad}" in out and f"ok   {good}" in out
    assert f"fail the same way ({PI}, {KIND}): {bad}\n" in out
    assert f"Invalid __global__ write of size 4 bytes while replaying {bad}" in out
    assert "1 passed, 1 failed" in out
    # Each case ran in the process the sanitizer started (no worker it would not see, no warm
    # server it would wait for).
    seen = [eval(ln) for ln in (tmp_path / "seen.txt").read_text().splitlines()]
    assert len(seen) == 2
    for argv, warm in seen:
        assert argv[:4] == [sys.executable, "-m", "eaglefuzz.harness.cli", "replay"] and "--no-isolate" in argv
        assert warm == "0"


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_a_case_that_hangs_under_the_sanitizer_is_a_hang_and_its_processes_end(capsys, monkeypatch, tmp_path,
                                                                                fake_sanitizer):
    from eaglefuzz.harness.run import sanitize

    case = sorted((ROOT / "corpus" / PI).glob("*.json"))[0]
    pids = tmp_path / "pids"
    monkeypatch.setenv(FAKE_ENV, "1")
    monkeypatch.setenv("FAKE_SANITIZER_FLAG", "no file has this name")
    monkeypatch.setenv("FAKE_SANITIZER_HANG", str(pids))
    monkeypatch.setattr(sanitize, "START_S", 1.0)
    with pytest.raises(SystemExit) as exc:
        cli.main(["replay", "--sanitize", str(case), "--case-timeout", "1"])
    out = capsys.readouterr().out
    assert exc.value.code == 1, out
    assert f"FAIL {case}" in out
    assert (f"{PI} did not finish under compute-sanitizer: replaying {case} ran past its limit of 2 s" in out
            and "its processes were ended" in out), out
    for pid in map(int, pids.read_text().split()):  # the sanitizer and the process it started
        assert _gone(pid), f"process {pid} outlived the replay"
