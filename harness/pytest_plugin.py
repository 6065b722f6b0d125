"""pytest plugin of eaglefuzz: options, session fixtures, corpus files as tests, a ready suite.

Registered through the ``pytest11`` entry point, so its options work wherever pytest runs:
the source options (``--kernels PATH`` and the others of :mod:`.sources`), ``--backend``
(``auto``, ``cuda``, ``interpreter``), ``--eaglefuzz-seed``, ``--eaglefuzz-domain``,
``--eaglefuzz-corpus``. The plugin
stays inert in a session that is not eaglefuzz's: it becomes active when one of its options is
given, when a corpus file is named, or when the ini option ``eaglefuzz = true`` says the test
suite is eaglefuzz's own. Given no test path outside such a suite, it runs its own
(:mod:`.suite`: every target fuzzed, the corpus replayed). The backend is chosen in
``pytest_configure``, before any kernel module is imported (Triton reads ``TRITON_INTERPRET``
at import).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from .core.errors import UserError
from .generation.strategies import CUDA_SCALE, INTERPRETER_SCALE, Scale
from .run.cuda_devices import XDIST_DEVICES_ENV, cuda_devices, pin_xdist_worker
from .run.journal import Journal, orphans
from .run.lifeline import alive
from .sources import (
    OPTIONS,
    PARAM_HELP,
    Implementations,
    Source,
    findings_dir,
    implementations_for,
    source_from_options,
)
from .sources.triton_backend import BACKENDS, Backend, select_backend

_BACKEND = pytest.StashKey[Backend]()
_IMPLS = pytest.StashKey[Implementations]()
_SOURCE = pytest.StashKey[Source]()
_ACTIVE = pytest.StashKey[bool]()
_CRASHES = pytest.StashKey[list[str]]()
_PINNED = pytest.StashKey["str | None"]()
SUITE = Path(__file__).with_name("suite.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("eaglefuzz")
    for o in OPTIONS:
        if o.metavar is None:
            group.addoption(o.flag, dest=o.dest, action="store_true", default=False, help=o.help)
        else:
            group.addoption(o.flag, dest=o.dest, metavar=o.metavar, default=None, help=o.help)
    group.addoption("--param", dest="params", action="append", metavar="NAME=VALUE", default=None,
                    help=PARAM_HELP)
    group.addoption("--eaglefuzz-source", dest="source", metavar="SPEC", default=None,
                    help="the source of the code under test as a spec (file:PATH, bundled, ...)")
    group.addoption(
        "--eaglefuzz-seed",
        type=int,
        default=0,
        help="base seed of every fuzzing test (the same seed draws the same cases; default 0)",
    )
    group.addoption(
        "--eaglefuzz-domain",
        choices=("production", "extended"),
        default="extended",
        help="the tiers the ready suite fuzzes (pytest --kernels PATH without a test path): extended "
             "(the default) the production tier and the extended tier's edges, an item each; production "
             "the production tier alone",
    )
    group.addoption(
        "--eaglefuzz-corpus",
        metavar="DIR",
        default=None,
        help="where findings are saved [default: corpus/ for production code, ./eaglefuzz-findings otherwise]",
    )
    group.addoption(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="where kernels run: compiled on CUDA, or the Triton interpreter (auto: CUDA if present)",
    )
    parser.addini("eaglefuzz", type="bool", default=False,
                  help="this test suite is eaglefuzz's own: set up the eaglefuzz plugin for it")


def _source_values(config: pytest.Config) -> dict[str, Any]:
    values = {o.dest: config.getoption(o.dest) for o in OPTIONS}
    values["source"] = config.getoption("source")
    values["params"] = config.getoption("params")
    return values


def _active(config: pytest.Config) -> bool:
    if config.getini("eaglefuzz"):
        return True
    if any(v not in (None, False) for v in _source_values(config).values()):
        return True
    if (config.getoption("backend") != "auto" or config.getoption("eaglefuzz_corpus")
            or config.getoption("eaglefuzz_domain") != "extended"):
        return True
    return any(str(a).split("::")[0].endswith(".json") for a in config.args)


def _cache_root() -> Path:
    return Path(os.environ.get("EAGLEFUZZ_CACHE", Path(tempfile.gettempdir()) / "eaglefuzz-cache"))


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_ACTIVE] = active = _active(config)
    if not active:
        return
    from hypothesis import settings

    from .core.profiles import DEFAULT_PROFILE, register_profiles

    register_profiles()
    if not config.getoption("hypothesis_profile", None):  # pytest's --hypothesis-profile wins
        settings.load_profile(os.environ.get("EAGLEFUZZ_PROFILE", DEFAULT_PROFILE))
    # One Numba cache per xdist worker: concurrent writers have corrupted shared caches.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    base = os.environ.get("EAGLEFUZZ_NUMBA_CACHE_BASE") or os.environ.get("NUMBA_CACHE_DIR") or str(_cache_root() / "numba")
    os.environ["EAGLEFUZZ_NUMBA_CACHE_BASE"] = base
    os.environ["NUMBA_CACHE_DIR"] = str(Path(base) / worker)
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        os.environ[_JOURNAL_ENV] = str(_cache_root() / "journal" / str(os.getpid()))
    _share_out_devices(config)
    try:
        config.stash[_BACKEND] = select_backend(config.getoption("backend"))
        source = source_from_options(_source_values(config))
        config.stash[_SOURCE] = source
        config.stash[_IMPLS] = implementations_for(source)
    except UserError as exc:
        raise pytest.UsageError(str(exc)) from None
    if not config.getini("eaglefuzz") and config.args_source == pytest.Config.ArgsSource.INVOCATION_DIR:
        config.args[:] = [str(SUITE)]  # no test path given: run eaglefuzz's own suite


def _share_out_devices(config: pytest.Config) -> None:
    """Several GPUs and xdist workers: each worker gets its own GPU, ``gwN`` the ``N % k``-th
    of the ``k`` visible ones (:mod:`.run.cuda_devices`). The controller lists the devices for its
    workers (in the environment they inherit); a worker pins itself before torch initialises
    CUDA (:func:`~.run.cuda_devices.pin_xdist_worker`), so before the backend is chosen."""

    if hasattr(config, "workerinput"):
        config.stash[_PINNED] = pin_xdist_worker()
        return
    if not getattr(config.option, "numprocesses", None) or getattr(config.option, "dist", "no") == "no":
        return
    devices = cuda_devices()
    if len(devices) > 1:
        os.environ[XDIST_DEVICES_ENV] = ",".join(devices)
        config.stash[_PINNED] = (f"{len(devices)} CUDA devices shared out: xdist worker gwN gets device "
                                 f"N % {len(devices)} of {','.join(devices)} (CUDA_VISIBLE_DEVICES set in "
                                 "each worker before torch initialises CUDA; torch.cuda.set_device where "
                                 "it already had)")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A corpus file (``*.json`` with a schema and a kernel) is a test: its case replayed."""
    if file_path.suffix != ".json" or not parent.config.stash.get(_ACTIVE, False):
        return None
    try:
        with open(file_path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return None
    named = parent.session.isinitpath(file_path)  # given on the command line: a case, or a one-line error
    if not named and ('"schema"' not in head or '"kernel"' not in head):
        return None
    return CorpusFile.from_parent(parent, path=file_path)


class CorpusFile(pytest.File):
    """One corpus file: one item that replays its case."""

    def collect(self):  # noqa: ANN201 - pytest's own signature
        yield CorpusCase.from_parent(self, name=self.path.stem)


class CorpusCase(pytest.Item):
    """The case of one corpus file, checked against the implementations under test."""

    def runtest(self) -> None:
        from .checking.check import DifferenceFound, check_case
        from .checking.corpus import load_entry
        from .checking.costs import LimitExceeded, check_cost

        try:
            entry = load_entry(self._given_path())
        except UserError as exc:
            bad = str(exc)  # the line `eaglefuzz replay` gives (file, field or line, rule)
        else:
            bad = None
        if bad is not None:
            pytest.fail(bad, pytrace=False)
        case = entry.case
        impls = self.config.stash[_IMPLS]
        if case.kernel in impls.untested:
            pytest.fail(impls.untested[case.kernel], pytrace=False)
        if case.kernel not in impls:
            pytest.skip(f"{self.config.stash[_SOURCE].describe()} does not define {case.kernel}")
        device = self.config.stash[_BACKEND].device
        try:
            check_cost(case, interpreter=device == "cpu")  # too big to run on this backend
        except LimitExceeded as exc:
            pytest.fail(f"{self.path}: {exc.field}: {exc.rule}", pytrace=False)
        finding = check_case(case, impls, device, _journal(), domain=entry.tier)
        if finding is not None:
            raise DifferenceFound(finding)

    def _given_path(self) -> Path:
        """The file as the command line names it (relative to where pytest was started, when
        it lies below), as ``eaglefuzz replay`` names it."""
        start = self.config.invocation_params.dir
        try:
            return self.path.relative_to(start)
        except ValueError:
            return self.path

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        from .checking.check import DifferenceFound

        if isinstance(excinfo.value, DifferenceFound):
            return excinfo.value.finding.report(saved=self.path)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"corpus case {self.path}"


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not config.stash.get(_ACTIVE, False):
        return []
    b = config.stash.get(_BACKEND, None)
    impls = config.stash.get(_IMPLS, None)
    source = config.stash.get(_SOURCE, None)
    lines = []
    if b is not None:
        from hypothesis import settings

        lines.append(f"eaglefuzz: backend {b.name} ({b.device}), hypothesis profile {settings.get_current_profile_name()}")
    if config.stash.get(_PINNED, None):
        lines.append(f"eaglefuzz: {config.stash[_PINNED]}")
    if impls is not None and source is not None:
        lines.append(f"eaglefuzz: source {source.describe()}: {', '.join(impls.funcs) or 'no target'}")
        lines += [f"eaglefuzz: {n}" for n in impls.notes]
        lines += [f"eaglefuzz: not tested: {n}" for n in impls.untested.values()]
    return lines


_JOURNAL_ENV = "EAGLEFUZZ_JOURNAL_DIR"


def _journal_dir() -> Path:
    """This session's journal folder: the controller's, handed to xdist workers by environment."""
    return Path(os.environ.get(_JOURNAL_ENV) or _cache_root() / "journal" / str(os.getpid()))


def _dead_journal_dirs() -> list[Path]:
    """This session's folder and those of earlier sessions whose controller is gone."""

    own = _journal_dir()
    root = own.parent
    dirs = [own]
    if root.is_dir():
        for d in sorted(root.iterdir()):
            if d != own and d.is_dir() and d.name.isdigit() and not alive(int(d.name)):
                dirs.append(d)
    return dirs


def _corpus_dir(config: pytest.Config, finding: Any) -> Path:
    """Where ``finding`` is saved: by its own origin, not the session's source (a test may
    raise a finding about an implementation of its own making)."""
    return findings_dir(finding.origin, config.getoption("eaglefuzz_corpus"))


def _findings(exc: BaseException | None) -> list:
    from .checking.check import DifferenceFound

    if isinstance(exc, DifferenceFound):
        return [exc.finding]
    if isinstance(exc, BaseExceptionGroup):
        return [f for e in exc.exceptions for f in _findings(e)]
    return []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Save every finding of a test (a corpus file's item aside) with its replay commands."""
    report = yield
    if call.excinfo is not None and call.when == "call" and not isinstance(item, CorpusCase):
        from .checking.check import DifferenceFound
        from .checking.corpus import save_finding

        sink = getattr(item, "funcargs", {}).get("finding_sink")
        for finding in _findings(call.excinfo.value):
            try:
                path = save_finding(finding, _corpus_dir(item.config, finding))
            except Exception as exc:  # noqa: BLE001 - never lose the test's own failure
                report.sections.append(("eaglefuzz", f"could not save the finding: {exc}"))
                continue
            if sink is not None:
                sink.settle(path)
            if isinstance(call.excinfo.value, DifferenceFound):
                # the finding's report is the failure (with its replay commands), not the test's
                # source and locals before it
                report.longrepr = finding.report(saved=path)
                continue
            lines = [f"finding saved to {path}", "replay it:"] + ["    " + c for c in finding.replay_commands(path)]
            report.sections.append(("eaglefuzz", "\n".join(lines)))
    return report


class FindingSink:
    """Saves a test's first finding at once, before shrinking, so an interrupt cannot lose it.

    When the test ends with its shrunk finding saved, the unshrunk files this sink wrote are
    removed; when the run is interrupted first, they stay in the corpus.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.pending: list[Path] = []

    def keep(self, finding) -> None:  # noqa: ANN001 - a check.Finding
        """Save ``finding`` unless this test already kept one."""
        from .checking.corpus import case_path, save_finding

        if self.pending:
            return
        corpus_dir = _corpus_dir(self.config, finding)
        existed = case_path(finding.case, corpus_dir).exists()
        try:
            path = save_finding(finding, corpus_dir)
        except OSError:  # the test's report still carries the finding, and says the file could not be written
            return
        if not existed:
            self.pending.append(path)

    def settle(self, final: Path) -> None:
        """The shrunk finding is saved at ``final``: drop the unshrunk ones."""
        for p in self.pending:
            if p != final:
                p.unlink(missing_ok=True)
        self.pending.clear()


@pytest.fixture
def finding_sink(pytestconfig: pytest.Config) -> FindingSink:
    """Keeps a property test's first (unshrunk) finding in the corpus until the shrunk one lands."""
    return FindingSink(pytestconfig)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """On the controller: a journal left by a dead process names the case that killed it."""
    if hasattr(session.config, "workerinput") or not session.config.stash.get(_ACTIVE, False):
        return
    from .checking.check import Finding
    from .checking.corpus import save_finding
    from .targets import Outcome

    lines = []
    dirs = _dead_journal_dirs()
    source = session.config.stash.get(_SOURCE, None)
    for orphan in [o for d in dirs for o in orphans(d)]:
        if orphan.case is None or source is None:
            lines.append(f"{orphan.file}: a test process died; its journal could not be read: {orphan.error}")
        else:
            crash = orphan.message or "a test process died while running this case"
            finding = Finding(orphan.case, Outcome(crash=crash), source.origin(orphan.case.kernel))
            path = save_finding(finding, _corpus_dir(session.config, finding))
            lines.append(f"a test process died while checking a case, saved to {path}:\n{finding.report(saved=path)}")
        orphan.remove()
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            pass
    if lines:
        session.config.stash[_CRASHES] = lines
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    impls = session.config.stash.get(_IMPLS, None)
    if impls is not None and impls.untested and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a target the source defines was not tested


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    for line in config.stash.get(_CRASHES, []):
        terminalreporter.write_sep("=", "eaglefuzz: crash", red=True)
        terminalreporter.write_line(line)
    impls = config.stash.get(_IMPLS, None) if config.stash.get(_ACTIVE, False) else None
    if impls is not None and impls.untested:
        terminalreporter.write_sep("=", "eaglefuzz: not tested", red=True)
        for line in impls.untested.values():
            terminalreporter.write_line(line)


def _journal() -> Journal:
    return Journal(_journal_dir(), owner=os.environ.get("PYTEST_XDIST_WORKER", "main"))


@pytest.fixture(scope="session")
def journal() -> Journal:
    """This process's crash journal (one file per xdist worker and process)."""
    return _journal()


@pytest.fixture(scope="session")
def backend(pytestconfig: pytest.Config) -> Backend:
    """The backend kernels run on (chosen once per session)."""
    return pytestconfig.stash[_BACKEND]


@pytest.fixture(scope="session")
def impls(pytestconfig: pytest.Config) -> Implementations:
    """The implementations under test: every target the chosen source defines."""
    return pytestconfig.stash[_IMPLS]


@pytest.fixture
def impl_of(impls: Implementations):  # noqa: ANN201
    """``impl_of(name)``: skip the test, saying why, when the source does not define ``name``."""

    def require(name: str) -> Any:
        if name in impls.untested:
            pytest.fail(impls.untested[name], pytrace=False)
        if name not in impls:
            pytest.skip(f"{impls.source.describe() if impls.source else 'the source'} does not define {name}")
        return impls[name]

    return require


@pytest.fixture(scope="session")
def fuzz_seed(pytestconfig: pytest.Config) -> int:
    """Base seed of fuzzing tests; combine it with the test's own key via :func:`.generation.strategies.derive_seed`."""
    return pytestconfig.getoption("eaglefuzz_seed")


@pytest.fixture(scope="session")
def scale(backend: Backend) -> Scale:
    """Batch sizes fit for the backend: small grids for the interpreter, large ones compiled."""
    return CUDA_SCALE if backend.compiled else INTERPRETER_SCALE


@pytest.fixture(scope="session")
def warm_oracles() -> None:
    """Compile the Numba oracles once, before any Hypothesis example is timed."""
    import numpy as np

    from .targets import TARGETS

    rng = np.random.default_rng(0)
    for target in TARGETS.values():
        target.oracle_check(target.random_case(rng, Scale(max_requests=2, request_tail=2, max_query_len=4)))
