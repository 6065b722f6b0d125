"""The harness catches bugs: every seeded bug of ``tests/seeded_bugs/mutants.py`` must be found.

Each mutant is written as an altered copy of one production function with one realistic bug
and loaded as a ``--kernels`` file would be; each is one test item. A finding counts only when
it is real (``catch_problem``): its case passes on the production code and fails on the
mutant, and it is a crash only for a mutant whose bug is one. The port
(``tests/seeded_bugs/port_prepare_inputs_numpy.py``) is correct and must pass.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from eaglefuzz.harness.checking.check import check_case
from eaglefuzz.harness.checking.fuzz import fuzz_target
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.generation.choosers import RngChooser
from eaglefuzz.harness.generation.strategies import derive_seed
from eaglefuzz.harness.sources import implementations_for
from eaglefuzz.harness.sources.file import FileSource
from eaglefuzz.harness.targets import TARGETS, role

PORT = Path(__file__).parent / "seeded_bugs" / "port_prepare_inputs_numpy.py"
BUG_EXAMPLES = 200
PORT_EXAMPLES = 40
DEFAULT_EXAMPLES = 100
"""What ``eaglefuzz fuzz`` runs by default: a bug that needs a production extreme must fall within it."""


def _load_fuzz_one() -> ModuleType:
    path = Path(__file__).with_name("seeded_bugs") / "fuzz_one.py"
    spec = importlib.util.spec_from_file_location("eaglefuzz_seeded_fuzz_one", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


FUZZ_ONE = _load_fuzz_one()
"""``tests/seeded_bugs/fuzz_one.py``: fuzz a mutant and replay its finding (here or in a child)."""

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
    for name in ("rejection_greedy_sample_kernel", "rejection_random_sample_kernel", "expand_kernel",
                 "sample_recovered_tokens_kernel"):  # the rejection sampler's (issue 23: at least 8 each)
        assert per_target[name] >= 8, name
    per_v2_module: dict[str, int] = {}
    for m in mutants.MUTANTS:  # Model Runner V2's (issue 30): at least 6 per vLLM file, at least 2 per kernel
        if TARGETS[m.target].runner == "V2":
            per_v2_module[TARGETS[m.target].module] = per_v2_module.get(TARGETS[m.target].module, 0) + 1
    assert {t.module for t in TARGETS.values() if t.runner == "V2"} == set(per_v2_module)
    assert all(n >= 6 for n in per_v2_module.values()), per_v2_module
    assert all(per_target[n] >= 2 for n, t in TARGETS.items() if t.runner == "V2")


def test_extreme_bugs_present(mutants):
    """At least ten seeded bugs need a production extreme, ten different ones, each a declared
    extreme of its target."""
    extreme = [m for m in mutants.MUTANTS if m.extreme]
    assert len(extreme) >= 10
    assert len({(m.target, m.extreme) for m in extreme}) >= 10
    for m in extreme:
        assert m.extreme in TARGETS[m.target].extremes, (m.name, m.extreme)
    for name in ("eagle_step_slot_mapping_metadata_kernel", "compute_new_slot_mapping",
                 "update_num_computed_tokens_for_batch_change", "copy_and_expand_dflash_inputs_kernel"):
        assert len({m.extreme for m in extreme if m.target == name}) >= 2, name


def test_seeded_bug_is_found(mutant, mutants, seeded_bugs_dir, backend, scale, fuzz_seed, warm_oracles, tmp_path,
                             needs):
    """A seeded bug is caught when the fuzzer's finding is a real one (``catch_problem``): a
    difference (a crash only if the mutant declares its bug one), whose case passes on the
    production code the mutant edits and fails, the same way, on the mutant."""
    m = mutants.BY_NAME[mutant]
    if m.exact_division and backend.compiled:
        pytest.skip("compiled: the interpreter is not used, and a compiled division may decide the inputs of "
                    f"{mutant} either way (docs/CONTRACT.md §11.3)")
    if m.racy and backend.compiled:
        pytest.skip(f"compiled: the interpreter is not used, and the programs of {mutant} race for the elements "
                    "they share on a GPU (a finding need not replay the same way)")
    path = seeded_bugs_dir / f"{mutant}.py"
    if not path.exists():
        try:
            mutants.module_file(m.module)
        except mutants.ModuleUnavailable as exc:
            needs.unavailable("offline", f"{mutant}: {exc}")
    if m.scale:
        hunt_at_scale(m, path, backend, needs)
        return
    found = hunt(m, path, derive_seed(fuzz_seed, mutant), BUG_EXAMPLES, backend, scale, tmp_path)
    problem = catch_problem(m, path, found)
    if problem:
        pytest.fail(problem, pytrace=False)


def hunt_at_scale(m, path: Path, backend, needs) -> None:
    """A scale bug (``Mutant.scale``: an int32 row offset that wraps past ``2**31`` elements, the
    pre-fix form of vLLM #46560 and #47383) shows only on tables of 8 GiB and more: device mode
    on a GPU with the memory for them draws its target's scale cases (every eighth example) and
    must find it there; anywhere else the test says it needs such a GPU."""
    from eaglefuzz.harness.checking.device_mode.engine import (
        SCALE_AT,
        SCALE_EVERY,
        device_fuzz_target,
    )
    from eaglefuzz.harness.targetkit.scale import unreachable

    assert m.scale in TARGETS[m.target].scale_features, (m.name, m.scale)
    why = unreachable("device", backend.device)
    if why is not None:
        needs.unavailable("gpu", f"{m.name} needs a table past 2**31 elements (--mode device): {why}")
    from eaglefuzz.harness.checking.device_mode import device_targets

    if not device_targets()[m.target].scale:
        pytest.skip(f"{m.name}: {m.target}'s device role draws no production-scale case yet (docs/CONTRACT.md "
                    "§28-§35; benchmarks/RESULTS.md says what a GPU run of one needs)")
    impls = implementations_for(FileSource(path), [m.target])
    stats = device_fuzz_target(m.target, impls, backend.device, examples=2, seed=0, chunk_offset=SCALE_AT,
                               chunk_step=SCALE_EVERY, cross_check_share=0.0)
    assert stats.findings, f"scale bug {m.name} not found by device mode's scale cases"


def hunt(m, path: Path, seed: int, examples: int, backend, scale, tmp: Path) -> dict:
    """``fuzz_one.hunt`` of mutant ``m`` (written at ``path``): in this process under the
    interpreter; compiled, in child processes (a device-side assert leaves the CUDA context
    unusable for the rest of its process), with a fresh one for whatever a fatal crash left
    undone (the rest of the probe, the replay of the finding)."""
    probe_from = 0 if m.crash else FUZZ_ONE.NO_PROBE
    if not backend.compiled:
        return FUZZ_ONE.hunt(path, m.module, seed, examples, backend.device, scale, probe_from, m.tier)
    fatal = []
    while True:
        found = _child("hunt", path, m.module, seed, examples, "--probe-from", probe_from, "--domain", m.tier)
        probe = found["probe"]
        if not (probe and "fatal" in probe):
            break
        fatal.append(f"seed {probe['fatal']}: {probe['crash']}")
        probe_from = probe["fatal"] + 1
    if probe and probe["ran"] is None:
        probe["crashes"] = fatal + probe["crashes"]
    if found["finding"] is not None and found["replay"] is None:  # the finding's crash was fatal
        case_file = tmp / "finding.json"
        case_file.write_text(found["case"])
        found["replay"] = _child("replay", path, m.module, case_file)
    return found


def _child(*args) -> dict:
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, FUZZ_ONE.__file__, *map(str, args), "--backend", "cuda"],
        capture_output=True, text=True, env=env, timeout=900, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def catch_problem(m, path: Path, found: dict) -> str | None:
    """Why ``found`` (a :func:`hunt` result) is no catch of seeded bug ``m``; ``None`` when it is.

    A catch is a finding of the fuzzer on the mutant at ``path`` (within the default run's
    examples, on a case with ``m.extreme``, for a bug that needs an extreme) that is a
    ``difference``, or a ``crash`` when ``m.crash`` says the bug is one (an ``edge divergence``
    of an extended run for a bug of the extended tier, ``m.tier``); whose case passes on
    the production code ``m.module`` names; and whose case, replayed, fails on the mutant the
    same way. A mutant that declares a crash must also run (without raising) on one of the
    small probe cases: one that raises on every case is broken, not a crash bug.
    """
    if found["names"] != [m.target]:
        return f"{m.name}: {path.name} defines {', '.join(found['names'])}, not {m.target}"
    f = found["finding"]
    if f is None:
        return (f"seeded bug not found in {found['examples']} examples: {first_doc_line(path)} ({m.name}); "
                f"features seen: {', '.join(found['features'])}")
    if f["origin_file"] != str(path.resolve()):
        return f"{m.name}: the finding is about {f['origin_file']}, not the mutant {path}"
    if m.tier == "extended":
        if f["kind"] != "edge divergence":
            return (f"{m.name}: a bug of the extended tier must be caught as an edge divergence (it is identical to "
                    f"production on the production tier), not as a {f['kind']}:\n{f['report']}")
    elif f["kind"] == "crash" and not m.crash:
        return (f"{m.name}: caught only by a crash ({f['crash']}), and its bug is not declared a crash: a mutant "
                f"that raises where it should give wrong values is broken, not caught. Make its edit run and "
                f"give wrong values, or declare crash=True if the bug itself is a crash.\n{f['report']}")
    if m.tier != "extended" and f["kind"] not in ("difference", "crash"):
        return f"{m.name}: the finding is a {f['kind']}, not a difference:\n{f['report']}"
    probe = found["probe"]
    if m.crash and (probe is None or probe["ran"] is None):
        crashes = "\n  ".join((probe or {}).get("crashes", ["(not probed)"]))
        return (f"{m.name} declares crash=True but raises on every one of the {FUZZ_ONE.PROBE_CASES} small probe "
                f"cases: a broken mutant, not a crash bug (a crash bug raises only where its bug shows):\n  {crashes}")
    replay = found["replay"]
    if replay["production"] is not None:
        return (f"{m.name}: the finding's case fails on the production code too ({m.module}), so it is not a "
                f"catch of the seeded bug:\n{replay['production']['report']}")
    if replay["mutant"] is None:
        return (f"{m.name}: the finding's case passes on the mutant when replayed: the finding does not "
                f"reproduce, so it is not a catch:\n{f['report']}")
    if replay["mutant"]["kind"] != f["kind"]:
        return (f"{m.name}: the finding was a {f['kind']}, its case replays on the mutant as a "
                f"{replay['mutant']['kind']}:\n{replay['mutant']['report']}")
    if m.extreme:  # caught by a default run, on a case at that extreme
        if found["examples"] > DEFAULT_EXAMPLES:
            return f"{m.name} found only after {found['examples']} examples (a default run has {DEFAULT_EXAMPLES})"
        if m.extreme not in f["features"]:
            return f"{m.name}: found on a case without its extreme {m.extreme}:\n{f['report']}"
    return None


ORDINARY_CASES = 3
"""Ordinary production cases (no tour shape) on which a bug that needs an extreme must hide."""

EVERY_ORDINARY_CASE_AT_ITS_EXTREME = {
    "ce_positions_via_float32",
}
"""The bugs whose extreme every ordinary production case of their target reaches today at the
interpreter's scale (so none can show that the bug hides without it): the test checks that they
still do there, so that the entry goes once the generator changes. At a compiled run's larger
scale some ordinary cases lack it, and each of those must hide the bug (checked above)."""


def test_an_extreme_bug_hides_from_ordinary_cases(extreme_mutant, mutants, seeded_bugs_dir, backend, scale, fuzz_seed,
                                                  warm_oracles, needs):
    """A seeded bug that declares it needs a production extreme (``Mutant.extreme``) does: on
    ordinary production cases (the target's ``cases.body``, which never draws a tour shape) at
    the run's scale, without that extreme, the mutant gives the production answer. So what
    catches it (tests above) is the tour of production extremes, not any case."""
    m = mutants.BY_NAME[extreme_mutant]
    path = seeded_bugs_dir / f"{extreme_mutant}.py"
    if not path.exists():
        needs.unavailable("offline", f"{extreme_mutant}: {m.module}'s module is not on this machine")
    impls = implementations_for(FileSource(path))
    target = TARGETS[m.target]
    rng = np.random.default_rng(derive_seed(fuzz_seed, extreme_mutant, "ordinary"))
    checked = 0
    for _ in range(4 * ORDINARY_CASES):
        case = role(m.target, "cases").body(RngChooser(rng), scale)
        if m.extreme in target.features_of(case):
            continue
        finding = check_case(case, impls, backend.device)
        assert finding is None, f"{extreme_mutant} fails on an ordinary case without {m.extreme}:\n{finding.report()}"
        checked += 1
        if checked == ORDINARY_CASES:
            break
    if extreme_mutant in EVERY_ORDINARY_CASE_AT_ITS_EXTREME:
        if backend.compiled:
            return
        assert checked == 0, (f"{checked} ordinary cases lack {m.extreme}: remove {extreme_mutant} from "
                              "EVERY_ORDINARY_CASE_AT_ITS_EXTREME")
        return
    assert checked == ORDINARY_CASES, f"only {checked} of {4 * ORDINARY_CASES} ordinary cases lack {m.extreme}"


# -- the rule can fail: findings that are no catch ------------------------------------------------
# Fakes of extend_all_queries_by_N (a Python target: a finding in a few cheap examples).
FAKE_EXAMPLES = 20


def fake(mutants, name: str, bug: str, *edits, crash: bool = False):
    return mutants.Mutant(name, "extend_all_queries_by_N", bug, tuple(edits), crash=crash)


@pytest.mark.parametrize("declared", [False, True], ids=["undeclared", "declared_a_crash"])
def test_a_mutant_that_raises_on_every_case_is_not_caught(declared, mutants, backend, scale, warm_oracles, tmp_path):
    """A crash finding of a mutant that raises whatever the case is no catch: not when its bug
    is not declared a crash, and not when it is (it must then run on one of the probe cases)."""
    # (a field the metadata lacks would be eaglefuzz's stand-in's gap, a verdict: not a crash at all)
    m = fake(mutants, "fake_raises_always", "extend_all_queries_by_N: max_seq_len adds N as a string "
             "(raises on every case)",
             ("max_seq_len=cad.max_seq_len + N,", "max_seq_len=cad.max_seq_len + str(N),"), crash=declared)
    path = mutants.write(m, tmp_path / "bugs")
    found = hunt(m, path, 0, FAKE_EXAMPLES, backend, scale, tmp_path)
    assert found["finding"]["kind"] == "crash", found["finding"]["report"]
    problem = catch_problem(m, path, found)
    if declared:
        assert problem and "raises on every one of the 10 small probe cases" in problem, problem
        assert "TypeError" in problem, problem
    else:
        assert problem and "caught only by a crash (TypeError" in problem, problem


def test_a_finding_that_does_not_replay_on_the_mutant_is_not_caught(mutants, backend, scale, warm_oracles, tmp_path):
    """A mutant that behaves as production but on its first call: its finding (that first call)
    does not fail when replayed, so it is no catch."""
    m = fake(mutants, "fake_wrong_once", "extend_all_queries_by_N: max_seq_len one too large on the first call only",
             ("    cad = common_attn_metadata\n",
              "    cad = common_attn_metadata\n    global _calls\n    _calls = globals().get('_calls', 0) + 1\n"),
             ("max_seq_len=cad.max_seq_len + N,", "max_seq_len=cad.max_seq_len + N + (_calls == 1),"))
    path = mutants.write(m, tmp_path / "bugs")
    found = hunt(m, path, 0, FAKE_EXAMPLES, backend, scale, tmp_path)
    assert found["finding"]["kind"] == "difference", found
    problem = catch_problem(m, path, found)
    assert problem and "passes on the mutant when replayed" in problem, problem


def test_a_finding_that_fails_on_production_too_is_not_caught(mutants, backend, scale, warm_oracles, tmp_path):
    """A finding whose case fails on the code the mutant edits is no catch of the seeded bug: here
    the "production" named is the mutant itself."""
    m = mutants.BY_NAME["extend_max_seq_len_kept"]
    path = mutants.write(m, tmp_path / "bugs")
    m = dataclasses.replace(m, module=f"file:{path}")
    found = hunt(m, path, 0, FAKE_EXAMPLES, backend, scale, tmp_path)
    problem = catch_problem(m, path, found)
    assert problem and "fails on the production code too" in problem, problem


def test_a_mutant_identical_to_production_is_not_caught(mutants, backend, scale, warm_oracles, tmp_path):
    m = fake(mutants, "fake_no_bug", "extend_all_queries_by_N as production has it")
    path = mutants.write(m, tmp_path / "bugs")
    found = hunt(m, path, 0, FAKE_EXAMPLES, backend, scale, tmp_path)
    problem = catch_problem(m, path, found)
    assert problem and problem.startswith(f"seeded bug not found in {FAKE_EXAMPLES} examples"), problem


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
def test_shrunk_reproducer_is_small(stem, region, mutants, seeded_bugs_dir, backend, scale, fuzz_seed, warm_oracles,
                                    monkeypatch):
    """A seeded bug's finding shrinks to a small reproducer (in its tier: an extended-tier bug's
    is an edge divergence, shrunk with the extended tier's moves too)."""
    monkeypatch.setenv("EAGLEFUZZ_SHRINK_BUDGET", "600")  # shrunk to the end on any machine, not to a budget
    path = seeded_bugs_dir / f"{stem}.py"
    impls, (name,) = overridden(path)
    stats = fuzz_target(
        name, impls, backend.device, scale,
        seed=derive_seed(fuzz_seed, stem, "shrink"), examples=BUG_EXAMPLES, shrink=True,
        tiers=(mutants.BY_NAME[stem].tier,),  # an extended-tier bug: the default run's search of the edges
    )
    assert stats.findings, f"seeded bug not found: {first_doc_line(path)}"
    finding = stats.findings[0]
    case = finding.case
    assert not finding.shrink, finding.shrink
    assert requests_of(case) <= 2, case
    token_arrays = {n: a for n, a in case.arrays.items() if "token_ids" in n}
    assert token_arrays
    assert all(a.size < 10 for a in token_arrays.values()), case
    report = finding.report()
    first = finding.outcome.differences[0]
    assert first.array in report
    assert region in report
    assert "assert_case(Case(" in report


SIMPLEST = ["nt_first_valid_column", "es_slot_of_current_position", "rr_recovered_of_next", "bc_drafts_ignored"]
"""Seeded bugs a default run first meets on a case of the tour of production extremes (ids near
2**31, positions past 2**24, 14 drafts over a 14 x 1000 table, counts in the hundreds of
millions), which any small case shows too."""


@pytest.mark.parametrize("stem", SIMPLEST)
def test_a_shrunk_case_has_values_a_person_need_not_think_about(stem, mutants, seeded_bugs_dir, backend, scale,
                                                                warm_oracles, needs, monkeypatch):
    """Shrinking left vocab_size 2147483647, seq_lens [26865573], 14 drafts over a 14 x 1000
    table where one draft shows the bug: the values the tour's case was drawn with. A finding
    shrinks to small numbers and few elements (every integer below 2**16, a few dozen elements)."""
    monkeypatch.setenv("EAGLEFUZZ_SHRINK_BUDGET", "600")  # shrunk to the end on any machine
    path = seeded_bugs_dir / f"{stem}.py"
    if not path.exists():
        try:
            mutants.module_file(mutants.BY_NAME[stem].module)
        except mutants.ModuleUnavailable as exc:
            needs.unavailable("offline", f"{stem}: {exc}")
    impls, (name,) = overridden(path)
    stats = fuzz_target(name, impls, backend.device, scale, seed=0, examples=DEFAULT_EXAMPLES)
    assert stats.findings, f"seeded bug not found: {first_doc_line(path)}"
    case = stats.findings[0].case
    ints = [v for v in (*case.scalars.values(), *case.launch.values()) if isinstance(v, int)]
    ints += [int(np.abs(a.astype(np.int64)).max()) for a in case.arrays.values() if a.dtype.kind in "iu" and a.size]
    assert max(ints) < 1 << 16, case
    assert sum(a.size for a in case.arrays.values()) <= 48, case


def test_a_bug_that_needs_1025_requests_gets_a_short_reproducer(seeded_bugs_dir, backend, scale, fuzz_seed, warm_oracles):
    """The reproducer of a bug no batch of 1024 requests or fewer shows is at most 30 lines,
    fails on the buggy file and passes on the production copy (the Python target: its checks
    cost milliseconds; tests/test_shrinking.py checks every target's first shrinking check)."""
    from eaglefuzz.harness.checking.check import DifferenceFound

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


def test_a_default_run_catches_a_broken_guard_that_production_does_not_reach(mutants, seeded_bugs_dir, needs,
                                                                            tmp_path):
    """vLLM 0.33.0's eagle_step_slot_mapping_metadata_kernel with ``exceeds_max = new_position >
    max_model_len`` (``>=`` made ``>``): production's current caller never steps onto
    max_model_len, but the guard is the kernel's and vLLM's own test of it has such a case.
    ``eaglefuzz fuzz --kernels FILE``, no option given, checks the production tier (which
    keeps the contract) and then the edges: one edge divergence, exit 4."""
    import json
    import os
    import subprocess

    m = mutants.BY_NAME["es_exceeds_strict"]
    path = seeded_bugs_dir / f"{m.name}.py"
    if not path.exists():
        try:
            mutants.module_file(m.module)
        except mutants.ModuleUnavailable as exc:
            needs.unavailable("offline", f"{m.name}: {exc}")
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--kernels", str(path), "--json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600, check=False,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 4, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["domain"] == "extended"
    t = doc["targets"][m.target]
    assert t["tiers_searched"] == ["production", "extended"] and t["findings"] == []
    assert t["examples_per_tier"]["production"] >= DEFAULT_EXAMPLES, "the production tier first, in full"
    (edge,) = t["edge_divergences"]
    assert edge["kind"] == "edge divergence" and "edges: reaches_max" in edge["report"], edge["report"]
