"""Every line a user reads is right (issue 20): per-target interface verdicts and ``--param``,
findings never lost, no option silently ignored, one report per distinct finding, examples
counted apart from shrink attempts, tables that fit a log, one-line errors, structured
``--json`` differences, sentinels named.

Runs are in-process (``--no-isolate``) with few examples: what is checked is what a user
reads, not how much is searched.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import numpy as np
import pytest

from eaglefuzz.harness import cli
from eaglefuzz.harness.targets import TARGETS

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = ROOT / "kernels" / "spec_decode_utils.py"
PI = "eagle_prepare_inputs_padded_kernel"
NT = "eagle_prepare_next_token_padded_kernel"
EXTEND = "extend_all_queries_by_N"
DFLASH = "copy_and_expand_dflash_inputs_kernel"
PI_BUG = "pi_rejected_missing_plus_one"  # tests/seeded_bugs/mutants.py: every drafted request shows it
NT_BUG = "nt_minus_one_check_dropped"
PINNED = "0.33.0"  # harness/sources/vllm.py PINNED_RELEASE: its module is in the wheel cache

PLUGIN = ["-p", "eaglefuzz.harness.pytest_plugin"]
"""The plugin by its module name, as printed replay commands load it: where eaglefuzz is only on
``PYTHONPATH`` (a lent GPU machine) no entry point loads it; installed, this is a no-op."""


@pytest.fixture(autouse=True)
def short_shrinks(monkeypatch):
    monkeypatch.setenv("EAGLEFUZZ_SHRINK_BUDGET", "3")


def run(capsys, *args: str) -> tuple[int, str, str]:
    """``eaglefuzz ARGS`` in this process: exit code, stdout, stderr."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the production code changed: {old!r}"
    return text.replace(old, new)


# -- 0: an interface verdict is its target's; --param binds a fork's extra parameters --------------

PI_PARAMS = "    num_reqs,  # tl.int32\n):\n    \"\"\"\n    Fused kernel for Eagle prepare_input_padded."
PI_CLAMP = "    index_to_sample = q_last_tok_idx - num_rejected_tokens\n"


def fork_module(tmp_path: Path, mutants, *, nt_bug: bool) -> Path:
    """The bundled module as a fork keeps it: ``eagle_prepare_inputs_padded_kernel`` takes a flag
    of the fork's own (no default) that clamps the index to sample; optionally a seeded bug in
    ``eagle_prepare_next_token_padded_kernel``."""
    text = PRODUCTION.read_text().replace("from .vllm_types import", "from eaglefuzz.kernels.vllm_types import")
    text = replace_once(text, PI_PARAMS, PI_PARAMS.replace("num_reqs,  # tl.int32\n", "num_reqs,  # tl.int32\n    use_index_clamp,\n"))
    text = replace_once(text, PI_CLAMP, PI_CLAMP + "    if use_index_clamp:\n"
                        "        index_to_sample = tl.maximum(index_to_sample, 0)\n")
    if nt_bug:
        text = replace_once(text, mutants.production_source(NT), mutants.mutate(mutants.BY_NAME[NT_BUG]))
    path = tmp_path / ("fork_bug.py" if nt_bug else "fork.py")
    path.write_text(text)
    return path


@pytest.mark.kernel
def test_an_interface_verdict_stops_its_target_alone(tmp_path, mutants, capsys):
    fork = fork_module(tmp_path, mutants, nt_bug=True)
    args = ["fuzz", "--kernels", str(fork), "--kernel", PI, "--kernel", NT, "--examples", "2", "--domain", "production",
            "--corpus", str(tmp_path / "found"), "--no-isolate", "--no-progress"]
    code, out, err = run(capsys, *args, "--json")
    doc = json.loads(out)
    assert code == 1, err  # a finding is the worst
    assert list(doc["targets"]) == [NT] and len(doc["targets"][NT]["findings"]) == 1
    verdict = doc["untested"][PI]
    assert f"{fork}: {PI} has another interface than the contract's (extra use_index_clamp)" in verdict
    assert "not a bug finding" in verdict and "--param use_index_clamp=VALUE" in verdict
    assert any(verdict in ln for ln in err.splitlines())  # with --json, the notes and verdicts go to stderr

    clean = fork_module(tmp_path, mutants, nt_bug=False)
    args = [a if a != str(fork) else str(clean) for a in args]
    code, out, err = run(capsys, *args)
    assert code == 2, out + err  # nothing found, but a target could not be tested
    assert f"not tested: {clean}: {PI} has another interface" in out
    assert NT in out and "Traceback" not in err
    code, out, _ = run(capsys, *args, "--json")
    doc = json.loads(out)
    assert code == 2 and doc["targets"][NT]["examples"] == 2 and not doc["targets"][NT]["findings"]

    # the value that makes it the contract's kernel: tested, and the reports say with what
    code, out, err = run(capsys, *args, "--json", "--param", "use_index_clamp=False")
    doc = json.loads(out)
    assert code == 0, err
    assert doc["untested"] == {} and doc["targets"][PI]["examples"] == 2
    assert doc["targets"][PI]["implementation"].endswith("[with use_index_clamp=False]")
    assert any(f"{PI}: extra parameters use_index_clamp" in n and "--param use_index_clamp=False" in n
               for n in doc["notes"])
    # a replay too: the cases of the other targets are replayed, those of PI are not, and say why
    code, out, err = run(capsys, "replay", str(ROOT / "corpus" / PI), str(ROOT / "corpus" / NT),
                         "--kernels", str(clean), "--no-isolate")
    cases = len(list((ROOT / "corpus" / PI).glob("*.json")))
    assert code == 2, out + err
    assert f"not replayed: {cases} case(s) of {PI}: {clean}: {PI} has another interface" in out
    assert f"{len(list((ROOT / 'corpus' / NT).glob('*.json')))} passed, 0 failed" in out
    # a --param that nothing under test has is one line, exit 2
    code, out, err = run(capsys, *args, "--param", "dcp_rank=0")
    assert code == 2 and err.count("\n") == 1 and "--param dcp_rank: no implementation under test" in err
    code, out, err = run(capsys, *args, "--param", "use_index_clamp=maybe")
    assert code == 2 and err.count("\n") == 1 and "the value must be an int, a float, True, False or None" in err


