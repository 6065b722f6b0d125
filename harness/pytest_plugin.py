"""pytest plugin of eaglefuzz: options, session fixtures, Hypothesis profiles, Numba caches.

Options: ``--kernels PATH`` (implementations to test, see :mod:`.impls`) and ``--backend``
(``auto``, ``cuda``, ``interpreter``). The backend is chosen in ``pytest_configure``, before
any kernel module is imported, because Triton reads ``TRITON_INTERPRET`` at import.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

from .backend import BACKENDS, Backend, select_backend
from .errors import UserError
from .impls import Implementations, load_implementations
from .journal import Journal, orphans
from .profiles import DEFAULT_PROFILE, register_profiles
from .strategies import CUDA_SCALE, INTERPRETER_SCALE, Scale

_BACKEND = pytest.StashKey[Backend]()
_IMPLS = pytest.StashKey[Implementations]()
_CRASHES = pytest.StashKey[list[str]]()

register_profiles()
settings.load_profile(os.environ.get("EAGLEFUZZ_PROFILE", DEFAULT_PROFILE))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("eaglefuzz")
    group.addoption(
        "--kernels",
        metavar="PATH",
        default=None,
        help="Python file defining kernels under their vLLM names; the rest come from kernels/",
    )
    group.addoption(
        "--eaglefuzz-seed",
        type=int,
        default=0,
        help="base seed of every fuzzing test (the same seed draws the same cases; default 0)",
    )
    group.addoption(
        "--eaglefuzz-corpus",
        metavar="DIR",
        default=None,
        help="where findings of the property tests are saved [default: the checkout's corpus/]",
    )
    group.addoption(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="where kernels run: compiled on CUDA, or the Triton interpreter (auto: CUDA if present)",
    )


def _cache_root() -> Path:
    return Path(os.environ.get("EAGLEFUZZ_CACHE", Path(tempfile.gettempdir()) / "eaglefuzz-cache"))


def pytest_configure(config: pytest.Config) -> None:
    # One Numba cache per xdist worker: concurrent writers have corrupted shared caches.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    base = os.environ.get("EAGLEFUZZ_NUMBA_CACHE_BASE") or os.environ.get("NUMBA_CACHE_DIR") or str(_cache_root() / "numba")
    os.environ["EAGLEFUZZ_NUMBA_CACHE_BASE"] = base
    os.environ["NUMBA_CACHE_DIR"] = str(Path(base) / worker)
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        os.environ[_JOURNAL_ENV] = str(_cache_root() / "journal" / str(os.getpid()))
    try:
        config.stash[_BACKEND] = select_backend(config.getoption("backend"))
        from .targets import TARGETS

        config.stash[_IMPLS] = load_implementations(config.getoption("kernels"), TARGETS)
    except UserError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    b = config.stash.get(_BACKEND, None)
    impls = config.stash.get(_IMPLS, None)
    lines = []
    if b is not None:
        lines.append(f"eaglefuzz: backend {b.name} ({b.device}), hypothesis profile {settings.get_current_profile_name()}")
    if impls is not None and config.getoption("kernels"):
        lines.append(f"eaglefuzz: kernels from {config.getoption('kernels')}: "
                     + ", ".join(n for n, o in impls.origin.items() if o != "kernels/spec_decode_utils.py"))
    return lines


_JOURNAL_ENV = "EAGLEFUZZ_JOURNAL_DIR"


def _journal_dir() -> Path:
    """This session's journal folder: the controller's, handed to xdist workers by environment."""
    return Path(os.environ.get(_JOURNAL_ENV) or _cache_root() / "journal" / str(os.getpid()))


def _dead_journal_dirs() -> list[Path]:
    """This session's folder and those of earlier sessions whose controller is gone."""
    from .journal import _alive

    own = _journal_dir()
    root = own.parent
    dirs = [own]
    if root.is_dir():
        for d in sorted(root.iterdir()):
            if d != own and d.is_dir() and d.name.isdigit() and not _alive(int(d.name)):
                dirs.append(d)
    return dirs


