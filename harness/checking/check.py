"""Check one case: run the implementation and the oracles, compare, and explain any finding."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..core.case import Case
from ..core.compare import Difference
from ..core.exitcodes import EXIT_DEVICE_LOST
from ..core.interrupts import checkpoint, count, received_since
from ..generation.strategies import Scale
from ..sources import (
    Implementations,
    Origin,
    cli_args_of,
    device_for,
    implementations_for,
    parse_source,
)
from ..sources.triton_backend import select_backend
from ..targets import TARGETS, ContractViolation, Outcome, has_role, role
from .costs import limits_needed, time_limit


class CaseJournal(Protocol):
    """Where a worker records the case in flight, so that whoever watches the process can name
    the case that killed or hung it (:class:`~..run.journal.Journal` is the one eaglefuzz uses)."""

    def running(self, case: Case, limit: float | None = None) -> AbstractContextManager[None]:
        """``case`` is recorded as in flight while the body runs, with its time limit."""

    def abandon(self, case: Case, message: str) -> None:
        """This process exits on purpose while running ``case``: leave the record, and why."""


MAX_LINES = 12
JSON_DIFFERENCES = 100
"""Differences listed in a finding's JSON record (the count says how many there are)."""


@dataclass
class Finding:
    """A case on which the implementation (or an oracle) does not do what the contract says."""

    case: Case
    outcome: Outcome
    origin: Origin
    """Where the implementation that ran came from (file, function, source)."""
    shrink: str = ""
    """Set when shrinking stopped early (time budget): the case is the smallest found so far."""
    tier: str = "production"
    """The case's domain tier (:mod:`.domains`): ``production`` (a contract violation) or
    ``extended`` (an edge divergence: the implementation parts from the reference outside the
    production domain)."""
    suspects: list[Case] = field(default_factory=list)
    """A fatal crash of a device batch: the cases launched before the device failed, in order
    (a CUDA fault surfaces at a later call than the launch that made it: any of them may be
    the one; ``case`` is the first). Empty otherwise."""

    _memo: dict[str, tuple[Case, Any]] = field(default_factory=dict, repr=False, compare=False)
    """What :meth:`report` derives from the case alone, kept while ``case`` is the same object (a
    production-scale case's features and reproducer read gigabytes; a finding is reported more
    than once: saved, printed)."""

    def _of_case(self, key: str, make: Callable[[], Any]) -> Any:
        hit = self._memo.get(key)
        if hit is not None and hit[0] is self.case:
            return hit[1]
        value = make()
        self._memo[key] = (self.case, value)
        return value

    def given_features(self, features: Iterable[str]) -> Finding:
        """This finding, its case's features as already found (a production-scale case's, by the
        scale lane that checked it: features_of reads every element of its tables) for the
        report to show; the finding itself."""
        self._memo["features"] = (self.case, sorted(features))
        return self

    @property
    def kind(self) -> str:
        """``oracle disagreement``, ``crash``, ``difference`` or, in the extended tier,
        ``edge divergence`` (a difference or a crash there)."""
        if self.outcome.oracle_disagreements:
            return "oracle disagreement"
        if self.tier == "extended":
            return "edge divergence"
        if self.outcome.hang:
            return "hang"
        return "crash" if self.outcome.crash else "difference"

    @property
    def fatal(self) -> bool:
        """The implementation left the device unusable (a sticky CUDA error): this process
        can run no further case, so the finding cannot be shrunk here."""
        return self.outcome.fatal

    @property
    def is_edge(self) -> bool:
        """An edge divergence: reported apart from contract violations (exit code 4)."""
        return self.kind == "edge divergence"

    def to_json(self, max_differences: int = JSON_DIFFERENCES) -> dict[str, object]:
        """What the report says, as JSON fields for machines: the kind, the tier, the target's
        model runner, the crash or hang message, and each difference (array, index, request,
        region, expected, actual, what the expectation came from; the first
        ``max_differences``, and how many there are)."""
        o = self.outcome
        out: dict[str, object] = {"kind": self.kind, "tier": self.tier, "runner": TARGETS[self.case.kernel].runner}
        if o.crash:
            out["crash"] = o.crash
        if o.hang:
            out["hang"] = o.hang
        out["differences_total"] = len(o.differences)
        out["differences"] = [d.to_json() for d in o.differences[:max_differences]]
        if o.oracle_disagreements:
            out["oracle_disagreements"] = [d.to_json() for d in o.oracle_disagreements[:max_differences]]
        return out

    def reproducer(self) -> str:
        """Python source that fails while the finding stands: run it with ``python``."""
        return self._of_case(f"reproducer {self.origin.spec}", self._reproducer)

    def _reproducer(self) -> str:
        spec = self.origin.spec
        arg = "" if spec in ("bundled", "") else f", source={spec!r}"
        case = TARGETS[self.case.kernel].in_order(self.case)  # as the signature lists them, from a run or a file
        body = ("assert_case(" + case.to_python() + arg + ")").splitlines()
        names = "Case, sparse" if any("sparse((" in line for line in body) else "Case"
        lines = [
            "import numpy as np",
            f"from eaglefuzz.harness.case import {names}",
            "from eaglefuzz.harness.check import assert_case",
            "",
        ]
        return "\n".join(lines + body)

    def replay_commands(self, saved: Path) -> list[str]:
        """The command lines that replay the case saved at ``saved`` against the same code."""
        opts = "".join(" " + shlex.quote(a) for a in cli_args_of(self.origin))
        f = shlex.quote(str(Path(saved).resolve()))
        need = limits_needed(self.case)  # a production-scale case is past the default cost limits
        limits, env = (f" --limits {need}", f"EAGLEFUZZ_LIMITS={need} ") if need else ("", "")
        return [
            f"eaglefuzz replay {f}{opts}{limits}",
            f"{env}python -m pytest -p eaglefuzz.harness.pytest_plugin {f}{opts}",
        ]

    def report(self, max_lines: int = MAX_LINES, saved: Path | None = None) -> str:
        """A readable report: what differs where, what ran, the case's features, and a
        reproducer to paste into a file; with ``saved``, the commands that replay it."""
        target = TARGETS[self.case.kernel]
        o = self.outcome
        name = self.case.kernel
        lines = []
        if o.hang:
            lines.append(f"{name} did not finish: {o.hang}")
        if o.crash:
            lines.append(f"{name} failed to run: {o.crash}")
        if o.oracle_disagreements:
            lines.append(
                f"the oracles disagree with each other in {len(o.oracle_disagreements)} element(s): "
                "a bug of the harness or the contract, not of the kernel"
            )
            lines += ["  " + d.describe() for d in o.oracle_disagreements[:max_lines]]
        if o.differences:
            lines.append(f"{name} differs from the contract in {len(o.differences)} element(s):")
            lines += ["  " + d.describe() for d in o.differences[:max_lines]]
            if len(o.differences) > max_lines:
                lines.append(f"  ... and {len(o.differences) - max_lines} more")
        lines.insert(0, f"tested: {self.origin.describe()}, model runner {target.runner}")
        if self.shrink:
            lines.insert(1, self.shrink)
        if self.tier == "extended":
            lines.insert(1, "tier: extended (an edge divergence: outside the production domain, where the "
                         "reference is still defined; not a contract violation)")
            lines.append("edges: " + ", ".join(sorted(target.extended_features_of(self.case))))
        else:
            lines.append("tier: production (a contract violation)" if self.kind != "oracle disagreement"
                         else "tier: production")
            lines.append("features: " + ", ".join(self._of_case("features", lambda: sorted(target.features_of(self.case)))))
        if saved is not None:
            lines.append("replay it:")
            lines += ["    " + c for c in self.replay_commands(saved)]
        lines.append(REPRODUCER_BEGIN_HANG if o.hang else REPRODUCER_BEGIN)
        lines += self.reproducer().splitlines()  # unindented: the block, fences included, runs as pasted
        lines.append(REPRODUCER_END)
        return "\n".join(lines)