@pytest.mark.kernel
def test_every_target_mismatching_is_one_line_each(tmp_path, mutants, capsys):
    fork = fork_module(tmp_path, mutants, nt_bug=False)
    text = fork.read_text()
    text = replace_once(text, "    BLOCK_SIZE_TOKENS: tl.constexpr,  # Power-of-2 >= num_sampled_tokens_per_req\n",
                        "    BLOCK_SIZE_TOKENS: tl.constexpr,  # Power-of-2 >= num_sampled_tokens_per_req\n"
                        "    SKIP_BACKUP: tl.constexpr,\n")
    fork.write_text(text)
    code, out, err = run(capsys, "fuzz", "--kernels", str(fork), "--kernel", PI, "--kernel", NT, "--no-isolate")
    lines = err.splitlines()
    assert code == 2 and out == "" and len(lines) == 2, err
    assert all(ln.startswith("eaglefuzz: error: ") and "not a bug finding" in ln for ln in lines)
    assert "extra use_index_clamp" in lines[0] and "extra SKIP_BACKUP" in lines[1]


DFLASH_CONSTEXPRS = "    BLOCK_SIZE: tl.constexpr,\n    HAS_NUM_REJECTED: tl.constexpr = False,\n):"
DFLASH_SAMPLE = """\
    is_sample = is_query & (query_off > 0)
    sample_out_idx = req_idx * num_speculative_tokens + (query_off - 1)
"""
DFLASH_FROM_ANCHOR = """\
    if SAMPLE_FROM_ANCHOR:
        is_sample = is_query
        sample_out_idx = req_idx * num_speculative_tokens + query_off
    else:
        is_sample = is_query & (query_off > 0)
        sample_out_idx = req_idx * num_speculative_tokens + (query_off - 1)
"""


@pytest.mark.kernel
def test_extra_parameters_with_defaults_are_tested_with_them(tmp_path, mutants, capsys, needs):
    """A fork's DFlash kernel (as 1Cat-vLLM's) with ``SAMPLE_FROM_ANCHOR: tl.constexpr = False``:
    tested with its default; ``--param`` tests the other value, which differs."""
    release = f"vllm-release:{PINNED}"
    try:
        src = mutants.production_source(DFLASH, release)
    except mutants.ModuleUnavailable as exc:
        needs.unavailable("offline", str(exc))
    src = replace_once(src, DFLASH_CONSTEXPRS,
                       DFLASH_CONSTEXPRS.replace("):", "    SAMPLE_FROM_ANCHOR: tl.constexpr = False,\n):"))
    fork = tmp_path / "dflash_fork.py"
    fork.write_text("import triton\nimport triton.language as tl\n\n\n" + replace_once(src, DFLASH_SAMPLE, DFLASH_FROM_ANCHOR))
    args = ["fuzz", "--kernels", str(fork), "--kernel", DFLASH, "--examples", "1", "--json", "--no-isolate",
            "--no-progress", "--corpus", str(tmp_path / "found")]
    code, out, err = run(capsys, *args)
    doc = json.loads(out)
    assert code == 0, err
    assert doc["targets"][DFLASH]["implementation"].endswith("[with SAMPLE_FROM_ANCHOR=False]")
    assert any("tested with its defaults SAMPLE_FROM_ANCHOR=False" in n for n in doc["notes"])
    code, out, err = run(capsys, *args, "--param", "SAMPLE_FROM_ANCHOR=True")
    doc = json.loads(out)
    assert code == 1, err
    (finding,) = doc["targets"][DFLASH]["findings"]
    assert {d["array"] for d in finding["differences"]} == {"out_token_indices"}
    assert "--param SAMPLE_FROM_ANCHOR=True" in finding["report"]  # the replay commands bind it again


