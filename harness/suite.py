"""eaglefuzz's ready-made test suite: what ``pytest --kernels PATH -n auto`` runs anywhere.

Collected by the plugin when pytest is given a source option and no test path (see
:mod:`.pytest_plugin`): every target the source defines is fuzzed in a few parts (one item
each, so ``-n auto`` spreads them), and every case of the regression corpus of those targets is
replayed (with the findings saved beside it: ``paths.default_corpora``). Findings are shrunk,
reported and saved like those of ``eaglefuzz fuzz``. Imports are absolute: pytest may import
this file under another module name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, seed

from eaglefuzz.harness.check import DifferenceFound, check_case
from eaglefuzz.harness.corpus import load_entry
from eaglefuzz.harness.fuzz import shrink_finding
from eaglefuzz.harness.paths import default_corpora
from eaglefuzz.harness.strategies import derive_seed
from eaglefuzz.harness.targets import TARGETS

PARTS = 2


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    from eaglefuzz.harness.pytest_plugin import _IMPLS

    impls = metafunc.config.stash[_IMPLS]
    names = [n for n in TARGETS if n in impls]
    if "target_name" in metafunc.fixturenames:
        metafunc.parametrize("target_name", names)
    if "corpus_file" in metafunc.fixturenames:
        # a case in two corpora (the same name) is one item, the regression corpus's file
        files = {f"{n}/{f.stem}": f for d in reversed(default_corpora()) for n in names
                 for f in sorted((d / n).glob("*.json"))}
        ids = sorted(files, key=lambda i: (names.index(i.split("/")[0]), i))
        metafunc.parametrize("corpus_file", [files[i] for i in ids], ids=ids)


@pytest.mark.parametrize("part", range(PARTS))
def test_fuzz(target_name: str, part: int, impls, backend, scale, warm_oracles, fuzz_seed, journal,
              finding_sink) -> None:
    """Fuzz one target against its oracles (Hypothesis, then the target's own shrink moves)."""
    target = TARGETS[target_name]

    @seed(derive_seed(fuzz_seed, target_name, part))
    @given(target.strategy(scale))
    def run(case):  # noqa: ANN001
        finding = check_case(case, impls, backend.device, journal)
        if finding is not None:
            finding_sink.keep(finding)
            raise DifferenceFound(finding)

    try:
        run()
    except DifferenceFound as exc:
        raise DifferenceFound(shrink_finding(exc.finding, impls, backend.device, journal=journal)) from None


def test_replay(corpus_file: Path, impls, backend, journal) -> None:
    """Replay one case of the regression corpus."""
    entry = load_entry(corpus_file)
    finding = check_case(entry.case, impls, backend.device, journal, domain=entry.tier)
    if finding is not None:
        pytest.fail(finding.report(saved=corpus_file), pytrace=False)