REPRODUCER_BEGIN = "# --- reproducer: paste into a file and run it with python; it fails while this stands ---"
"""The first line of a report's reproducer block (a Python comment: the block runs as pasted)."""
REPRODUCER_BEGIN_HANG = ("# --- reproducer: paste into a file and run it with python; while this stands it does "
                         "not return (stop it with Ctrl-C) ---")
"""The first line of the reproducer block of a hang."""
REPRODUCER_END = "# --- end of reproducer ---"
"""The last line of a report's reproducer block."""


def signature(finding: Finding) -> tuple[Any, ...]:
    """What makes two findings "the same": target, kind, and the (array, region) pairs that
    differ (or the crash's exception type); values and indices may differ."""
    o = finding.outcome
    diffs = o.oracle_disagreements or o.differences
    crash = (o.crash or "").split(":", 1)[0]
    return (finding.case.kernel, finding.kind, crash, tuple(sorted({(d.array, d.region) for d in diffs})))


class DifferenceFound(AssertionError):
    """Raised by :func:`assert_case`; carries the :class:`Finding`."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.report())
        self.finding = finding


def check_case(
    case: Case,
    impls: Implementations,
    device: str,
    journal: CaseJournal | None = None,
    *,
    domain: str = "production",
) -> Finding | None:
    """Check ``case`` against the contract; ``None`` when the implementation is right.

    The case must lie in ``domain`` (:mod:`.domains`; :class:`ContractViolation` otherwise);
    the finding's tier is the case's. With a ``journal``, the case is on disk while the
    implementation runs, so a crash of the process is traceable, with its time limit
    (:func:`~.costs.time_limit`), so a supervisor can stop a hang.
    """

    checkpoint()  # a signal that came between cases (in a gc callback) stops the run here
    target = TARGETS[case.kernel]
    scaled = _checked_at_scale(case)
    tier = target.tier_of(_tier_rows(case) if scaled else case, domain)
    device = device_for(impls.source, device)
    signals_before = count()
    check = _scale_check if scaled else target.check
    if journal is None:
        outcome = check(case, impls[case.kernel], device)
    else:
        with journal.running(case, time_limit(case, compiled=device != "cpu")):
            outcome = check(case, impls[case.kernel], device)
    if received_since(signals_before) is not None:
        # A signal came while the case ran, and the code under test swallowed the interrupt
        # (or turned it into an error): an interruption, never a finding against it.
        raise KeyboardInterrupt
    if outcome.fatal and journal is not None:
        # A sticky CUDA error: every later launch in this process would fail too, and
        # shrinking here would blame innocent cases. Leave the case in the journal and exit;
        # the supervisor (CLI) or the xdist controller reports it. Without a journal the
        # finding is returned as it is (Finding.fatal): its caller must not run more cases.
        journal.abandon(case, f"the device became unusable: {outcome.crash}")
        os._exit(EXIT_DEVICE_LOST)
    return None if outcome.ok else Finding(case, outcome, impls.origin[case.kernel], tier=tier)


def device_role(name: str) -> Any:
    """Target ``name``'s device role (its folder's ``DEVICE``; imported now: it imports torch),
    or ``None``."""
    return role(name, "device").DEVICE if has_role(name, "device") else None


def _checked_at_scale(case: Case) -> bool:
    """Whether ``case`` is a production-scale case (a scale feature of its target reached) of a
    target whose record's check cannot hold it on the host (its device role checks such a case
    a block of rows at a time: Model Runner V2's verification, docs/CONTRACT.md §28-§35)."""
    from ..targetkit.scale import past_limit

    target = TARGETS[case.kernel]
    if not target.scale_features or not any(past_limit(a.size - 1) for a in case.arrays.values()):
        return False
    dt = device_role(case.kernel)
    return (dt is not None and dt.scale and dt.scale_by_rows and bool(target.scale_features)
            and bool(set(target.scale_features) & dt.reached(case)) and dt.checks_at_scale(case))


