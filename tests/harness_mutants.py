"""The catalogue of harness mutants: defects of eaglefuzz's own code, each with the tests that catch it.

Each :class:`HarnessMutant` (``tests/self_mutation.py``) edits files of the checkout with
``(file, old, new)`` replacements (each ``old`` a small snippet that occurs exactly once there) and names
the fast tests that must fail while it stands. ``fast=True`` puts it in CI's default run; the
whole catalogue runs in ``tox -e mutants`` (score: benchmarks/RESULTS.md). A mutant that survives
is fixed by strengthening the tests, never by dropping it; one whose text no longer occurs fails
``test_the_mutation_still_applies``: update its snippet to the code as it is now.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("eaglefuzz_self_mutation", Path(__file__).with_name("self_mutation.py"))
_sm = sys.modules.get("eaglefuzz_self_mutation")
if _sm is None:
    _sm = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _sm
    _spec.loader.exec_module(_sm)
HarnessMutant = _sm.HarnessMutant

SHRINK = "tests/test_shrinking.py::test_a_150_request_finding_shrinks_to_its_culprit_in_few_checks"

CATALOGUE: tuple[HarnessMutant, ...] = (
    # -- the shrinker ---------------------------------------------------------------------------
    HarnessMutant(
        "shrinker_keeps_a_passing_case",
        "shrinker",
        (("harness/checking/shrinking.py",
          "        if smaller is not None and failure(smaller) == failure(self.finding):\n"
          "            self.finding = smaller\n",
          "        if smaller is None or failure(smaller) == failure(self.finding):\n"
          "            self.finding = smaller if smaller is not None else replace(self.finding, case=candidate)\n"),),
        (SHRINK,),
        "a shrinking step takes a candidate that passes: the reported minimal case does not fail",
        fast=True,
    ),
    HarnessMutant(
        "shrinker_never_drops_a_request",
        "shrinker",
        (("harness/checking/shrinking.py",
          "        while len(items) >= 2 and not self._spent(deadline):\n",
          "        while len(items) >= 2 and not self._spent(deadline) and False:\n"),),
        (SHRINK,),
        "delta debugging over the requests never drops one: a 150-request finding stays 150 requests",
    ),
)
