"""Exit codes of the ``eaglefuzz`` command (and of its worker processes)."""

import signal

EXIT_OK = 0
"""No output differs."""
EXIT_FINDINGS = 1
"""A finding in the production tier: an output differs, a case crashed, a case hung (ran past
its time limit), or the oracles disagree. Each is reported and saved (a replayed case is
already in the corpus)."""
EXIT_USAGE = 2
"""A usage or input error: one line on stderr, no traceback (a corpus case over the cost
limits too: the line names the file, the field and the limit); or, with no finding, a target
that could not be tested (its interface is not the contract's: a one-line verdict)."""
EXIT_INTERNAL = 3
"""A bug of eaglefuzz itself (an unexpected exception): its traceback is printed."""
EXIT_EDGE = 4
"""Only edge divergences (the extended tier, which ``fuzz`` checks after the production tier
unless ``--domain production``): the implementation parts from the reference outside the
production domain, and no contract violation was found. Reported and saved like findings; a
contract violation in the same run makes the exit code 1."""
EXIT_DEVICE_LOST = 70
"""A worker left on purpose: a CUDA error made the device unusable (its case is journaled)."""
EXIT_SIGHUP = 128 + 1
"""Interrupted by SIGHUP with nothing found; what was found is saved."""
EXIT_INTERRUPTED = EXIT_SIGINT = 128 + 2
"""Interrupted by Ctrl-C (SIGINT) with nothing found; what was found is saved."""
EXIT_SIGTERM = 128 + 15
"""Interrupted by SIGTERM (``timeout``, a CI runner) with nothing found; what was found is saved."""


def interrupted(signum: int | None) -> int:
    """The exit code of a run interrupted by signal ``signum`` with nothing found (128 + its
    number; SIGINT's when unknown). An interrupted run that found something exits 1 (or 4)."""
    return 128 + int(signum or signal.SIGINT)


def findings_exit(kinds: list[str], interrupted_by: int | None = None, was_interrupted: bool = False,
                  *, untested: bool = False) -> int:
    """The exit code of a run whose findings have ``kinds`` (:attr:`~..checking.check.Finding.kind`), the
    worst first: 1 when any is not an edge divergence; else 2 when something could not be
    tested (``untested``: a target's interface verdict); else 4 when every finding is an edge
    divergence; with none, :func:`interrupted` when the run was interrupted (by signal
    ``interrupted_by``), else 0."""
    if any(k != "edge divergence" for k in kinds):
        return EXIT_FINDINGS
    if untested:
        return EXIT_USAGE
    if kinds:
        return EXIT_EDGE
    return interrupted(interrupted_by) if was_interrupted else EXIT_OK