def _tier_rows(case: Case) -> Case:
    """What a production-scale ``case`` checked at scale (:func:`_checked_at_scale`) is placed
    in its tier by: the rows that matter alone, as its device role confirms a difference on
    them (``confirm_on``: the requests past the flat limit and the one before), so that the
    rules and the windows (the NumPy oracle) never run over tables of 8 GiB and more on the
    host; each request's outputs depend on its own rows, and the requests before the limit are
    zero rows the scale case is built of."""
    return device_role(case.kernel).confirm_on(case)[0]


def _scale_check(case: Case, impl: object, device: str) -> Outcome:
    """The device role's check of production-scale ``case`` (a torch oracle on the device, the
    NumPy and Numba oracles on the rows that matter), as an outcome: its differences, or an
    oracle disagreement where the device saw one and the NumPy and Numba oracles did not."""
    dt = device_role(case.kernel)
    try:
        bad, _, outcome = dt.scale_check(impl, case, device, True)
    except Exception as exc:  # noqa: BLE001 - any failure of the code under test is a finding
        return Outcome().crashed(exc, device)
    outcome = outcome if outcome is not None else Outcome()
    if bad and outcome.ok:
        outcome.oracle_disagreements.append(Difference(
            case.kernel, None, "the kernel's outputs (the NumPy and Numba oracles agree with them on the rows they check)",
            f"{bad} element(s) not as expected", None, "device oracle", "torch oracle (oracles/tensor_ops_v2.py)"))
    return outcome


