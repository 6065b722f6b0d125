"""Fixtures of the test suite; the harness's own plugin supplies the rest."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest_plugins = ["eaglefuzz.harness.pytest_plugin"]


def _load_mutants() -> ModuleType:
    path = Path(__file__).with_name("seeded_bugs") / "mutants.py"
    spec = importlib.util.spec_from_file_location("eaglefuzz_seeded_mutants", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


MUTANTS = _load_mutants()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mutant" in metafunc.fixturenames:
        names = [m.name for m in MUTANTS.MUTANTS]
        metafunc.parametrize("mutant", names, ids=names)


@pytest.fixture(scope="session")
def mutants() -> ModuleType:
    """``tests/seeded_bugs/mutants.py``: the seeded bugs as edits of the production code."""
    return MUTANTS


@pytest.fixture(scope="session")
def seeded_bugs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every seeded bug written as a ``--kernels`` file: ``<dir>/<mutant name>.py`` (a mutant
    of a vLLM release module that is not on this machine is left out)."""
    d = tmp_path_factory.mktemp("seeded_bugs")
    for m in MUTANTS.MUTANTS:
        try:
            MUTANTS.write(m, d)
        except MUTANTS.ModuleUnavailable:
            pass  # a release's module not on this machine: its mutants' tests skip, saying why
    return d
