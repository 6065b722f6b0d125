"""The known-slow list of ``tests/conftest.py`` (which orders the slowest items first) names
tests that exist: a renamed test must not silently drop back to the end of the run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


def test_every_slow_key_names_a_test(pytestconfig: pytest.Config):
    (conftest,) = [p for p in pytestconfig.pluginmanager.get_plugins()
                   if getattr(p, "__file__", None) and Path(p.__file__) == TESTS / "conftest.py"]
    assert conftest.SLOW
    for key in conftest.SLOW:
        file, name = key.split("::")
        func = name.split("[", 1)[0]
        text = (TESTS / file).read_text()
        assert re.search(rf"^def {re.escape(func)}\(", text, re.M), f"conftest.SLOW: {key} names no test"
