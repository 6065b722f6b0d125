"""The built wheel is the checkout: it holds every module of the checkout's packages and every
data file the code reads at run time, and nothing else.

An editable install (what ``tox -e test`` makes) imports the folders themselves, so a package
left out of the wheel goes unnoticed there; only a built wheel shows it. The wheel is built
with pip from a copy of the checkout (the build leaves ``build/`` and ``*.egg-info`` where it
runs), without build isolation and without the index (the ``test`` extra brings setuptools).
What an installed wheel does is ``tox -e installed``'s part (``tests/check_installed.py``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"eaglefuzz": "eaglefuzz", "harness": "eaglefuzz/harness", "kernels": "eaglefuzz/kernels",
            "oracles": "eaglefuzz/oracles"}
"""The checkout's folders of Python code, and where the wheel keeps them (eaglefuzz/__init__.py)."""
DATA = {"corpus": ("eaglefuzz/corpus", "*.json")}
"""Data the code reads at run time (harness/core/paths.py), where the wheel keeps it, and which files."""
NOT_SOURCE = (".git", ".tox", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".venv",
              ".whl", ".device", ".eaglefuzz", "eaglefuzz-findings")


def expected_members() -> set[str]:
    """The wheel's members that the checkout's files call for: every ``.py`` file under the
    package folders (a folder without ``__init__.py`` included: its modules would be missing)
    and every data file."""
    out = set()
    for folder, (prefix, pattern) in {**{f: (p, "*.py") for f, p in PACKAGES.items()}, **DATA}.items():
        for f in (ROOT / folder).rglob(pattern):
            if "__pycache__" not in f.parts and f.is_file():
                out.add(f"{prefix}/{f.relative_to(ROOT / folder).as_posix()}")
    return out


def by_folder(names: set[str]) -> str:
    """``names`` counted by folder: ``eaglefuzz/harness/device/ (7 files: base.py, ...)``."""
    folders: dict[str, list[str]] = {}
    for n in sorted(names):
        folder, _, file = n.rpartition("/")
        folders.setdefault(folder, []).append(file)
    return "; ".join(f"{d}/ ({len(fs)} file{'s' * (len(fs) > 1)}: {', '.join(fs[:3])}{', ...' * (len(fs) > 3)})"
                     for d, fs in folders.items())


def build_wheel(tmp: Path) -> Path:
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE), symlinks=True)
    out = tmp / "wheel"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "--quiet", "--disable-pip-version-check", "-w", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"pip wheel failed:\n{proc.stdout}\n{proc.stderr}"
    (wheel,) = out.glob("eaglefuzz-*.whl")
    return wheel


def test_wheel_holds_the_checkout(tmp_path: Path) -> None:
    with zipfile.ZipFile(build_wheel(tmp_path)) as z:
        members = {n for n in z.namelist() if not n.split("/")[0].endswith(".dist-info")}
        entry_points = next(z.read(n).decode() for n in z.namelist() if n.endswith(".dist-info/entry_points.txt"))
    expected = expected_members()
    assert "eaglefuzz/harness/checking/device_mode/engine.py" in expected and "eaglefuzz/harness/targetkit/base.py" in expected
    assert any(m.startswith("eaglefuzz/corpus/") for m in expected)
    assert not expected - members, f"missing from the wheel: {by_folder(expected - members)}"
    assert not members - expected, f"in the wheel, not the checkout's packages: {by_folder(members - expected)}"
    assert "eaglefuzz = eaglefuzz.harness.cli:main" in entry_points
    assert "eaglefuzz.harness.pytest_plugin = eaglefuzz.harness.pytest_plugin" in entry_points