def test_a_bound_function_takes_the_contract_and_keeps_its_eager_form():
    from eaglefuzz.harness.sources.binding import bind

    calls = []

    def orig(a, flag, b, extra=7):
        calls.append((a, flag, b, extra))

    class Compiled:  # what torch.compile returns: the undecorated function as an attribute
        _torchdynamo_orig_callable = staticmethod(orig)

        def __call__(self, *args, **kwargs):
            calls.append("compiled")
            return orig(*args, **kwargs)

    bound = bind(Compiled(), ("a", "b"), {"flag": True, "extra": 0}, kernel=False)
    assert bound.parameters == ("a", "b")
    bound(1, 2)
    bound._torchdynamo_orig_callable(3, b=4)
    assert calls == ["compiled", (1, True, 2, 0), (3, True, 4, 0)]


@pytest.mark.kernel
def test_a_python_function_with_a_defaulted_extra_parameter(tmp_path, mutants, capsys):
    src = mutants.production_source(EXTEND)
    src = replace_once(src, "    new_slot_mapping: torch.Tensor,\n", "    new_slot_mapping: torch.Tensor,\n"
                       "    clamp_to_max: bool = False,\n")
    path = tmp_path / "extend_fork.py"
    path.write_text("import torch\n\nfrom eaglefuzz.kernels.vllm_types import CommonAttentionMetadata\n\n\n" + src)
    code, out, err = run(capsys, "fuzz", "--kernels", str(path), "--kernel", EXTEND, "--examples", "3", "--json",
                         "--domain", "production", "--no-isolate", "--no-progress")
    doc = json.loads(out)
    assert code == 0, err
    assert doc["targets"][EXTEND]["examples"] == 3
    assert doc["targets"][EXTEND]["implementation"].endswith("[with clamp_to_max=False]")


# -- 1: a finding is never lost ---------------------------------------------------------------------


@pytest.mark.kernel
def test_an_unwritable_findings_folder_is_one_line_before_any_example(tmp_path, mutants, capsys, monkeypatch):
    bug = mutants.write(mutants.BY_NAME[PI_BUG], tmp_path / "bugs")
    (tmp_path / "blocker").write_text("a file")
    for corpus, words in (("/proc/nope", "cannot create /proc/nope"),
                          (str(tmp_path / "blocker" / "sub"), "blocker is a file, not a folder")):
        code, out, err = run(capsys, "fuzz", "--kernels", str(bug), "--kernel", PI, "--corpus", corpus)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert err.startswith(f"eaglefuzz: error: --corpus {corpus}: findings cannot be written there") and words in err
    monkeypatch.chdir(tmp_path / "bugs")
    (tmp_path / "bugs" / "eaglefuzz-findings").write_text("in the way")
    code, out, err = run(capsys, "fuzz", "--kernels", str(bug), "--kernel", PI)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"the findings folder {tmp_path / 'bugs' / 'eaglefuzz-findings'}: findings cannot be written" in err


