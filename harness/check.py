"""Check one case: run the implementation and the oracles, compare, and explain any finding."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .case import Case
from .exitcodes import EXIT_DEVICE_LOST
from .impls import Implementations
from .journal import Journal
from .targets import TARGETS, ContractViolation, Outcome

MAX_LINES = 12


@dataclass
class Finding:
    """A case on which the implementation (or an oracle) does not do what the contract says."""

    case: Case
    outcome: Outcome
    origin: str

    @property
    def kind(self) -> str:
        if self.outcome.oracle_disagreements:
            return "oracle disagreement"
        return "crash" if self.outcome.crash else "difference"

    def report(self, max_lines: int = MAX_LINES) -> str:
        """A readable report: what differs where, the case's features, and a pasteable reproducer."""
        target = TARGETS[self.case.kernel]
        o = self.outcome
        lines = []
        if o.crash:
            lines.append(f"{self.case.kernel} from {self.origin} failed to run: {o.crash}")
        if o.oracle_disagreements:
            lines.append(
                f"the oracles disagree with each other in {len(o.oracle_disagreements)} element(s): "
                "a bug of the harness or the contract, not of the kernel"
            )
            lines += ["  " + d.describe() for d in o.oracle_disagreements[:max_lines]]
        if o.differences:
            lines.append(
                f"{self.case.kernel} from {self.origin} differs from the contract in "
                f"{len(o.differences)} element(s):"
            )
            lines += ["  " + d.describe() for d in o.differences[:max_lines]]
            if len(o.differences) > max_lines:
                lines.append(f"  ... and {len(o.differences) - max_lines} more")
        lines.append("features: " + ", ".join(sorted(target.features_of(self.case))))
        lines.append("reproduce (paste into a test):")
        lines.append("    import numpy as np")
        lines.append("    from eaglefuzz.harness.case import Case")
        lines.append("    from eaglefuzz.harness.check import assert_case")
        lines.append("")
        lines += ["    " + ln for ln in ("assert_case(" + self.case.to_python() + ")").splitlines()]
        return "\n".join(lines)


class DifferenceFound(AssertionError):
    """Raised by :func:`assert_case`; carries the :class:`Finding`."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.report())
        self.finding = finding


def check_case(
    case: Case, impls: Implementations, device: str, journal: Journal | None = None
) -> Finding | None:
    """Check ``case`` against the contract; ``None`` when the implementation is right.

    The case must be in-contract (:class:`ContractViolation` otherwise). With a ``journal``,
    the case is on disk while the implementation runs, so a crash of the process is traceable.
    """
    target = TARGETS[case.kernel]
    target.validate(case)
    if journal is None:
        outcome = target.check(case, impls[case.kernel], device)
    else:
        with journal.running(case):
            outcome = target.check(case, impls[case.kernel], device)
        if outcome.fatal:
            # A sticky CUDA error: every later launch in this process would fail too, and
            # shrinking here would blame innocent cases. Leave the case in the journal and exit;
            # the supervisor (CLI) or the xdist controller reports it.
            journal.abandon(case, f"the device became unusable: {outcome.crash}")
            os._exit(EXIT_DEVICE_LOST)
    return None if outcome.ok else Finding(case, outcome, impls.origin[case.kernel])


def assert_case(case: Case, kernels: str | None = None, backend: str = "auto") -> None:
    """Assert that ``case`` passes; the entry point of pasted reproducers.

    ``kernels`` is an optional ``--kernels`` file; ``backend`` as for :func:`select_backend`.
    """
    from .backend import select_backend
    from .impls import load_implementations

    b = select_backend(backend)
    impls = load_implementations(kernels, TARGETS)
    try:
        finding = check_case(case, impls, b.device)
    except ContractViolation as exc:
        raise AssertionError(f"the case is outside the contract: {exc}") from None
    if finding is not None:
        raise DifferenceFound(finding)