def _corpus_dir(config: pytest.Config) -> Path:
    from .corpus import CORPUS_DIR

    given = config.getoption("eaglefuzz_corpus")
    return Path(given) if given else CORPUS_DIR


def _findings(exc: BaseException | None) -> list:
    from .check import DifferenceFound

    if isinstance(exc, DifferenceFound):
        return [exc.finding]
    if isinstance(exc, BaseExceptionGroup):
        return [f for e in exc.exceptions for f in _findings(e)]
    return []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Save every finding of a test to the corpus, with its report and replay command."""
    report = yield
    if call.excinfo is not None and call.when == "call":
        from .corpus import save_finding

        kernels = item.config.getoption("kernels")
        sink = getattr(item, "funcargs", {}).get("finding_sink")
        for finding in _findings(call.excinfo.value):
            try:
                path = save_finding(finding, _corpus_dir(item.config), kernels)
            except Exception as exc:  # noqa: BLE001 - never lose the test's own failure
                report.sections.append(("eaglefuzz", f"could not save the finding: {exc}"))
                continue
            if sink is not None:
                sink.settle(path)
            replay = f"eaglefuzz replay {path}" + (f" --kernels {kernels}" if kernels else "")
            report.sections.append(("eaglefuzz", f"finding saved to {path}\nreplay: {replay}"))
    return report


class FindingSink:
    """Saves a test's first finding at once, before shrinking, so an interrupt cannot lose it.

    When the test ends with its shrunk finding saved, the unshrunk files this sink wrote are
    removed; when the run is interrupted first, they stay in the corpus.
    """

    def __init__(self, corpus_dir: Path, kernels: str | None) -> None:
        self.corpus_dir, self.kernels = corpus_dir, kernels
        self.pending: list[Path] = []

    def keep(self, finding) -> None:  # noqa: ANN001 - a check.Finding
        """Save ``finding`` unless this test already kept one."""
        from .corpus import case_path, save_finding

        if self.pending:
            return
        existed = case_path(finding.case, self.corpus_dir).exists()
        path = save_finding(finding, self.corpus_dir, self.kernels)
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
    return FindingSink(_corpus_dir(pytestconfig), pytestconfig.getoption("kernels"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """On the controller: a journal left by a dead process names the case that killed it."""
    if hasattr(session.config, "workerinput"):
        return
    from .check import Finding
    from .corpus import save_finding
    from .targets import Outcome

    lines = []
    dirs = _dead_journal_dirs()
    for orphan in [o for d in dirs for o in orphans(d)]:
        if orphan.case is None:
            lines.append(f"{orphan.file}: a test process died; its journal could not be read: {orphan.error}")
        else:
            impls = session.config.stash.get(_IMPLS, None)
            origin = impls.origin.get(orphan.case.kernel, "?") if impls else "?"
            crash = orphan.message or "a test process died while running this case"
            finding = Finding(orphan.case, Outcome(crash=crash), origin)
            path = save_finding(finding, _corpus_dir(session.config), session.config.getoption("kernels"))
            lines.append(f"a test process died while checking a case, saved to {path}:\n{finding.report()}")
        orphan.remove()
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            pass
    if lines:
        session.config.stash[_CRASHES] = lines
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    for line in config.stash.get(_CRASHES, []):
        terminalreporter.write_sep("=", "eaglefuzz: crash", red=True)
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def journal() -> Journal:
    """This process's crash journal (one file per xdist worker and process)."""
    return Journal(_journal_dir(), owner=os.environ.get("PYTEST_XDIST_WORKER", "main"))


@pytest.fixture(scope="session")
def backend(pytestconfig: pytest.Config) -> Backend:
    """The backend kernels run on (chosen once per session)."""
    return pytestconfig.stash[_BACKEND]


@pytest.fixture(scope="session")
def impls(pytestconfig: pytest.Config) -> Implementations:
    """The implementations under test (``--kernels`` overrides, the rest from ``kernels/``)."""
    return pytestconfig.stash[_IMPLS]


@pytest.fixture(scope="session")
def fuzz_seed(pytestconfig: pytest.Config) -> int:
    """Base seed of fuzzing tests; combine it with the test's own key via :func:`.strategies.derive_seed`."""
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
