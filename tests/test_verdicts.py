"""Trustworthy verdicts on a user's own file: what ran is named, reproducers reproduce,
interface mismatches are verdicts (not findings), private findings stay out of ``corpus/``."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eaglefuzz.harness import cli
from eaglefuzz.harness.checking.corpus import CORPUS_DIR
from eaglefuzz.harness.sources import Origin, findings_dir
from eaglefuzz.harness.sources.bundled import BundledSource
from eaglefuzz.harness.sources.file import FileSource

ROOT = Path(__file__).resolve().parent.parent
CE = "copy_and_expand_eagle_inputs_kernel"
PI = "eagle_prepare_inputs_padded_kernel"
EXTEND = "extend_all_queries_by_N"
BUG = "ce_positions_shifted"  # tests/seeded_bugs/mutants.py: found in a few examples


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # Short shrinks: these tests read what a report says, not how small its case is
    # (tests/test_shrinking.py is about that).
    # A nested pytest of this suite keeps its failing tests' findings to itself (this run's
    # summary counts this run's own).
    return {**os.environ, "PYTHONPATH": str(ROOT), "EAGLEFUZZ_CACHE": str(tmp_path / "cache"),
            "EAGLEFUZZ_SHRINK_BUDGET": "3", "EAGLEFUZZ_TEST_FINDINGS": str(tmp_path / "test-findings"), **extra}


def run(args: list[str], tmp_path: Path, cwd: Path | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, env=env(tmp_path, **extra), cwd=cwd or tmp_path,
                          timeout=600, check=False)


def eaglefuzz(*args: str, tmp_path: Path, cwd: Path | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "eaglefuzz.harness.cli", *args], tmp_path, cwd, **extra)


def kernel_file(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / f"{name}.py"
    p.write_text("import triton\nimport triton.language as tl\nimport torch\n\n" + text)
    return p


BEGIN = "# --- reproducer: paste into a file and run it with python; it fails while this stands ---"
END = "# --- end of reproducer ---"


def reproducer_of(report: str) -> str:
    """The first reproducer block of ``report`` as a user selects it: from its opening fence line
    to its closing one, both included, exactly as printed (no dedent)."""
    lines = report.splitlines()
    start = lines.index(BEGIN)
    return "\n".join(lines[start : lines.index(END, start) + 1])


@pytest.fixture(scope="module")
def found(tmp_path_factory, mutants):
    """One campaign against a buggy copy of copy_and_expand, run from an empty folder."""
    tmp = tmp_path_factory.mktemp("found")
    bug = mutants.write(mutants.BY_NAME[BUG], tmp / "bugs")
    # EAGLEFUZZ_PROGRESS_EVERY=0: a progress line after every example, however fast the machine
    proc = eaglefuzz("fuzz", "--kernels", str(bug), "--examples", "60", "--json", "--no-progress",
                     tmp_path=tmp, EAGLEFUZZ_PROGRESS_EVERY="0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return tmp, bug, proc, json.loads(proc.stdout)


@pytest.mark.kernel
def test_says_what_was_tested(found):
    tmp, bug, proc, doc = found
    # Only the target the file defines is fuzzed; one line names the ones it does not define.
    assert list(doc["targets"]) == [CE]
    assert doc["source"] == f"file {bug}"
    assert doc["targets"][CE]["implementation"] == f"{bug}::{CE} (your file)"
    older, newer = [ln for ln in proc.stderr.splitlines() if "does not define" in ln]
    for other in ("eagle_prepare_inputs_padded_kernel", "extend_all_queries_by_N", "create_vllm_config_for_draft_model"):
        assert other in older and "bundled production copy" in older
    # the targets newer than the bundled copy: no bundled copy to fall back on, vLLM's own then
    for other in ("eagle_step_slot_mapping_metadata_kernel", "compute_new_slot_mapping"):
        assert other in newer and "--vllm-version" in newer and other not in older
    (finding,) = doc["targets"][CE]["findings"]
    assert f"tested: {bug}::{CE} (your file)" in finding["report"]
    # Without a terminal: progress lines (one per example at an interval of 0 s).
    assert re.search(rf"eaglefuzz: {CE}: \d+ examples?, ", proc.stderr), proc.stderr


@pytest.mark.kernel
def test_private_findings_stay_out_of_the_corpus(found):
    tmp, bug, proc, doc = found
    (finding,) = doc["targets"][CE]["findings"]
    saved = Path(finding["file"])
    assert saved.is_relative_to(tmp / "eaglefuzz-findings"), saved
    assert not saved.is_relative_to(CORPUS_DIR)
    assert findings_dir(BundledSource()) == CORPUS_DIR
    assert findings_dir(FileSource(bug)) == Path.cwd() / "eaglefuzz-findings"
    # by an implementation's own origin too (the pytest plugin routes each finding so): one a
    # test made up, from no source, never lands in the corpus
    assert findings_dir(BundledSource().origin(CE)) == CORPUS_DIR
    assert findings_dir(FileSource(bug).origin(CE)) == Path.cwd() / "eaglefuzz-findings"
    assert findings_dir(Origin("test", "-", "-")) == Path.cwd() / "eaglefuzz-findings"


@pytest.mark.kernel
def test_pasted_reproducer_fails_on_the_users_file(found, tmp_path):
    _, bug, _, doc = found
    report = doc["targets"][CE]["findings"][0]["report"]
    script = tmp_path / "repro.py"
    script.write_text(reproducer_of(report) + "\n")
    assert f"source='file:{bug}'" in script.read_text()
    failing = run([sys.executable, str(script)], tmp_path)
    assert failing.returncode != 0, failing.stdout + failing.stderr
    assert "DifferenceFound" in failing.stderr and "out_positions" in failing.stderr
    # The same case against the production copy passes: the reproducer is about the user's file
    # (run in this process: that it runs as a script is proven above).
    passing = reproducer_of(report).replace(f", source='file:{bug}'", "")
    assert passing != reproducer_of(report)
    exec(compile(passing, str(tmp_path / "passing.py"), "exec"), {"__name__": "__main__"})


PY_BUG = "extend_max_seq_len_kept"  # a Python target's bug: found in a few cheap examples


def test_the_printed_reproducer_block_runs_as_pasted(tmp_path, mutants):
    """The text report's reproducer block, copied from its first fence line to its last as
    printed (no dedent), runs with python: it fails on the bug and passes on the production copy."""
    bug = mutants.write(mutants.BY_NAME[PY_BUG], tmp_path / "bugs")
    proc = eaglefuzz("fuzz", "--kernels", str(bug), "--examples", "20", "--no-progress", tmp_path=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    block = reproducer_of(proc.stdout)
    assert block.splitlines()[1] == "import numpy as np", block  # nothing indented: pasted, it runs
    script = tmp_path / "repro.py"
    script.write_text(block + "\n")
    failing = run([sys.executable, str(script)], tmp_path)
    assert failing.returncode == 1 and "DifferenceFound" in failing.stderr, failing.stdout + failing.stderr
    assert "IndentationError" not in failing.stderr
    production = tmp_path / "repro_production.py"
    production.write_text(block.replace(f", source='file:{bug}'", "") + "\n")
    assert production.read_text() != script.read_text()
    passing = run([sys.executable, str(production)], tmp_path)
    assert passing.returncode == 0, passing.stdout + passing.stderr


@pytest.mark.kernel
def test_printed_replay_commands_fail_from_anywhere(found, tmp_path):
    _, bug, _, doc = found
    report = doc["targets"][CE]["findings"][0]["report"]
    commands = [ln.strip() for ln in report.splitlines() if ln.strip().startswith(("eaglefuzz replay", "python -m pytest"))]
    assert len(commands) == 2, report
    replay, pytest_cmd = commands
    r = eaglefuzz(*replay.split()[1:], tmp_path=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed" in r.stdout
    p = run([sys.executable, *pytest_cmd.split()[1:], "-q"], tmp_path)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    assert "1 failed" in p.stdout and f"{bug}::{CE}" in p.stdout


def _plugin_installed() -> bool:
    eps = importlib.metadata.entry_points(group="pytest11")
    return any(ep.value == "eaglefuzz.harness.pytest_plugin" for ep in eps)


@pytest.mark.kernel
@pytest.mark.skipif(not _plugin_installed(), reason="eaglefuzz is not installed (its pytest11 entry point is absent)")
@pytest.mark.parametrize("with_path", [False, True], ids=["no-test-path", "test-path"])
def test_pytest_kernels_option_from_another_directory(with_path, tmp_path, mutants):
    bug = mutants.write(mutants.BY_NAME["pi_cu_read_as_exclusive"], tmp_path / "bugs")
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--kernels", str(bug)]
    if with_path:  # one process (tests/test_crash.py runs a test path from elsewhere on an xdist worker)
        args += [f"{ROOT / 'tests' / 'test_differential.py'}::test_matches_oracles[{PI}-0]"]
    else:  # one xdist worker: the plugin's own suite loads in a worker as with -n auto
        args += ["-n", "1"]
    # The plugin's plumbing is the point, not the search: findings as first drawn, unshrunk.
    proc = run(args, tmp_path, cwd=tmp_path, EAGLEFUZZ_PROFILE="quick", EAGLEFUZZ_SHRINK_BUDGET="0")
    out = proc.stdout + proc.stderr
    assert "unrecognized arguments" not in out
    assert "hypothesis profile quick" in out, out[-3000:]  # the nested run took the profile
    assert proc.returncode == 1, out[-3000:]
    assert PI in out and "differs from the contract" in out
    if not with_path:  # the plugin's own suite ran: the file's one target, not the others
        assert "test_fuzz" in out and "extend_all_queries_by_N" not in proc.stdout.split("short test summary")[-1]
    # the failure is eaglefuzz's report (the case, its replay commands, its reproducer), not the
    # test's source and locals before it
    assert "tested: " in out and "replay it:" in out and "assert_case(Case(" in out
    assert "def test_fuzz(" not in out and "def test_matches_oracles(" not in out and "stats = " not in out, out[-3000:]


PI_SIGNATURE = "    num_rejected_tokens_gpu_ptr,  # [num_reqs] (output)\n"
PI_STORE = "    tl.store(num_rejected_tokens_gpu_ptr + req_idx, num_rejected_tokens)\n"


def _pi_source(mutants) -> str:
    src = mutants.production_source(PI)
    assert src.count(PI_SIGNATURE) == 1 and src.count(PI_STORE) == 1, "the production kernel changed"
    return src


@pytest.mark.parametrize(
    ("variant", "words"),
    [
        ("old", ["missing cu_num_draft_tokens_ptr"]),
        ("fork", ["extra use_index_clamp"]),
    ],
)
def test_interface_mismatch_is_a_one_line_verdict(variant, words, tmp_path, mutants):
    src = _pi_source(mutants)
    if variant == "old":  # an interface no target variant supports (0.12/0.13's is one: tested elsewhere)
        src = src.replace("    cu_num_draft_tokens_ptr,  # [num_reqs]\n", "")
    else:  # a fork with a flag of its own
        src = src.replace("    num_reqs,  # tl.int32\n", "    num_reqs,  # tl.int32\n    use_index_clamp,\n")
    path = kernel_file(tmp_path, variant, src)
    proc = eaglefuzz("fuzz", "--kernels", str(path), "--examples", "5", tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("eaglefuzz: error: ")
    assert "Traceback" not in proc.stderr and "finding" not in proc.stdout
    for w in words:
        assert w in proc.stderr
    assert str(path) in proc.stderr and "not a bug finding" in proc.stderr
    assert not (tmp_path / "eaglefuzz-findings").exists()


def test_stand_in_gap_is_a_verdict_not_a_crash(tmp_path, mutants):
    src = mutants.production_source(EXTEND)
    body = "    cad = common_attn_metadata\n"
    assert src.count(body) == 1
    src = src.replace(body, body + "    _ = cad.num_speculative_blocks\n")
    path = tmp_path / "newer.py"
    path.write_text("import torch\n\nfrom eaglefuzz.kernels.vllm_types import CommonAttentionMetadata\n\n\n" + src)
    proc = eaglefuzz("fuzz", "--kernels", str(path), "--examples", "5", tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if not ln.startswith("eaglefuzz: ") or "error" in ln]
    assert len(errors) == 1 and errors[0].startswith("eaglefuzz: error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    assert "needs CommonAttentionMetadata.num_speculative_blocks, which the stand-in lacks" in proc.stderr
    assert "install vLLM" in proc.stderr
    assert not (tmp_path / "eaglefuzz-findings").exists()


FORK_IMPORTED_HELPER = """\
import torch

