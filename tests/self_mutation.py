"""Who tests the tester: mutations of eaglefuzz's own code, each of which a named fast test must catch.

A :class:`HarnessMutant` is one small defect of the harness itself (an oracle's arithmetic, a
record's wiring, the comparison, the buffers, a generator's branch, the shrinker), given as
``(old, new)`` text edits of one file of the checkout, and the test node ids that must turn red
when it stands. The catalogue is :data:`tests/harness_mutants.py`'s ``CATALOGUE``.

:func:`stage` copies the checkout's files (never the ``.git`` or ``.tox`` folders) to a folder of
its own; :func:`run` applies one mutant to that copy, runs its named tests there in a child
``pytest`` with the copy first on ``PYTHONPATH`` (so ``import eaglefuzz`` is the mutated copy,
checked by a probe plugin), and puts the file back as it was. The checkout is never written.

Every edit's ``old`` text must occur exactly once in its file (:func:`problems`): a refactor that
moves or rewrites the code makes the catalogue's own test fail, naming the mutant to update, so a
mutant can never be skipped silently.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The checkout whose harness is mutated (read, never written)."""

KINDS = {
    "oracle-one": "the arithmetic of one oracle (the oracles disagree)",
    "oracle-both": "the arithmetic of both oracles, the same way (only expectations no oracle computed show it)",
    "wiring": "a record's wiring: what call_oracle or launch hands on, or what features_of reports",
    "compare-first": "the comparison skips the first element of each array",
    "compare-last": "the comparison skips the last element of each array",
    "guard": "guard bands: absent, or not compared",
    "sentinel": "sentinels: an untouched element indistinguishable from a written one",
    "dtype": "dtypes: not compared, or the wrong one allocated",
    "generator": "a generator branch never drawn by the generator body",
    "shrinker": "the shrinker: keeps a case that passes, or never shrinks",
}
"""Every kind of harness defect the catalogue must hold (issue 29), with what it breaks."""


@dataclass(frozen=True)
class HarnessMutant:
    """One defect of eaglefuzz's own code and the tests that must catch it."""

    name: str
    kind: str
    """A key of :data:`KINDS`."""
    edits: tuple[tuple[str, str, str], ...]
    """``(file, old, new)`` replacements: ``file`` relative to the checkout's root
    (``oracles/loops.py``); each ``old`` occurs exactly once in its file."""
    tests: tuple[str, ...]
    """pytest node ids (relative to the checkout's root) that must each fail while it stands."""
    why: str
    """The defect in words: what a harness with it would let through."""
    expect: str = ""
    """A regular expression the failing run's output must match (the failure is the one meant,
    not an accident); empty: any failure of the named tests."""
    fast: bool = False
    """In the default test run (CI); the others run in ``tox -e mutants``."""


@dataclass
class Result:
    """What running one mutant's tests on the mutated copy gave."""

    caught: bool
    detail: str
    """Why it counts as caught or not, in one line."""
    output: str = ""
    seconds: float = 0.0
    failed: list[str] = field(default_factory=list)
    """The node ids that failed."""


def problems(m: HarnessMutant, root: Path = ROOT) -> list[str]:
    """Why ``m`` cannot be applied to ``root`` as it stands (empty: it applies)."""
    out = []
    if m.kind not in KINDS:
        out.append(f"{m.name}: unknown kind {m.kind!r} (one of {', '.join(KINDS)})")
    if not m.edits:
        out.append(f"{m.name}: no edit")
    for file in files(m):
        path = root / file
        if not path.is_file():
            out.append(f"{m.name}: {file} does not exist: update the catalogue (tests/harness_mutants.py)")
            continue
        text = path.read_text()
        for f, old, new in m.edits:
            if f != file:
                continue
            n = text.count(old)
            if n != 1:
                out.append(f"{m.name}: the text to replace occurs {n} times in {file} (must be once): the code changed "
                           f"under the catalogue; update the mutant (tests/harness_mutants.py):\n{old}")
            if old == new:
                out.append(f"{m.name}: an edit that changes nothing")
        if not out:
            try:
                ast.parse(mutated_text(m, file, text))
            except SyntaxError as exc:
                out.append(f"{m.name}: the mutated {file} is not Python: {exc}")
    if out:
        return out
    for node in m.tests:
        test_file, _, rest = node.partition("::")
        func = rest.split("[", 1)[0]
        tpath = root / test_file
        if not tpath.is_file() or not func:
            out.append(f"{m.name}: named test {node}: no such test file")
            continue
        names = {n.name for n in ast.walk(ast.parse(tpath.read_text())) if isinstance(n, ast.FunctionDef)}
        if func not in names:
            out.append(f"{m.name}: named test {node}: {test_file} defines no {func}")
    return out


def files(m: HarnessMutant) -> list[str]:
    """The files ``m`` edits, in order."""
    return list(dict.fromkeys(f for f, _, _ in m.edits))


def mutated_text(m: HarnessMutant, file: str, text: str) -> str:
    """``text`` (the content of ``file``) with ``m``'s edits of that file made."""
    for f, old, new in m.edits:
        if f == file:
            text = text.replace(old, new, 1)
    return text


