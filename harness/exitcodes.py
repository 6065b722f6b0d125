"""Exit codes of the ``eaglefuzz`` command (and of its worker processes)."""

EXIT_OK = 0
"""No output differs."""
EXIT_FINDINGS = 1
"""An output differs (or a case crashed) in the production tier, or the oracles disagree:
reported and saved to the corpus."""
EXIT_USAGE = 2
"""A usage or input error: one line on stderr, no traceback."""
EXIT_INTERNAL = 3
"""A bug of eaglefuzz itself (an unexpected exception): its traceback is printed."""
EXIT_EDGE = 4
"""Only edge divergences (``--domain extended``): the implementation parts from the reference
outside the production domain, and no contract violation was found. Reported and saved like
findings; a contract violation in the same run makes the exit code 1."""
EXIT_DEVICE_LOST = 70
"""A worker left on purpose: a CUDA error made the device unusable (its case is journaled)."""
EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C, SIGTERM) with nothing found; what was found is saved."""


def findings_exit(findings: list, interrupted: bool = False) -> int:
    """The exit code for a run that found ``findings`` (:class:`~.check.Finding`): 1 when any
    is not an edge divergence, 4 when all are, else 130 if interrupted, else 0."""
    if any(not f.is_edge for f in findings):
        return EXIT_FINDINGS
    if findings:
        return EXIT_EDGE
    return EXIT_INTERRUPTED if interrupted else EXIT_OK