from vllm.v1.attention.backends.utils import compute_slot_mapping_from_block_table


def compute_new_slot_mapping(cad, new_positions, is_rejected_token_mask, block_size, num_new_tokens,
                             max_model_len):
    slots = compute_slot_mapping_from_block_table(cad.block_table_tensor, new_positions, block_size)
    return torch.where(is_rejected_token_mask, -1, slots)
"""


def test_a_name_the_file_imports_from_unresolved_modules_is_a_verdict_not_a_crash(tmp_path):
    """A fork's compute_new_slot_mapping calls a helper its file imports from vLLM; taken without
    the file's imports (they do not resolve here), it raised NameError on every case, which was
    reported as a production contract violation (crash). It could not be tested: one line
    naming the name and the import, exit 2, nothing saved."""
    path = tmp_path / "fork_utils.py"
    path.write_text(FORK_IMPORTED_HELPER)
    proc = eaglefuzz("fuzz", "--kernels", str(path), "--examples", "3", tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "=== finding" not in proc.stdout
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("eaglefuzz: error: ")] or [""]
    verdict = (f"{path}: compute_new_slot_mapping could not be tested: it needs compute_slot_mapping_from_block_table, "
               "which the file imports (from vllm.v1.attention.backends.utils import "
               "compute_slot_mapping_from_block_table)")
    assert verdict in line and "not a bug finding" in line, proc.stderr
    assert not (tmp_path / "eaglefuzz-findings").exists()


def test_a_field_the_stand_in_lacks_is_a_verdict_not_a_crash(tmp_path, mutants):
    """A fork's create_vllm_config_for_draft_model sets a CompilationConfig field newer than
    eaglefuzz's stand-in: TypeError (an unexpected keyword argument) was a crash finding. It
    could not be tested: one line naming the field, exit 2."""
    src = mutants.production_source("create_vllm_config_for_draft_model")
    body = "    old = target_model_vllm_config\n"
    assert src.count(body) == 1
    src = src.replace(body, body + "    replace(old.compilation_config, compile_cache_namespace=\"draft\")\n")
    path = tmp_path / "fork_config.py"
    path.write_text("from dataclasses import replace\n\nfrom eaglefuzz.kernels.vllm_types import VllmConfig\n\n\n" + src)
    proc = eaglefuzz("fuzz", "--kernels", str(path), "--examples", "3", tmp_path=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "=== finding" not in proc.stdout
    assert ("create_vllm_config_for_draft_model needs CompilationConfig.compile_cache_namespace, which eaglefuzz's "
            "stand-in lacks") in proc.stderr, proc.stderr
    assert not (tmp_path / "eaglefuzz-findings").exists()


@pytest.mark.kernel
def test_a_target_named_explicitly_comes_from_the_bundled_copy_and_says_so(tmp_path, mutants, monkeypatch, capsys):
    bug = mutants.write(mutants.BY_NAME[BUG], tmp_path / "bugs")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:  # in this process: what is named is the point
        cli.main(["fuzz", "--kernels", str(bug), "--kernel", PI, "--examples", "3", "--json", "--no-isolate",
                  "--no-progress"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, out + err
    doc = json.loads(out)
    assert list(doc["targets"]) == [PI]
    assert doc["targets"][PI]["implementation"] == f"kernels/spec_decode_utils.py::{PI} (bundled production copy)"
    assert any("testing the bundled production copy" in n for n in doc["notes"])


@pytest.mark.kernel
def test_replay_groups_identical_findings(tmp_path, mutants, capsys):
    from eaglefuzz.harness.checking.corpus import save_case
    from eaglefuzz.harness.core.case import Case
    from eaglefuzz.harness.targets import TARGETS

    bug = mutants.write(mutants.BY_NAME["pi_rejected_missing_plus_one"], tmp_path / "bugs")
    import numpy as np

    target = TARGETS[PI]
    for seed in range(8):
        rng = np.random.default_rng(seed)
        case: Case = target.random_case(rng, __import__("eaglefuzz.harness.generation.strategies", fromlist=["x"]).Scale(
            max_requests=4, request_tail=4, max_query_len=8))
        save_case(case, tmp_path / "cases")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:  # in this process: the report's grouping is the point
        cli.main(["replay", str(tmp_path / "cases"), "--kernels", str(bug), "--no-isolate"])
    stdout, stderr = capsys.readouterr()
    assert exc.value.code == 1, stdout + stderr
    fails = stdout.count("\nFAIL ") + stdout.startswith("FAIL ")
    assert fails >= 2, stdout
    assert stdout.count("=== ") == 1, stdout
    assert f"{fails} case(s) fail the same way" in stdout
    assert f"{8 - fails} passed, {fails} failed (1 distinct)" in stdout.rstrip().splitlines()[-1]


def test_did_you_mean(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["fuzz", "--kernel", "copy_and_expnd", "--no-isolate"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert f"did you mean {CE}?" in err


def _help_options(command: str) -> set[str]:
    cmd = cli.cli.commands[command]
    return {o for p in cmd.params if not getattr(p, "hidden", False) for o in p.opts if o.startswith("--")} - {"--help"}


def test_readme_synopsis_matches_help():
    text = (ROOT / "README.md").read_text()
    block = text.split("## Command line", 1)[1].split("\n\n", 2)[1]
    for command in ("fuzz", "replay", "list"):
        lines = block.split(f"eaglefuzz {command}", 1)[1].split("eaglefuzz ", 1)[0]
        named = set(re.findall(r"--[a-z][a-z0-9-]*", lines))
        helped = _help_options(command)
        # --progress/--no-progress and --isolate/--no-isolate are pairs: one name in the synopsis suffices
        helped = {o for o in helped if not o.startswith("--no-")}
        named = {o for o in named if not o.startswith("--no-")}
        assert named == helped, f"eaglefuzz {command}: README {sorted(named ^ helped)} differ from --help"


def test_gitignore_covers_what_tox_leaves():
    patterns = (ROOT / ".gitignore").read_text().split()
    assert ".venv" in patterns  # a file or a folder (tox leaves either)
    assert ".tox/" in patterns and "eaglefuzz-findings/" in patterns
