"""A green run says what it covered: its skips counted by reason, and under CI (``CI=true``) a
skip outside the expected set, or a release that cannot be fetched, fails it (``tests/needs.py``).

Each test runs a tiny pytest session of its own in a child process, with ``tests/needs.py``
registered as ``tests/conftest.py`` registers it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

NEEDS = Path(__file__).with_name("needs.py")

CONFTEST = f'''\
import importlib.util, sys
spec = importlib.util.spec_from_file_location("eaglefuzz_test_needs", {str(NEEDS)!r})
NEEDS = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = NEEDS
spec.loader.exec_module(NEEDS)


def pytest_configure(config):
    config.pluginmanager.register(NEEDS.SkipTally(config, EXPECTED_COUNTS), "eaglefuzz-skip-tally")
'''

TESTS = '''\
import sys

import pytest

needs = sys.modules["eaglefuzz_test_needs"]


def test_passes():
    pass


@pytest.mark.parametrize("i", range(3))
def test_needs_a_gpu(i):
    needs.unavailable("gpu", "none here")


def test_needs_vllm():
    pytest.skip("needs vLLM installed (tox -e vllm): not here")
'''

OFFLINE = '''

def test_release_not_cached_offline():
    needs.unavailable("offline", "vLLM 9.9.9: cannot fetch the wheel (no network)")
'''

ODD = '''

def test_skips_for_no_known_reason():
    pytest.skip("the moon is full")
'''


def nested(tmp_path: Path, tests: str, ci: bool, *args: str, counts: dict | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(f"EXPECTED_COUNTS = {counts!r}\n" + CONFTEST)
    (tmp_path / "test_nested.py").write_text(tests)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CI"))}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # no Hypothesis, no eaglefuzz plugin: a second, not five
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
         str(tmp_path / "test_nested.py"), *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )


def summary(out: str) -> dict[str, int]:
    """Category key -> count, from the run's "skips by reason" lines."""
    block = out.split("skips by reason: ", 1)[1]
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s*(\d+)  ([a-z-]+)[: ]", block, re.M)}


@pytest.mark.parametrize("xdist", [False, True], ids=["one-process", "xdist"])
def test_every_run_ends_with_its_skips_by_reason(tmp_path, xdist):
    proc = nested(tmp_path, TESTS + OFFLINE + ODD, False, *(["-p", "xdist.plugin", "-n", "2"] if xdist else []))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "skips by reason: 6" in out, out
    assert summary(out) == {"gpu": 3, "vllm": 1, "offline": 1, "other": 1}, out
    assert "    3  gpu: needs a CUDA GPU" in out
    assert "    1  other (no expected reason; these would fail the run under CI=true): the moon is full" in out
    assert "    1  offline: needs the package index (not cached, and it cannot be reached): these fail the run under CI=true" in out


def test_ci_fails_a_release_that_cannot_be_fetched(tmp_path):
    proc = nested(tmp_path, TESTS + OFFLINE, True)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert re.search(r"FAILED test_nested.py::test_release_not_cached_offline - Failed: CI=true, so this is a "
                     r"failure, not a skip: needs the package index", out), out
    assert summary(out) == {"gpu": 3, "vllm": 1}, out


def test_ci_fails_a_run_with_a_skip_outside_the_expected_set(tmp_path):
    proc = nested(tmp_path, TESTS + ODD, True)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "1 passed, 5 skipped" in out
    assert "    1  other (no expected reason; CI=true, so these fail the run): the moon is full" in out


def test_ci_passes_a_run_whose_skips_are_all_expected(tmp_path):
    proc = nested(tmp_path, TESTS, True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary(proc.stdout) == {"gpu": 3, "vllm": 1}


def test_ci_fails_a_run_whose_skip_count_changed(tmp_path):
    """Each category's count is fixed under CI (tests/needs.py ``CI_COUNTS``): one skip more, one
    fewer, or a category that appears fails the run, naming it."""
    proc = nested(tmp_path, TESTS, True, counts={"gpu": 2, "vllm": 1})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "skip count of gpu: 3, CI expects 2 (tests/needs.py CI_COUNTS)" in proc.stdout
    proc = nested(tmp_path, TESTS, True, counts={"gpu": 3})
    assert proc.returncode == 1 and "skip count of vllm: 1, CI expects 0" in proc.stdout, proc.stdout
    proc = nested(tmp_path, TESTS, True, counts={"gpu": 3, "vllm": 1})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = nested(tmp_path, TESTS, False, counts={"gpu": 2})  # outside CI: counted, not enforced
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ci_counts_cover_only_categories_ci_may_skip(needs):
    for key in needs.CI_COUNTS:
        assert key in needs.EXPECTED and needs.EXPECTED[key].in_ci, key


# -- the helpers tests call ----------------------------------------------------------------------


def _pip_fails(monkeypatch, tmp_path, text: str) -> None:
    from eaglefuzz.harness.sources import wheels

    monkeypatch.setenv("EAGLEFUZZ_WHEELS", str(tmp_path))
    monkeypatch.setattr(wheels.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", text))


OFFLINE_PIP = "ERROR: Could not find a version that satisfies the requirement vllm==9.5.1 (from versions: none)\n"
NO_SUCH_RELEASE = "ERROR: Could not find a version that satisfies the requirement vllm==9.5.1 (from versions: 0.33.0)\n"


@pytest.mark.parametrize("ci", [False, True], ids=["local", "CI"])
def test_a_release_that_cannot_be_fetched_skips_or_fails_under_ci(needs, monkeypatch, tmp_path, ci):
    _pip_fails(monkeypatch, tmp_path, OFFLINE_PIP)
    if ci:
        monkeypatch.setenv("CI", "true")
    else:
        monkeypatch.delenv("CI", raising=False)
    expected = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(expected, match=r"needs the package index \(not cached, and it cannot be reached\): vLLM 9\.5\.1: "):
        needs.release_files("9.5.1")


def test_a_release_that_does_not_exist_is_an_error_not_a_skip(needs, monkeypatch, tmp_path):
    from eaglefuzz.harness.sources import wheels

    _pip_fails(monkeypatch, tmp_path, NO_SUCH_RELEASE)
    with pytest.raises(wheels.FetchFailed):
        needs.release_files("9.5.1")


def test_a_mutant_of_a_release_skips_only_for_a_fetch_failure(mutants, monkeypatch, tmp_path):
    from eaglefuzz.harness.sources import vllm as vsrc

    _pip_fails(monkeypatch, tmp_path, OFFLINE_PIP)
    with pytest.raises(mutants.ModuleUnavailable, match="cannot fetch the wheel"):
        mutants.module_file("vllm-release:9.5.1")

    def broken(version: str, *module: str) -> Path:
        raise RuntimeError("a bug of the release source")

    monkeypatch.setattr(vsrc, "release_module_file", broken)
    with pytest.raises(RuntimeError, match="a bug of the release source"):  # surfaces: not a skip
        mutants.module_file("vllm-release:9.5.1")