def test_runs_side_by_side_in_one_folder_all_find_their_findings_folder_writable(tmp_path):
    """Several runs started at once in one folder (a CI matrix, xargs -P, terminals side by side)
    each check, before any example, that findings can be written: no check may stand in the
    way of another (one that created and removed the folder to find out failed the others with
    'cannot create ...'), and none leaves a folder behind."""
    import sys
    import threading

    from eaglefuzz.harness.core.paths import unwritable

    (tmp_path / "work").mkdir()
    folder = tmp_path / "work" / "eaglefuzz-findings" / PI
    refused: list[str] = []

    def run() -> None:
        for _ in range(300):
            why = unwritable(folder)
            if why is not None:
                refused.append(why)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the checks interleave as processes' do
    try:
        threads = [threading.Thread(target=run) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not refused, f"{len(refused)} of 2400 checks refused: {refused[0]}"
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == [], "the check leaves nothing behind"


@pytest.mark.kernel
def test_a_finding_that_cannot_be_saved_is_printed_in_full(tmp_path, mutants, capsys, monkeypatch):
    from eaglefuzz.harness.checking import corpus

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    bug = mutants.write(mutants.BY_NAME[PI_BUG], tmp_path / "bugs")
    monkeypatch.setattr(corpus, "save_case", read_only)
    code, out, err = run(capsys, "fuzz", "--kernels", str(bug), "--kernel", PI, "--examples", "5",
                         "--corpus", str(tmp_path / "found"), "--no-isolate", "--no-progress")
    assert code == 1 and "Traceback" not in err, err
    assert f"=== finding: {PI} (difference) NOT saved" in out
    assert f"cannot write {tmp_path / 'found'}: Read-only file system" in out
    assert "# --- reproducer: paste into a file and run it with python" in out and "assert_case(Case(" in out
    assert not (tmp_path / "found").exists()


# -- 2: no option is silently ignored -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["fuzz", "--vllm-cpu-isa", "avx2"], "--vllm-cpu-isa avx2: only with --vllm-cpu"),
        (["replay", "--vllm-cpu-isa", "avx2"], "--vllm-cpu-isa avx2: only with --vllm-cpu"),
        (["audit", "--vllm-cpu-isa", "avx2"], "--vllm-cpu-isa avx2: only with --vllm-cpu"),
        (["list", "--vllm-cpu-isa", "avx2"], "--vllm-cpu-isa avx2: only with --vllm-cpu"),
        (["fuzz", "--examples", "5", "--time-budget", "5"], "--examples 5 and --time-budget 5: give one"),
        (["fuzz", "--case-timeout", "3", "--no-isolate"], "--case-timeout 3 and --no-isolate"),
        (["fuzz", "--limits", "timeout_scale=2", "--no-isolate"], "--limits timeout_scale=... and --no-isolate"),
        (["replay", "--case-timeout", "3", "--no-isolate"], "--case-timeout 3 and --no-isolate"),
        (["replay", "--sanitize", "--no-isolate"], "--sanitize and --no-isolate"),
        (["fuzz", "--progress", "--devices", "all"], "--progress: not with --devices, --lanes or --ray"),
        (["fuzz", "--kernels", str(ROOT / "kernels")], "is a directory"),
    ],
)
def test_an_option_that_needs_or_excludes_another_says_so(capsys, args, words):
    code, out, err = run(capsys, *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("eaglefuzz: error: "), err
    assert words in err


# -- 3, 4, 14: one report per distinct finding; examples as asked; structured --json ------------------


@pytest.mark.kernel
def test_keep_going_reports_each_distinct_finding_once_with_the_examples_asked(tmp_path, mutants, capsys):
    bug = mutants.write(mutants.BY_NAME[PI_BUG], tmp_path / "bugs")
    code, out, err = run(capsys, "fuzz", "--kernels", str(bug), "--kernel", PI, "--keep-going", "--examples", "30",
                         "--domain", "production", "--json", "--no-isolate", "--no-progress",
                         "--corpus", str(tmp_path / "found"))
    assert code == 1, err
    t = json.loads(out)["targets"][PI]
    assert t["examples"] == 30 and t["shrink_attempts"] > 0
    findings = t["findings"]
    shapes = [tuple(sorted({(d["array"], d["region"]) for d in f["differences"]})) for f in findings]
    assert len(set(shapes)) == len(shapes), "a finding is reported twice"
    assert len({f["file"] for f in findings}) == len(findings)
    assert sum(f["met"] for f in findings) <= 30 and max(f["met"] for f in findings) > 1
    for f in findings:  # the structured fields say what the report's lines say
        assert f["kind"] == "difference" and f["tier"] == "production"
        assert f["differences_total"] == len(f["differences"]) > 0
        for d in f["differences"]:
            line = (f"{d['array']}[{d['index']}] request {d['request']} ({d['region']}): expected {d['expected']!r}, "
                    f"actual {d['actual']!r}  [vs {d['expected_from']}]")
            assert line in f["report"]


def _pi_minimal_case():
    from eaglefuzz.harness.core.case import Case

    return Case(PI, {"cu_num_draft_tokens": np.array([1], dtype=np.int32),
                     "valid_sampled_tokens_count": np.array([2], dtype=np.int32),
                     "query_start_loc": np.array([0, 2], dtype=np.int32)}, {"num_reqs": 1}, {"grid_size": None})


def _failing(case, region: str):  # noqa: ANN001, ANN202
    from eaglefuzz.harness.checking.check import Finding
    from eaglefuzz.harness.core.compare import Difference
    from eaglefuzz.harness.sources.base import Origin
    from eaglefuzz.harness.targets import Outcome

    diff = Difference("num_rejected_tokens", 0, 0, -1, 0, region, "numpy = numba oracle")
    return Finding(case, Outcome(differences=[diff]), Origin("test", "test", PI))


def _run_with_one_minimal_case(monkeypatch, examples: int):  # noqa: ANN202
    """A bulk run of PI where every case fails, in a region that depends on its number of
    requests, and every finding shrinks to one minimal case (its own region)."""
    from eaglefuzz.harness.checking import fuzz
    from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE
    from eaglefuzz.harness.sources import Implementations

    minimal, first = _pi_minimal_case(), []

    def check(case, *args, **kwargs):  # noqa: ANN001, ANN202
        first[:] = first or [case]
        return _failing(case, f"region {case.scalars['num_reqs'] % 4}")

    monkeypatch.setattr(fuzz, "check_case", check)
    monkeypatch.setattr(fuzz, "shrink_finding", lambda finding, *a, **k: _failing(minimal, "per-request output"))
    stats = fuzz.bulk_fuzz_target(PI, Implementations({}, {}), "cpu", INTERPRETER_SCALE, examples=examples,
                                  stop_on_finding=False)
    return stats, minimal, first[0]


def test_findings_that_shrink_into_one_are_one_finding_met_as_often(monkeypatch):
    """--keep-going: cases that fail in other regions as found, and all shrink into one minimal
    case, are one finding met in every one of them (they were each a finding of their own,
    met once, pointing to one file)."""
    stats, minimal, _ = _run_with_one_minimal_case(monkeypatch, 30)
    assert len(stats.findings) == 1, [f.outcome.differences[0].region for f in stats.findings]
    assert stats.findings[0].case == minimal and stats.met(stats.findings[0]) == 30


def test_the_features_of_a_finding_count_as_reached(monkeypatch):
    """A run stopped by its first finding reached the features of the case it reports (its
    --json listed them under features_missed)."""
    from eaglefuzz.harness.targets import TARGETS

    stats, minimal, first = _run_with_one_minimal_case(monkeypatch, 1)
    own = TARGETS[PI].features_of(minimal)
    assert own - TARGETS[PI].features_of(first), "the condition: the case found lacks a feature of the shrunk one"
    assert own <= stats.features, sorted(own - stats.features)


@pytest.mark.kernel
def test_an_interrupt_while_shrinking_reports_the_smallest_case_so_far(tmp_path, mutants, monkeypatch, capsys):
    """Ctrl-C while a finding is being shrunk: the report, the saved file and its reproducer are
    the smallest failing case found so far (it printed the case as first found), and say so."""
    from eaglefuzz.harness.checking import shrinking
    from eaglefuzz.harness.checking.corpus import load_entry

    bug = mutants.write(mutants.BY_NAME[PI_BUG], tmp_path / "bugs")
    real, steps = shrinking.Shrinker.fails, []

    def fails(self, candidate, deadline=None):  # noqa: ANN001, ANN202
        if real(self, candidate, deadline):
            steps.append(self.finding.case)
            if len(steps) == 2:
                raise KeyboardInterrupt  # Ctrl-C right after the shrinker's second step
            return True
        return False

    monkeypatch.setattr(shrinking.Shrinker, "fails", fails)
    found = tmp_path / "found"
    code, out, err = run(capsys, "fuzz", "--kernels", str(bug), "--kernel", PI, "--mode", "bulk", "--domain",
                         "production", "--json", "--no-isolate", "--no-progress", "--corpus", str(found))
    assert code == 1, err
    doc = json.loads(out)
    assert doc["interrupted"] is True
    (f,) = doc["targets"][PI]["findings"]
    assert len(steps) == 2 and load_entry(f["file"]).case == steps[-1], "the case after the second step"
    assert "shrinking was interrupted after 2 step(s): this is the smallest failing case found so far" in f["report"]
    assert sorted(found.rglob("*.json")) == [Path(f["file"])], "the case as first found is not kept beside it"


EMPTY_REQUEST_OWN_START = (
    "    index_to_sample = q_last_tok_idx - num_rejected_tokens\n",
    "    q_first_tok_idx = tl.load(query_start_loc_gpu_ptr + req_idx)\n"
    "    q_last_tok_idx = tl.where(q_last_tok_idx < q_first_tok_idx, q_first_tok_idx, q_last_tok_idx)\n"
    "    index_to_sample = q_last_tok_idx - num_rejected_tokens\n",
)


@pytest.mark.kernel
def test_hypothesis_examples_are_those_asked_with_an_edge_divergence(tmp_path, mutants, capsys):
    """The fork of tests/test_domains.py (an empty request samples at its own start): the
    production tier gets the examples asked, then the search of the edges ends at the edge
    divergence, and its shrinking is not counted as examples."""
    m = mutants.Mutant("fork_empty_request_own_start", PI, "FORK: an empty request samples at its own start",
                       (EMPTY_REQUEST_OWN_START,))
    fork = mutants.write(m, tmp_path / "forks")
    code, out, err = run(capsys, "fuzz", "--kernels", str(fork), "--kernel", PI, "--domain", "extended",
                         "--examples", "50", "--json", "--no-isolate", "--no-progress", "--corpus", str(tmp_path / "f"))
    t = json.loads(out)["targets"][PI]
    assert code == 4, err
    assert len(t["edge_divergences"]) >= 1 and t["shrink_attempts"] > 0
    assert t["examples"] == sum(t["examples_per_tier"].values()) < 100
    assert t["examples_per_tier"]["production"] >= 50 and t["tiers_searched"] == ["production", "extended"]


# -- 5, 16: a file that cannot be used says why ---------------------------------------------------------


def test_a_file_whose_import_fails_names_the_module(tmp_path, capsys):
    path = tmp_path / "port.py"
    path.write_text("import nonexistent_module_of_a_port\n\n"
                    "eagle_prepare_inputs_padded_kernel = nonexistent_module_of_a_port.kernel\n")
    code, out, err = run(capsys, "fuzz", "--kernels", str(path), "--no-isolate")
    assert code == 2 and err.count("\n") == 1, err
    assert f"--kernels {path}: importing it failed (ModuleNotFoundError: No module named " \
           "'nonexistent_module_of_a_port')" in err


def test_a_copy_of_a_module_out_of_its_package_is_the_normal_case_and_says_nothing(tmp_path):
    """A kernel author's copy of the bundled module (or of vLLM's utils.py): its imports do not
    resolve outside its package (a relative import; vllm.*), which is what taking the functions
    without them is for. Every run printed 'note: ... importing it failed (ImportError: attempted
    relative import ...)': the normal case read like an error. A file whose other imports fail
    still gets its note (above)."""
    from eaglefuzz.harness.sources.file import FileSource

    bundled = ROOT / "kernels" / "spec_decode_utils.py"
    assert "from .vllm_types import" in bundled.read_text()  # the condition: a relative import
    path = tmp_path / "utils.py"
    path.write_text(bundled.read_text())
    impls = FileSource(path).load()
    assert "eagle_prepare_inputs_padded_kernel" in impls.funcs
    assert impls.notes == (), impls.notes


def test_replay_says_in_one_line_what_replays_the_cases_it_skips(tmp_path, capsys):
    """`eaglefuzz replay corpus/` on the bundled copy skipped the newer targets' cases with a
    line per target and no hint: one line, the count of each target, and the option that
    replays them (the release; for a target the release lacks, the bundled copy)."""
    import shutil

    es, dfl = "eagle_step_slot_mapping_metadata_kernel", "copy_and_expand_dflash_inputs_kernel"
    for name in (PI, es, dfl, dfl):
        f = sorted((ROOT / "corpus" / name).glob("*.json"))[len(list(tmp_path.glob(f"{name}-*")))]
        shutil.copy(f, tmp_path / f"{name}-{f.name}")
    code, out, _ = run(capsys, "replay", str(tmp_path), "--no-isolate")
    assert code == 0, out
    skipped = [ln for ln in out.splitlines() if ln.startswith("not replayed")]
    assert skipped == [f"not replayed: 3 case(s) of 2 targets bundled production copy (kernels/spec_decode_utils.py) "
                       f"does not define ({dfl} 2, {es} 1); --vllm-version {PINNED} replays them"], out


@pytest.mark.parametrize("name", [n for n in TARGETS if TARGETS[n].array_names])
def test_a_reproducer_lists_the_arrays_in_the_signatures_order_from_a_run_and_a_file(name):
    """A reproducer listed the arrays in the signature's order from `fuzz` and alphabetically
    from `replay` (a corpus file's keys are sorted): the signature's order from both."""
    from eaglefuzz.harness.checking.check import Finding
    from eaglefuzz.harness.checking.corpus import case_hash, decode
    from eaglefuzz.harness.sources.base import Origin
    from eaglefuzz.harness.targets import Outcome

    t = TARGETS[name]
    params = [p.removesuffix("_ptr") for p in t.parameters or ()]
    mine = [params.index(a) for a in t.array_names if a in params]
    assert mine == sorted(mine), (t.array_names, params)  # the signature's order (a metadata's fields first)
    f = sorted((ROOT / "corpus" / name).glob("*.json"))[0]
    case = decode(f.read_text(), str(f)).case
    assert list(case.arrays) == [a for a in t.array_names if a in case.arrays] + \
        [a for a in case.arrays if a not in t.array_names]
    shuffled = type(case)(case.kernel, dict(reversed(list(case.arrays.items()))), case.scalars, case.launch)
    src = Finding(shuffled, Outcome(crash="x"), Origin("test", "test", name)).reproducer()
    at = [src.index(f"'{a}': ") for a in case.arrays]
    assert at == sorted(at), src
    assert case_hash(shuffled) == case_hash(case)


def test_a_copy_of_the_rejection_sampler_names_the_others_as_another_files(tmp_path):
    """A copy of rejection_sampler.py lacks the spec-decode module's targets: they are another
    file's ("--kernels that file"), not ones to take from the bundled copy with --kernel (the
    note said so of the five the bundled copy has)."""
    from eaglefuzz.harness.sources import implementations_for
    from eaglefuzz.harness.sources.file import FileSource

    greedy = TARGETS["rejection_greedy_sample_kernel"]
    path = tmp_path / "rejection_sampler.py"
    path.write_text(f"def rejection_greedy_sample_kernel({', '.join(greedy.parameters)}):\n    pass\n")
    notes = implementations_for(FileSource(path)).notes
    assert not any("bundled production copy" in n for n in notes), notes
    (note,) = [n for n in notes if "their code is vLLM's vllm/v1/spec_decode/utils.py, another file" in n]
    assert all(n in note for n, t in TARGETS.items() if t.module == "vllm/v1/spec_decode/utils.py"), note


# -- 6: tables fit any log ---------------------------------------------------------------------------------


def test_the_table_never_cuts_a_target_name():
    import io

    from eaglefuzz.harness.reporting.fuzz_report import print_fuzz
    from eaglefuzz.harness.targets import TARGETS

    entry = {"implementation": "x", "examples": 10, "shrink_attempts": 3, "tokens_verified": 123456, "seconds": 1.0,
             "features_reached": ["a"], "features_missed": ["b"], "examples_per_tier": {"extended": 5, "production": 5},
             "edges_reached": ["e"], "edges_missed": ["f"], "findings": [], "edge_divergences": []}
    doc = {"seed": 0, "mode": "hypothesis", "backend": "interpreter", "source": "s", "notes": [], "shard": "1/1",
           "domain": "extended", "interrupted": False, "untested": {}, "targets": dict.fromkeys(TARGETS, entry)}
    out = io.StringIO()
    print_fuzz(doc, width=80, out=out)
    text = out.getvalue()
    assert "…" not in text
    rows = [ln for ln in text.splitlines() if ln.startswith("│")]
    assert [ln.split("│")[1].strip() for ln in rows] == list(TARGETS)


def test_the_source_block_names_only_the_targets_from_elsewhere():
    """The report's source block repeated, per target, the file and function every finding's
    `tested:` line names: it lists only the targets whose code is not the source's file (the
    bundled copy of a target the file lacks, a variant, bound parameters, another module). The
    model runner follows the source (and each target listed apart), as a `tested:` line ends."""
    import io

    from eaglefuzz.harness.reporting.fuzz_report import print_fuzz

    def entry(implementation: str) -> dict:
        return {"runner": "V1", "implementation": implementation, "examples": 10, "shrink_attempts": 0,
                "tokens_verified": 1, "seconds": 1.0, "features_reached": ["a"], "features_missed": [],
                "findings": [], "edge_divergences": []}

    mine = {n: entry(f"/tmp/qs/utils.py::{n} (your file)") for n in (PI, NT, "compute_new_slot_mapping")}
    other = {"create_vllm_config_for_draft_model": entry(
        "kernels/spec_decode_utils.py::create_vllm_config_for_draft_model (bundled production copy)")}
    for targets, listed in ((mine, []), ({**mine, **other}, list(other))):
        doc = {"seed": 0, "mode": "hypothesis", "backend": "interpreter", "source": "file /tmp/qs/utils.py",
               "notes": [], "shard": "1/1", "domain": "production", "interrupted": False, "untested": {},
               "targets": targets}
        out = io.StringIO()
        print_fuzz(doc, width=120, out=out)
        lines = out.getvalue().splitlines()
        block = lines[lines.index("source: file /tmp/qs/utils.py, model runner V1") + 1:]
        apart = [ln for ln in block if ln.startswith("  ")]
        assert [ln.split(":")[0].strip() for ln in apart] == listed, out.getvalue()
        assert all(ln.endswith(", model runner V1") for ln in apart), out.getvalue()


def test_the_source_line_names_each_runner_of_a_mixed_run():
    """A run of targets of both model runners says which is which (no document before the
    runner was recorded says any)."""
    from eaglefuzz.harness.reporting.fuzz_report import runners

    v1, v2 = {"runner": "V1"}, {"runner": "V2"}
    assert runners({"a": v1, "b": v1}) == ", model runner V1"
    assert runners({"a": v1, "b": v2, "c": v1}) == ", model runners V1 for a, c; V2 for b"
    assert runners({"a": {}}) == "" and runners({}) == ""


# -- 7: pytest on a corrupt corpus file -----------------------------------------------------------------------


def test_pytest_on_a_corrupt_case_gives_the_line_replay_gives(tmp_path, capsys, monkeypatch):
    (tmp_path / "garbage.json").write_text("this is not a corpus case\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "replay", "garbage.json")
    assert code == 2 and err.startswith("eaglefuzz: error: garbage.json: line 1")
    line = err.strip().removeprefix("eaglefuzz: error: ")
    # pytest in this process (its plugin is loaded already; tests/conftest.py puts back what the session
    # sets in os.environ): what `pytest garbage.json` prints
    assert pytest.main(["garbage.json", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *PLUGIN]) == 1
    out = capsys.readouterr().out
    assert "not found" not in out and "Traceback" not in out
    assert f"\n{line}\n" in out, out


def test_pytest_on_a_case_of_an_untested_target_fails_with_its_verdict(tmp_path, mutants, capsys, monkeypatch):
    clean = fork_module(tmp_path, mutants, nt_bug=False)
    case = sorted((ROOT / "corpus" / PI).glob("*.json"))[0]
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert pytest.main([str(case), "--kernels", str(clean), "-q", "-p", "no:cacheprovider", *PLUGIN]) == 1
    out = capsys.readouterr().out
    assert f"{clean}: {PI} has another interface than the contract's (extra use_index_clamp)" in out
    assert "eaglefuzz: not tested" in out  # the session's summary says it too


# -- 9: a never-written element ---------------------------------------------------------------------------------


@pytest.mark.kernel
def test_a_never_written_element_says_so(tmp_path, mutants, backend):
    from eaglefuzz.harness.checking.check import check_case
    from eaglefuzz.harness.checking.corpus import load_case
    from eaglefuzz.harness.sources import implementations_for
    from eaglefuzz.harness.sources.file import FileSource

    src = replace_once(mutants.production_source(PI), "    tl.store(num_rejected_tokens_gpu_ptr + req_idx, num_rejected_tokens)\n", "")
    path = tmp_path / "forgets.py"
    path.write_text("import triton\nimport triton.language as tl\n\n" + src)
    case = load_case(next(iter(sorted((ROOT / "corpus" / PI).glob("*.json")))))
    finding = check_case(case, implementations_for(FileSource(path)), backend.device)
    assert finding is not None
    missing = [d for d in finding.outcome.differences if d.array == "num_rejected_tokens"]
    assert missing and all(d.actual == d.sentinel for d in missing)
    assert f"actual never written (sentinel {missing[0].sentinel})" in missing[0].describe()
    assert missing[0].describe() in finding.report()
    records = [d for d in finding.to_json()["differences"] if d["array"] == "num_rejected_tokens"]
    assert records and all(d["never_written"] and d["actual"] == d["sentinel"] for d in records)


def test_an_output_holding_an_inputs_poison_says_so():
    from eaglefuzz.harness.core.buffers import poison
    from eaglefuzz.harness.core.compare import compare_arrays

    read = poison(np.dtype(np.int64))
    expected, actual = np.array([0, 1, 7], dtype=np.int64), np.array([read, read + 1, -0x5A5A5A5B], dtype=np.int64)
    d = compare_arrays("out_positions", expected, actual, locate=lambda a, i: (0, "bonus slot"), versus="oracle",
                       sentinel=-0x5A5A5A5B)
    assert d[0].describe().endswith(f"actual {read} (the poison of the inputs' guard bands: read outside an input)"
                                    "  [vs oracle]")
    assert "poison" not in d[1].describe()  # not the poison itself: no guess
    assert "actual never written (sentinel -1515870811)" in d[2].describe()


def test_a_never_written_float_shows_the_fills_bits():
    """A float output's never-written element: the fill as the bits the array holds, not the
    integer they make (a report said "actual never written (sentinel -1515870811)" of a float
    array)."""
    from eaglefuzz.harness.core.compare import compare_arrays

    expected = np.array([0.5, 1.0], dtype=np.float32)
    actual = expected.copy()
    actual.view(np.int32)[1] = -0x5A5A5A5B
    (d,) = compare_arrays("out", expected, actual, locate=lambda a, i: (0, "row"), versus="oracle", sentinel=-0x5A5A5A5B)
    assert d.describe() == ("out[1] request 0 (row): expected 1.0 (bits 0x3f800000), actual never written "
                            "(the sentinel fill, bits 0xa5a5a5a5)  [vs oracle]")
    assert d.to_json()["never_written"]


# -- 10, 16: the text report and the progress lines -------------------------------------------------------------


@pytest.mark.kernel
def test_the_text_report_reads_right(tmp_path, mutants, capsys, monkeypatch):
    monkeypatch.setenv("EAGLEFUZZ_PROGRESS_EVERY", "0")  # a line per example
    bug = mutants.write(mutants.BY_NAME[PI_BUG], tmp_path / "bugs")
    code, out, err = run(capsys, "fuzz", "--kernels", str(bug), "--examples", "2", "--no-isolate", "--no-progress",
                         "--corpus", str(tmp_path / "found"))
    assert code == 1, err
    lines = out.splitlines()
    # the reproducer's block ends in its closing fence and a blank line, so copying it does not take
    # the table's title
    end = lines.index("# --- end of reproducer ---")
    assert lines[end - 1].startswith("), source=")
    assert lines[end + 1] == "" and "eaglefuzz fuzz: seed 0" in lines[end + 2]
    # notes once: in the report
    assert (out + err).count("does not define") == 2  # the older and the newer targets of the file's module
    assert out.count("note: ") == 9  # and the rejection sampler's and the six Model Runner V2 files', whose code is another file
    progress = [ln for ln in err.splitlines() if ln.startswith(f"eaglefuzz: {PI}: ")]
    assert progress and progress[0].startswith(f"eaglefuzz: {PI}: 1 example, ")
    counts = [ln.split(" ex/s")[0].rsplit(",", 1)[0] + ln.split(" ex/s, ")[1].split(",")[0] for ln in progress]
    assert len(counts) == len(set(counts)), "a progress line is printed twice"


# -- 13: audit's examples per tier ------------------------------------------------------------------------------


@pytest.mark.kernel
def test_audit_examples_per_tier_are_those_said(capsys):
    code, out, err = run(capsys, "audit", "--kernel", PI, "--kernel", NT, "--examples", "12", "--json")
    assert code == 0, err
    doc = json.loads(out)
    for name in (PI, NT):
        assert doc["targets"][name]["searched"] == {"production": 12, "extended": 12}
    code, out, _ = run(capsys, "audit", "--kernel", PI, "--examples", "12")
    assert "12 examples per tier" in out and f"## {PI}: production 12, extended 12 examples" in out



def test_a_finding_derives_its_features_and_reproducer_once_per_case(monkeypatch):
    """A finding is reported more than once (saved, printed); what comes from its case alone (the
    features, the reproducer: gigabytes read for a production-scale case) is made once, and made
    again when the finding's case is another (a shrunk one)."""
    record = TARGETS[PI]
    calls = []
    real = type(record).features_of
    monkeypatch.setattr(type(record), "features_of", lambda self, case: calls.append(case) or real(self, case))
    f = _failing(_pi_minimal_case(), "request")
    first = f.report()
    assert f.report() == first and f.report(saved=Path("x.json")) != first
    assert len(calls) == 1
    f.case = _pi_minimal_case()
    f.report()
    assert len(calls) == 2
