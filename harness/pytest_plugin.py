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
from .profiles import DEFAULT_PROFILE, register_profiles
from .strategies import CUDA_SCALE, INTERPRETER_SCALE, Scale

_BACKEND = pytest.StashKey[Backend]()
_IMPLS = pytest.StashKey[Implementations]()

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
    """Base seed of fuzzing tests; combine it with the test's own key via :func:`derive_seed`."""
    return pytestconfig.getoption("eaglefuzz_seed")


def derive_seed(base: int, *key: object) -> int:
    """A seed for one test item: stable across runs, machines and Python hash randomisation."""
    import zlib

    return zlib.crc32(":".join(map(str, (base, *key))).encode())


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