SKIP = {".git", ".tox", ".venv", "__pycache__", ".hypothesis", ".pytest_cache", "build", "dist",
        "eaglefuzz-findings", ".eaglefuzz", ".whl", ".device"}


def stage(dest: Path, root: Path = ROOT) -> Path:
    """A copy of the checkout ``root`` at ``dest/pkg`` (modification times kept, so that caches
    keyed on them, Numba's and Python's, serve every unmutated file); its path."""
    pkg = dest / "pkg"
    if pkg.exists():
        return pkg
    tmp = dest / "pkg.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    ignore = shutil.ignore_patterns(*SKIP, "*.pyc", "*.egg-info")
    tmp.mkdir(parents=True)
    for entry in sorted(root.iterdir()):
        if entry.name in SKIP or entry.name.endswith(".egg-info"):
            continue
        if entry.is_dir():
            shutil.copytree(entry, tmp / entry.name, ignore=ignore, symlinks=True)
        elif entry.is_file():
            shutil.copy2(entry, tmp / entry.name)
    (tmp / PROBE_FILE).write_text(PROBE.format(root=str(pkg)))
    tmp.rename(pkg)
    return pkg


PROBE_FILE = "_eaglefuzz_mutant_probe.py"
PROBE = '''"""Loaded by the child pytest of tests/self_mutation.py: stops it unless eaglefuzz is the copy."""
import pytest


def pytest_configure(config):
    import eaglefuzz.harness as h

    if not h.__file__.startswith({root!r} + "/"):
        pytest.exit("the mutated copy is not what runs: eaglefuzz.harness is " + h.__file__, returncode=3)
'''

_last_mtime = [0.0]


def _fresh_mtime() -> float:
    """A modification time no earlier mutated file of this process had (whole seconds apart:
    Python's bytecode cache compares whole seconds)."""
    t = max(float(int(time.time())) + 2, _last_mtime[0] + 2)
    _last_mtime[0] = t
    return t


def run(m: HarnessMutant, pkg: Path, *, timeout: float = 570, extra_env: dict[str, str] | None = None) -> Result:
    """Apply ``m`` to the staged copy ``pkg``, run its named tests there, restore the files."""
    bad = problems(m, pkg)
    if bad:
        return Result(False, "does not apply: " + "; ".join(bad))
    saved = {}
    try:
        for file in files(m):
            path = pkg / file
            saved[path] = (path.read_text(), path.stat())
            path.write_text(mutated_text(m, file, saved[path][0]))
            t = _fresh_mtime()
            os.utime(path, (t, t))
        return run_tests(pkg, m.tests, timeout=timeout, expect=m.expect, extra_env=extra_env)
    finally:
        for path, (text, st) in saved.items():
            path.write_text(text)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def child_env(pkg: Path, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the child pytest: the copy first on ``PYTHONPATH``, no warm servers,
    caches of its own, and none of this session's pytest, xdist or CI settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "EAGLEFUZZ_", "NUMBA_CACHE_DIR")) and k not in ("CI", "PYTHONPATH")}
    env["PYTHONPATH"] = str(pkg)
    env["EAGLEFUZZ_WARM"] = "0"
    env["EAGLEFUZZ_CACHE"] = str(pkg.parent / "cache")
    env["EAGLEFUZZ_NUMBA_CACHE_BASE"] = str(pkg.parent / "cache" / "numba")
    env["EAGLEFUZZ_TEST_WARM_OWNER"] = "mutant"  # tests/conftest.py: no warm-server folder of its own
    env["PYTHONDONTWRITEBYTECODE"] = ""
    env.update(extra_env or {})
    return env


def run_tests(pkg: Path, tests: tuple[str, ...], *, timeout: float, expect: str = "",
              extra_env: dict[str, str] | None = None) -> Result:
    """Run ``tests`` in the copy ``pkg``; caught when each of them failed (and ``expect`` matched)."""
    cmd = [sys.executable, "-m", "pytest", "-p", PROBE_FILE[:-3], "-p", "no:cacheprovider", "-q", "--no-header",
           "-rfE", "--tb=short", "-W", "ignore::pytest.PytestUnknownMarkWarning", *tests]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=pkg, env=child_env(pkg, extra_env), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return Result(False, f"the named tests ran past {timeout:g} s", out, time.monotonic() - start)
    seconds = time.monotonic() - start
    out = proc.stdout + proc.stderr
    failed = re.findall(r"^FAILED (\S+)", out, re.M)
    errors = re.findall(r"^ERROR (\S+)", out, re.M)
    if proc.returncode not in (0, 1) or errors:
        return Result(False, f"the child pytest did not run the tests (exit {proc.returncode}"
                      f"{', errors in ' + ', '.join(errors) if errors else ''})", out, seconds, failed)
    missing = [t for t in tests if not any(f == t or f.startswith(t + "[") or f.startswith(t + "::") for f in failed)]
    if missing:
        return Result(False, f"passed: {', '.join(missing)}", out, seconds, failed)
    if expect and not re.search(expect, out, re.M):
        return Result(False, f"the named tests failed, but not as expected (no match for {expect!r})", out, seconds, failed)
    return Result(True, f"{len(failed)} named test(s) failed", out, seconds, failed)