def warm_oracles(names: list[str]) -> None:
    """Compile the oracles of targets ``names`` (Numba) on a tiny case, so that compiling
    never counts against a case's time limit."""

    rng = np.random.default_rng(0)
    tiny = Scale(max_requests=2, request_tail=2, max_query_len=4)
    for name in names:
        TARGETS[name].oracle_check(TARGETS[name].random_case(rng, tiny))


def warm_compiled(impls: Implementations, names: list[str], device: str) -> list[str]:
    """Run each implementation of ``names`` that ``torch.compile`` decorates (TorchDynamo and
    Inductor compile it at its first calls: tens of seconds on a loaded 2-core machine) on two
    tiny cases of different sizes (the second call recompiles for dynamic shapes), before any
    case's clock runs, so that compiling never counts against a case's time limit. Outcomes
    are not kept (the real cases check it); returns the names warmed."""

    rng = np.random.default_rng(0)
    warmed = []
    for name in names:
        if name not in impls or getattr(impls[name], "_torchdynamo_orig_callable", None) is None:
            continue
        for scale in (Scale(max_requests=2, request_tail=2, max_query_len=4), Scale(max_requests=5, request_tail=5, max_query_len=9)):
            try:
                TARGETS[name].check(TARGETS[name].random_case(rng, scale), impls[name], device_for(impls.source, device))
            except Exception:  # noqa: BLE001, S112 - a failing implementation is the real cases' finding
                continue
        warmed.append(name)
    return warmed


def assert_case(
    case: Case,
    source: str | None = None,
    backend: str = "auto",
    *,
    kernels: str | None = None,
    domain: str = "extended",
) -> None:
    """Assert that ``case`` passes; the entry point of pasted reproducers.

    ``source`` is a source spec (``file:PATH``, ``vllm-release:0.33.0``, ...; the bundled
    production copy by default); ``kernels`` a ``--kernels`` file (the same as
    ``source="file:PATH"``); ``backend`` as for :func:`select_backend`; ``domain`` the widest
    tier the case may lie in (both by default: a pasted edge divergence runs as it is).
    """

    b = select_backend(backend)
    src = parse_source(f"file:{kernels}" if kernels else source or "bundled")
    impls = implementations_for(src, [case.kernel])
    try:
        finding = check_case(case, impls, b.device, domain=domain)
    except ContractViolation as exc:
        raise AssertionError(f"the case is outside the contract: {exc}") from None
    if finding is not None:
        raise DifferenceFound(finding)
