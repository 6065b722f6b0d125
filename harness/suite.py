"""eaglefuzz's ready-made test suite: what ``pytest --kernels PATH -n auto`` runs anywhere.

Collected by the plugin when pytest is given a source option and no test path (see
:mod:`.pytest_plugin`): every target the source defines is fuzzed in a few parts per tier (one
item each, so ``-n auto`` spreads them: the production tier's, then the extended tier's unless
``--eaglefuzz-domain production``), and every case of the regression corpus of those targets is
replayed (with the findings saved beside it: ``paths.default_corpora``). A part runs what
``eaglefuzz fuzz`` runs of that tier (:func:`~.checking.fuzz.fuzz_target`: the same seeds,
chunks, tour of production extremes and shrinking budget), taking its share of the chunks.
Findings are shrunk, reported and saved like those of ``eaglefuzz fuzz``; an item of the
extended tier fails on an edge divergence, which its report says is not a contract violation.
Imports are absolute: pytest may import this file under another module name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import Phase, settings

from eaglefuzz.harness.checking.check import DifferenceFound, check_case
from eaglefuzz.harness.checking.corpus import load_entry
from eaglefuzz.harness.checking.domains import tiers_of
from eaglefuzz.harness.checking.fuzz import Stats, fuzz_target
from eaglefuzz.harness.core.paths import default_corpora
from eaglefuzz.harness.pytest_plugin import _IMPLS
from eaglefuzz.harness.targets import TARGETS

PARTS = 2


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:

    impls = metafunc.config.stash[_IMPLS]
    names = [n for n in TARGETS if n in impls]
    if "target_name" in metafunc.fixturenames:
        metafunc.parametrize("target_name", names)
    if "tier" in metafunc.fixturenames:
        metafunc.parametrize("tier", tiers_of(metafunc.config.getoption("eaglefuzz_domain")))
    if "corpus_file" in metafunc.fixturenames:
        # a case in two corpora (the same name) is one item, the regression corpus's file
        files = {f"{n}/{f.stem}": f for d in reversed(default_corpora()) for n in names
                 for f in sorted((d / n).glob("*.json"))}
        ids = sorted(files, key=lambda i: (names.index(i.split("/")[0]), i))
        metafunc.parametrize("corpus_file", [files[i] for i in ids], ids=ids)


@pytest.mark.parametrize("part", range(PARTS))
def test_fuzz(target_name: str, tier: str, part: int, impls, backend, scale, warm_oracles, fuzz_seed, journal,
              finding_sink) -> None:
    """Fuzz one tier of one target against its oracles as ``eaglefuzz fuzz`` does with the
    seed ``--eaglefuzz-seed``: part ``part`` runs the chunks ``part, part + PARTS, ...`` of that
    tier's run (so the parts of the production tier together check chunks 0 and 1, where the
    tour of production extremes runs, and the chunks after them), the Hypothesis profile's
    ``max_examples`` examples (``ci``: 60); a profile without Hypothesis's shrink phase
    (``quick``) reports a finding as first met."""
    current = settings.default

    def keep(stats: Stats) -> None:
        if stats.unshrunk is not None:
            finding_sink.keep(stats.unshrunk)

    stats = fuzz_target(
        target_name, impls, backend.device, scale, seed=fuzz_seed, examples=current.max_examples,
        shrink=Phase.shrink in current.phases, on_progress=keep, chunk_offset=part, chunk_step=PARTS,
        journal=journal, tiers=(tier,),
    )
    if stats.findings:
        raise DifferenceFound(stats.findings[0])


def test_replay(corpus_file: Path, impls, backend, journal) -> None:
    """Replay one case of the regression corpus."""
    entry = load_entry(corpus_file)
    finding = check_case(entry.case, impls, backend.device, journal, domain=entry.tier)
    if finding is not None:
        pytest.fail(finding.report(saved=corpus_file), pytrace=False)
