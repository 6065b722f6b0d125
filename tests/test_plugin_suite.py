"""``pytest --kernels FILE``'s own suite (harness/suite.py) runs what ``eaglefuzz fuzz`` runs.

Its fuzz items take their share of the CLI's chunks, with the CLI's seeds, so they check the
CLI's cases, its tour of production extremes (the thousand-request batches of chunk 1) among
them. No kernel runs here: the check is replaced by one that records the cases.
"""

from __future__ import annotations

import pytest
from hypothesis import settings

from eaglefuzz.harness import suite
from eaglefuzz.harness.checking import fuzz
from eaglefuzz.harness.checking.corpus import case_hash
from eaglefuzz.harness.checking.fuzz import CHUNK, fuzz_target, tour
from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE
from eaglefuzz.harness.sources import Implementations

ES = "eagle_step_slot_mapping_metadata_kernel"
"""Its tour: a shape in chunk 0 and a batch of 1025-1088 requests at the start of chunk 1."""


class _Sink:
    def keep(self, finding) -> None:  # noqa: ANN001
        raise AssertionError("no finding expected")


@pytest.fixture
def checked(monkeypatch):
    """The hashes of the cases checked, in order; every check passes."""
    seen: list[str] = []

    def record(case, *args, **kwargs):  # noqa: ANN001, ANN202
        seen.append(case_hash(case))

    monkeypatch.setattr(fuzz, "check_case", record)
    monkeypatch.setattr(suite, "check_case", record)
    return seen


@pytest.fixture
def one_chunk_per_part():
    """A profile of one chunk per part (the suite's items take the profile's ``max_examples``):
    the parts then check chunks 0 and 1."""
    before = settings.get_current_profile_name()
    settings.register_profile("eaglefuzz-test-one-chunk", settings(max_examples=CHUNK))
    settings.load_profile("eaglefuzz-test-one-chunk")
    yield
    settings.load_profile(before)


def test_the_suites_fuzz_items_check_the_clis_cases_and_tour(checked, one_chunk_per_part):
    """The first two chunks of each tier of ``eaglefuzz fuzz`` (the tour of production extremes
    opens the production tier's, the thousand-request shapes at the start of chunk 1; then the
    extended tier's) are among the cases the suite's items check, an item per tier and part."""
    impls = Implementations({}, {})
    seed = 7
    fuzz_target(ES, impls, "cpu", INTERPRETER_SCALE, seed=seed, examples=2 * CHUNK, domain="extended")
    cli = list(checked)
    checked.clear()
    backend = type("Backend", (), {"device": "cpu"})()
    for tier in ("production", "extended"):
        for part in range(suite.PARTS):
            suite.test_fuzz(ES, tier, part, impls, backend, INTERPRETER_SCALE, None, seed, None, _Sink())
    items = set(checked)
    assert len(cli) == 4 * CHUNK and len(checked) == 4 * CHUNK
    missing = [i for i, h in enumerate(cli) if h not in items]
    assert not missing, f"the suite's items skip the CLI's examples {missing}"
    assert {case_hash(c) for c in tour(ES, INTERPRETER_SCALE, seed)} <= items
