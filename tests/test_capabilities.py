"""The capability matrix (``eaglefuzz list``, harness/reporting/capabilities.py): what each target
has, and an exact list of the core gaps still open.

:data:`KNOWN_GAPS` is every ``(target, column)`` of the core set (production, extended, tour,
audit, bugs, extreme_bugs, corpus) that a target lacks today. The test fails when a new gap
appears (a target added without one of them) and when a listed gap has been filled (remove its
line): the set stays exact. Keep it a plain literal, one pair per line, sorted.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from eaglefuzz.harness.cli import cli
from eaglefuzz.harness.reporting import capabilities
from eaglefuzz.harness.targets import TARGETS

KNOWN_GAPS: set[tuple[str, str]] = set()


def gap_problems(found: set[tuple[str, str]], known: set[tuple[str, str]]) -> list[str]:
    """Why ``found`` (the matrix's core gaps) is not exactly ``known``: one line per pair."""
    return ([f"new core gap {t}: {c} (fill it, or add ({t!r}, {c!r}) to KNOWN_GAPS)" for t, c in sorted(found - known)]
            + [f"filled: {t}: {c} (remove ({t!r}, {c!r}) from KNOWN_GAPS)" for t, c in sorted(known - found)])


def test_core_gaps_are_exactly_the_known_ones():
    problems = gap_problems(capabilities.core_gaps(capabilities.matrix()), KNOWN_GAPS)
    assert not problems, "\n".join(problems)


def entry_problems(known: set[tuple[str, str]]) -> list[str]:
    """Why entries of ``known`` cannot be core gaps: an unknown target or a column outside the core set."""
    return ([f"{t}: no such target" for t, _ in sorted(known) if t not in TARGETS]
            + [f"{t}: {c} is not a core column" for t, c in sorted(known) if c not in capabilities.CORE])


def test_known_gaps_name_targets_and_core_columns():
    assert entry_problems(KNOWN_GAPS) == []
    assert entry_problems({("no_such_target", "audit"), ("expand_kernel", "device")}) == [
        "no_such_target: no such target", "expand_kernel: device is not a core column"]


def test_the_gap_check_fails_both_ways():
    """A new gap and a filled one are each reported (the check above can fail both ways)."""
    found = capabilities.core_gaps(capabilities.matrix())
    extra = ("copy_and_expand_eagle_inputs_kernel", "audit")
    assert extra not in found and extra not in KNOWN_GAPS
    assert gap_problems(found | {extra}, KNOWN_GAPS) == [
        "new core gap copy_and_expand_eagle_inputs_kernel: audit (fill it, or add "
        "('copy_and_expand_eagle_inputs_kernel', 'audit') to KNOWN_GAPS)"]
    assert gap_problems(found, KNOWN_GAPS | {extra}) == [
        "filled: copy_and_expand_eagle_inputs_kernel: audit (remove ('copy_and_expand_eagle_inputs_kernel', "
        "'audit') from KNOWN_GAPS)"]


def test_a_target_without_a_role_file_has_a_gap(monkeypatch):
    """A cell comes from the target's folder: without ``edges.py`` (``has_role`` says so) the
    extended cell is 0 and a core gap; without ``audit.py``, the audit's."""
    name = "copy_and_expand_eagle_inputs_kernel"
    real = capabilities.has_role
    monkeypatch.setattr(capabilities, "has_role", lambda n, r: False if (n, r) in {(name, "edges"), (name, "audit")}
                        else real(n, r))
    row = capabilities.capabilities(name)
    assert (row.extended, row.audit) == (0, 0)
    assert row.gaps() == ["extended", "audit"]


def test_corpus_counts_the_folders_json_files(tmp_path):
    name = "extend_all_queries_by_N"
    (tmp_path / name).mkdir()
    for i in range(3):
        (tmp_path / name / f"{i}.json").write_text("{}")
    (tmp_path / name / "notes.txt").write_text("not a case")
    rows = {r.target: r for r in capabilities.matrix(tmp_path)}
    assert rows[name].corpus == 3
    assert all(r.corpus == 0 and "corpus" in r.gaps() for n, r in rows.items() if n != name)


def test_extreme_bugs_not_applicable_without_extremes(monkeypatch):
    """A target whose record declares no production extremes cannot have a bug that needs one:
    ``n/a``, no gap."""
    name = "create_vllm_config_for_draft_model"
    monkeypatch.setattr(TARGETS[name], "extremes", ())
    row = capabilities.capabilities(name)
    assert "extreme_bugs" not in row.gaps()
    assert capabilities._cell(row, "extreme_bugs") == "n/a"


def _list(*args: str) -> str:
    result = CliRunner().invoke(cli, ["list", *args], env={"COLUMNS": "40"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_list_prints_the_matrix_with_whole_names():
    """``eaglefuzz list`` without a terminal (here 40 columns) prints one row per target in
    TARGETS order, its name whole, and every core gap."""
    out = _list()
    text = out[out.index("capability matrix:"):].splitlines()
    assert text[1].split() == ("target runner production extended tour audit device C++ port seeded bugs need "
                               "extreme corpus cases").split()
    rows = [ln.split() for ln in text if ln.split() and ln.split()[0] in TARGETS]
    assert [r[0] for r in rows] == list(TARGETS)
    matrix = {r.target: r for r in capabilities.matrix()}
    for r in rows:
        want = [capabilities._cell(matrix[r[0]], c) for c in capabilities.COLUMNS]
        assert r[1:] == want, r
    for name, row in matrix.items():
        if row.gaps():
            assert f"core gaps of {name}: " in out


def test_list_json_gives_the_matrix_as_data():
    doc = json.loads(_list("--json"))
    caps = doc["capabilities"]
    assert caps["core"] == list(capabilities.CORE)
    assert list(caps["targets"]) == list(TARGETS) == list(doc["targets"])
    for row in capabilities.matrix():
        got = caps["targets"][row.target]
        assert got["gaps"] == row.gaps()
        assert all(got[c] == getattr(row, c) for c in capabilities.COLUMNS)


def test_the_port_of_a_v2_target_is_not_applicable():
    """vLLM's CPU backend has C++ ops for V1 kernels only (``CPU_PORT_RUNNERS``): a Model Runner V2
    target's port cell says ``n/a`` (no role to have), never a gap; a V1 target without a port
    says ``-``."""
    rows = {r.target: r for r in capabilities.matrix()}
    v2 = [r for n, r in rows.items() if TARGETS[n].runner == "V2"]
    assert len(v2) == 22
    assert all(capabilities._cell(r, "port") == "n/a" and not r.port_applies for r in v2)
    assert capabilities._cell(rows["compute_new_slot_mapping"], "port") == "-"
    assert capabilities._cell(rows["expand_kernel"], "port") == "yes"
    assert "C++ port n/a" in capabilities.LEGEND
