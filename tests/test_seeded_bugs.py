"""The harness catches bugs: every seeded bug of ``tests/seeded_bugs/mutants.py`` must be found.

Each mutant is written as an altered copy of one production function with one realistic bug
and loaded as a ``--kernels`` file would be; each is one test item. The port
(``tests/seeded_bugs/port_prepare_inputs_numpy.py``) is correct and must pass.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from eaglefuzz.harness.case import Case
from eaglefuzz.harness.fuzz import fuzz_target
from eaglefuzz.harness.sources import implementations_for
from eaglefuzz.harness.sources.file import FileSource
from eaglefuzz.harness.strategies import derive_seed
from eaglefuzz.harness.targets import TARGETS

PORT = Path(__file__).parent / "seeded_bugs" / "port_prepare_inputs_numpy.py"
BUG_EXAMPLES = 200
PORT_EXAMPLES = 40
DEFAULT_EXAMPLES = 100
"""What ``eaglefuzz fuzz`` runs by default: a bug that needs a production extreme must fall within it."""

pytestmark = [
    pytest.mark.kernel,
    # Hypothesis warns when it formats a large failing case; the findings are what we check.
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]


def first_doc_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def overridden(path: Path):
    """The implementations with ``path`` loaded, and the target names that ``path`` defines."""
    impls = implementations_for(FileSource(path))
    names = sorted(impls)
    assert names, f"{path.name} defines none of the targets"
    return impls, names


def test_seeded_bugs_present(mutants):
    per_target = {n: 0 for n in TARGETS}
    for m in mutants.MUTANTS:
        per_target[m.target] += 1
        assert m.bug and m.edits, m.name
    assert len(mutants.MUTANTS) >= 13
    assert per_target["copy_and_expand_eagle_inputs_kernel"] >= 6
    assert per_target["eagle_prepare_inputs_padded_kernel"] >= 3
    assert per_target["eagle_prepare_next_token_padded_kernel"] >= 4
    assert per_target["extend_all_queries_by_N"] >= 3
    assert per_target["create_vllm_config_for_draft_model"] >= 3
    assert per_target["copy_and_expand_dflash_inputs_kernel"] >= 5
    assert per_target["eagle_step_slot_mapping_metadata_kernel"] >= 5
    assert per_target["compute_new_slot_mapping"] >= 5
    assert per_target["update_num_computed_tokens_for_batch_change"] >= 5


def test_extreme_bugs_present(mutants):
    """At least ten seeded bugs need a production extreme, ten different ones, each a declared
    extreme of its target."""
    extreme = [m for m in mutants.MUTANTS if m.extreme]
    assert len(extreme) >= 10
    assert len({(m.target, m.extreme) for m in extreme}) >= 10
    for m in extreme:
        assert m.extreme in TARGETS[m.target].extremes, (m.name, m.extreme)


def test_seeded_bug_is_found(mutant, mutants, seeded_bugs_dir, backend, scale, fuzz_seed, warm_oracles):
    path = seeded_bugs_dir / f"{mutant}.py"
    if not path.exists():
        m = mutants.BY_NAME[mutant]
        try:
            mutants.module_file(m.module)
        except mutants.ModuleUnavailable as exc:
            pytest.skip(f"{mutant}: {exc}")
    seed = derive_seed(fuzz_seed, mutant)
    if backend.compiled:
        # A device-side assert leaves the CUDA context unusable for the rest of its process.
        found = _fuzz_in_child(path, seed)
    else:
        impls, names = overridden(path)
        stats = fuzz_target(names[0], impls, backend.device, scale, seed=seed, examples=BUG_EXAMPLES, shrink=False)
        f = stats.findings[0] if stats.findings else None
        found = {
            "names": names, "examples": stats.examples, "features": sorted(stats.features),
            "finding": f and {"kind": f.kind, "origin_file": f.origin.file, "report": f.report(),
                              "features": sorted(TARGETS[names[0]].features_of(f.case))},
        }
    assert found["names"] == [mutants.BY_NAME[mutant].target]
    finding = found["finding"]
    if finding is None:
        pytest.fail(
            f"seeded bug not found in {found['examples']} examples: {first_doc_line(path)} ({mutant}); "
            f"features seen: {', '.join(found['features'])}"
        )
    assert finding["kind"] in ("difference", "crash"), finding["report"]
    assert finding["origin_file"] == str(path.resolve())
    extreme = mutants.BY_NAME[mutant].extreme
    if extreme:  # caught by a default run, on a case at that extreme
        assert found["examples"] <= DEFAULT_EXAMPLES, f"{mutant} found only after {found['examples']} examples"
        assert extreme in finding["features"], finding["report"]


def _fuzz_in_child(path: Path, seed: int) -> dict:
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "seeded_bugs" / "fuzz_one.py"), str(path), str(seed), str(BUG_EXAMPLES)],
        capture_output=True, text=True, env=env, timeout=900, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_port_passes(backend, scale, fuzz_seed, warm_oracles):
    assert first_doc_line(PORT).startswith("PORT:")
    impls, names = overridden(PORT)
    for name in names:
        stats = fuzz_target(
            name, impls, backend.device, scale,
            seed=derive_seed(fuzz_seed, PORT.stem), examples=PORT_EXAMPLES, shrink=False,
        )
        if stats.findings:
            pytest.fail(f"the port {PORT.name} fails:\n{stats.findings[0].report()}")
        assert stats.examples >= PORT_EXAMPLES


def requests_of(case: Case) -> int:
    if "num_reqs" in case.scalars:
        return int(case.scalars["num_reqs"])
    return len(case.arrays["query_start_loc"]) - 1


# (bug file stem, a word of the region the shrunk report must name)
SHRUNK = [
    ("ce_in_bounds_off_by_one", "guard band"),
    ("nt_vocab_size_inclusive", "kept request"),
]


@pytest.mark.parametrize(("stem", "region"), SHRUNK, ids=[s for s, _ in SHRUNK])
def test_shrunk_reproducer_is_small(stem, region, seeded_bugs_dir, backend, scale, fuzz_seed, warm_oracles):
    path = seeded_bugs_dir / f"{stem}.py"
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


def test_a_bug_that_needs_1025_requests_gets_a_short_reproducer(seeded_bugs_dir, backend, scale, fuzz_seed, warm_oracles):
    """The reproducer of a bug no batch of 1024 requests or fewer shows is at most 30 lines,
    fails on the buggy file and passes on the production copy (the Python target: its checks
    cost milliseconds; tests/test_shrinking.py checks every target's first shrinking check)."""
    from eaglefuzz.harness.check import DifferenceFound

    stem = "extend_arange_capped_at_1025"
    path = seeded_bugs_dir / f"{stem}.py"
    impls, (name,) = overridden(path)
    stats = fuzz_target(name, impls, backend.device, scale, seed=derive_seed(fuzz_seed, stem), examples=DEFAULT_EXAMPLES)
    assert stats.findings, f"seeded bug not found: {first_doc_line(path)}"
    finding = stats.findings[0]
    assert requests_of(finding.case) > 1024
    src = finding.reproducer()
    assert len(src.splitlines()) <= 30 and max(map(len, src.splitlines())) <= 200, src
    source = f", source='file:{path.resolve()}'"
    assert source in src
    with pytest.raises(DifferenceFound):
        exec(compile(src, "reproducer", "exec"), {})
    exec(compile(src.replace(source, ""), "reproducer on the production copy", "exec"), {})


def test_a_stale_mutant_fails_loudly(mutants):
    """A mutant whose text no longer occurs in the production code is an error, not a no-op."""
    stale = mutants.Mutant("stale", "eagle_prepare_inputs_padded_kernel", "gone", (("no such line\n", "x\n"),))
    with pytest.raises(ValueError, match="occurs 0 times"):
        mutants.mutate(stale)
