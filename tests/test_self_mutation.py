"""Who tests the tester: every mutation of eaglefuzz's own code in the catalogue turns a named test red.

``tests/harness_mutants.py`` holds the catalogue (oracle arithmetic in one oracle and in both,
record wiring, the comparison's first and last elements, guard bands, sentinels, dtypes, generator
branches, the shrinker), ``tests/self_mutation.py`` the machinery: each mutant is applied to a
copy of the checkout and its named tests are run there in a child pytest; it is caught when each
of them fails (as its ``expect`` says). The checkout itself is never written.

The default run checks that every mutant still applies (its text occurs once: a refactor that
moves the code fails here, naming the mutant to update) and runs the fast subset (``fast=True``);
``EAGLEFUZZ_MUTANTS=all`` (``tox -e mutants``) runs the whole catalogue. A mutant that survives is
fixed by strengthening the tests, never by dropping it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections import Counter
from pathlib import Path

import pytest


def _load(name: str, file: str):  # noqa: ANN202
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(file))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SM = _load("eaglefuzz_self_mutation", "self_mutation.py")
CATALOGUE = _load("eaglefuzz_harness_mutants", "harness_mutants.py").CATALOGUE
BY_NAME = {m.name: m for m in CATALOGUE}
ALL = os.environ.get("EAGLEFUZZ_MUTANTS", "") == "all"
RUN = [m.name for m in CATALOGUE if ALL or m.fast]


@pytest.mark.parametrize("name", list(BY_NAME))
def test_the_mutation_still_applies(name):
    """Each edit's text occurs once in its file, the result parses, the named tests exist:
    a refactor that moves the code fails here (update the mutant), never skips it."""
    problems = SM.problems(BY_NAME[name])
    assert not problems, "\n".join(problems)


def test_the_catalogue_holds_every_kind_and_ci_runs_each():
    names = [m.name for m in CATALOGUE]
    assert len(names) == len(set(names)), "mutant names must be unique"
    kinds = Counter(m.kind for m in CATALOGUE)
    fast = Counter(m.kind for m in CATALOGUE if m.fast)
    assert set(kinds) == set(SM.KINDS), f"kinds without a mutant: {sorted(set(SM.KINDS) - set(kinds))}"
    assert set(fast) == set(SM.KINDS), f"kinds without a mutant in CI's fast subset: {sorted(set(SM.KINDS) - set(fast))}"
    for m in CATALOGUE:
        assert m.tests and m.why, m.name


@pytest.fixture(scope="session")
def mutant_copy(tmp_path_factory) -> Path:
    """This process's copy of the checkout (one per xdist worker, reused by its mutants in turn)."""
    return SM.stage(tmp_path_factory.mktemp("harness-mutants"))


@pytest.mark.parametrize("name", RUN)
def test_the_mutation_is_caught(name, mutant_copy):
    """Applied to the copy (never to the checkout, whose files stay as they were; the child's
    probe stops it unless ``import eaglefuzz`` is the copy), the mutant turns its tests red."""
    m = BY_NAME[name]
    assert SM.ROOT not in mutant_copy.parents and mutant_copy != SM.ROOT
    before = {f: (SM.ROOT / f).read_bytes() for f in SM.files(m)}
    result = SM.run(m, mutant_copy)
    assert {f: (SM.ROOT / f).read_bytes() for f in SM.files(m)} == before, "the checkout was written"
    assert {f: (mutant_copy / f).read_bytes() for f in SM.files(m)} == before, "the copy was not restored"
    assert result.caught, (f"harness mutant {name} ({m.kind}: {m.why}) survived: {result.detail}\n"
                           f"named tests: {', '.join(m.tests)}\n--- child pytest output (tail) ---\n{result.output[-6000:]}")


if ALL:  # the whole catalogue only (EAGLEFUZZ_MUTANTS=all, tox -e mutants)

    def test_the_unmutated_copy_passes_every_named_test(mutant_copy):
        """The baseline: on the copy as it is, every named test passes (a mutant is caught by
        its defect, not by a test that fails anyway)."""
        tests = sorted({t for m in CATALOGUE for t in m.tests})
        result = SM.run_tests(mutant_copy, tuple(tests), timeout=590)
        assert not result.failed and " passed" in result.output, result.output[-6000:]
