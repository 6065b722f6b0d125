"""Oracles pinned by expectations no oracle computed (``tests/pinned_examples.py``).

Every target has hand-worked cases (docs/CONTRACT.md); each runs through ``Target.check`` as a
fuzz run's case does: both oracles through the record's wiring, compared with the hand-worked
outputs (the implementation under test here) by the same comparison, guard bands, sentinels and
dtypes included. An oracle wrong in one place, both oracles wrong the same way, a record that
hands the oracles or the launch the wrong values, or a comparison that misses an element, makes
its case fail.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest

from eaglefuzz.harness.targets import TARGETS


def _load():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("eaglefuzz_pinned_examples", Path(__file__).with_name("pinned_examples.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


PE = _load()
BY_ID = {p.id: p for p in PE.PINNED}
PER_TARGET = 2
"""Fewest hand-worked cases of every target."""


def test_every_target_has_hand_worked_cases():
    counts = Counter(p.case.kernel for p in PE.PINNED)
    few = {n: counts.get(n, 0) for n in TARGETS if counts.get(n, 0) < PER_TARGET}
    assert not few, f"targets with fewer than {PER_TARGET} hand-worked cases: {few}"
    assert len(BY_ID) == len(PE.PINNED), "pinned case ids must be unique"


@pytest.mark.parametrize("pid", list(BY_ID))
def test_pinned(pid):
    p = BY_ID[pid]
    target = TARGETS[p.case.kernel]
    assert target.tier_of(p.case, p.tier) == p.tier, f"a hand-worked case of the {p.tier} tier"
    outcome = target.check(p.case, PE.implementation(p, target), "cpu")
    lines = [d.describe() for d in outcome.oracle_disagreements + outcome.differences]
    assert outcome.ok, (f"{pid}: the oracles, through the record, do not give the hand-worked outputs "
                        f"(docs/CONTRACT.md):\n{p.work}\n" + (f"crash: {outcome.crash}\n" if outcome.crash else "")
                        + "\n".join(lines[:20]))


def test_a_failing_tests_finding_never_lands_in_the_tracked_corpus(pytestconfig):
    """This suite saves what a failing test finds (its finding, with replay commands) to the
    run's own folder (tests/conftest.py), never to corpus/: a harness bug reported as the
    kernel's contract violation is not a regression case."""
    from eaglefuzz.harness.core.paths import CORPUS_DIR
    from eaglefuzz.harness.sources import findings_dir
    from eaglefuzz.harness.sources.bundled import BundledSource

    where = findings_dir(BundledSource(), pytestconfig.getoption("eaglefuzz_corpus")).resolve()
    assert where != CORPUS_DIR.resolve() and CORPUS_DIR.resolve() not in where.parents, where
