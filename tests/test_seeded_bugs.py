"""The harness catches bugs: every seeded bug in ``tests/seeded_bugs/`` must be found.

Each file there is an altered copy of one production kernel with one realistic bug (its
docstring's first line says which), or a port (docstring starting with ``PORT:``) that is
correct and must pass. Each file is one test item, loaded as a ``--kernels`` file would be.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from eaglefuzz.harness.case import Case
from eaglefuzz.harness.fuzz import fuzz_target
from eaglefuzz.harness.impls import load_implementations
from eaglefuzz.harness.strategies import derive_seed
from eaglefuzz.harness.targets import TARGETS

SEEDED = Path(__file__).parent / "seeded_bugs"
FILES = sorted(SEEDED.glob("*.py"))
BUG_EXAMPLES = 200
PORT_EXAMPLES = 40

pytestmark = [
    pytest.mark.kernel,
    # Hypothesis warns when it formats a large failing case; the findings are what we check.
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]


def first_doc_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def is_port(path: Path) -> bool:
    return first_doc_line(path).startswith("PORT:")


def overridden(path: Path):
    """The implementations with ``path`` loaded, and the target names that ``path`` defines."""
    impls = load_implementations(path, TARGETS)
    names = [n for n in sorted(TARGETS) if impls.origin[n] == str(path)]
    assert names, f"{path.name} defines none of the targets"
    return impls, names


def test_seeded_bugs_present():
    bugs = [p for p in FILES if not is_port(p)]
    per_kernel = {n: 0 for n in TARGETS}
    for p in bugs:
        for n in overridden(p)[1]:
            per_kernel[n] += 1
    assert len(bugs) >= 13
    assert per_kernel["copy_and_expand_eagle_inputs_kernel"] >= 6
    assert per_kernel["eagle_prepare_inputs_padded_kernel"] >= 3
    assert per_kernel["eagle_prepare_next_token_padded_kernel"] >= 4
    assert all(first_doc_line(p) for p in FILES), "every seeded file states its bug or port"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_seeded_file(path, backend, scale, fuzz_seed, warm_oracles):
    impls, names = overridden(path)
    line = first_doc_line(path)
    if is_port(path):
        for name in names:
            stats = fuzz_target(
                name, impls, backend.device, scale,
                seed=derive_seed(fuzz_seed, path.stem), examples=PORT_EXAMPLES, shrink=False,
            )
            if stats.findings:
                pytest.fail(f"the port {path.name} fails:\n{stats.findings[0].report()}")
            assert stats.examples >= PORT_EXAMPLES
        return
    assert len(names) == 1, f"a seeded bug alters one kernel; {path.name} defines {names}"
    stats = fuzz_target(
        names[0], impls, backend.device, scale,
        seed=derive_seed(fuzz_seed, path.stem), examples=BUG_EXAMPLES, shrink=False,
    )
    if not stats.findings:
        pytest.fail(
            f"seeded bug not found in {stats.examples} examples: {line} ({path.name}); "
            f"features seen: {', '.join(sorted(stats.features))}"
        )
    finding = stats.findings[0]
    assert finding.kind in ("difference", "crash"), finding.report()
    assert finding.origin == str(path)


def requests_of(case: Case) -> int:
    if "num_reqs" in case.scalars:
        return int(case.scalars["num_reqs"])
    return len(case.arrays["query_end_loc"])


# (bug file stem, a word of the region the shrunk report must name)
SHRUNK = [
    ("ce_in_bounds_off_by_one", "guard band"),
    ("nt_vocab_size_inclusive", "kept request"),
]


@pytest.mark.parametrize(("stem", "region"), SHRUNK, ids=[s for s, _ in SHRUNK])
def test_shrunk_reproducer_is_small(stem, region, backend, scale, fuzz_seed, warm_oracles):
    path = SEEDED / f"{stem}.py"
    impls, (name,) = overridden(path)
    stats = fuzz_target(
        name, impls, backend.device, scale,
        seed=derive_seed(fuzz_seed, stem, "shrink"), examples=BUG_EXAMPLES, shrink=True,
    )
    assert stats.findings, f"seeded bug not found: {first_doc_line(path)}"
    finding = stats.findings[0]
    case = finding.case
    assert requests_of(case) <= 2, case
    token_arrays = {n: a for n, a in case.arrays.items() if "token_ids" in n}
    assert token_arrays
    assert all(a.size < 10 for a in token_arrays.values()), case
    report = finding.report()
    first = finding.outcome.differences[0]
    assert first.array in report
    assert region in report
    assert "assert_case(Case(" in report
