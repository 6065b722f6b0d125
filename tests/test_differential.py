"""The heart of eaglefuzz: every target fuzzed against its oracles, per target and part.

Each (target, part) pair is its own test item so ``pytest -n auto`` spreads them; each part
explores with its own Hypothesis seed, so parts do not repeat each other's cases, and checks
its share of the profile's examples (``ci``: 60 per target in all). A target the bundled copy
lacks is vLLM's pinned release's (``subject``, tests/conftest.py): CI tests every target.
"""

from __future__ import annotations

import pytest
from hypothesis import given, seed, settings

from eaglefuzz.harness.checking.check import DifferenceFound, check_case
from eaglefuzz.harness.checking.fuzz import shrink_finding
from eaglefuzz.harness.generation.strategies import derive_seed
from eaglefuzz.harness.targets import TARGETS

PARTS = 2


@pytest.mark.kernel
@pytest.mark.parametrize("part", range(PARTS))
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_matches_oracles(name, part, subject, backend, scale, warm_oracles, fuzz_seed, journal, finding_sink):
    impls = subject(name)
    target = TARGETS[name]

    @settings(max_examples=max(1, settings.default.max_examples // PARTS))
    @seed(derive_seed(fuzz_seed, name, part))
    @given(target.strategy(scale))
    def run(case):
        finding = check_case(case, impls, backend.device, journal)
        if finding is not None:
            finding_sink.keep(finding)
            raise DifferenceFound(finding)

    try:
        run()
    except DifferenceFound as exc:  # Hypothesis's minimum, then the target's own shrink moves
        raise DifferenceFound(shrink_finding(exc.finding, impls, backend.device, journal=journal)) from None
