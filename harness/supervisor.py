"""Process isolation: the work runs in a child process, so a case that kills it is still reported.

Under the Triton interpreter a wild store lands in the Python heap; compiled, an illegal
address leaves a sticky CUDA error. The child (a worker) journals each case before running it
(:mod:`.journal`); when it dies, or leaves on purpose after a CUDA error, the parent reads the
journal, shrinks the case with fresh workers and reports it as a crash finding.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from .exitcodes import (
    EXIT_DEVICE_LOST,
    EXIT_EDGE,
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
)


def _run_worker(args: list[str], journal_dir: Path, *, quiet: bool = False) -> int:
    """Run ``eaglefuzz args`` as a worker journaling into ``journal_dir``; its exit code.

    SIGTERM and SIGINT are forwarded as SIGTERM, which the worker treats like Ctrl-C. With
    ``quiet`` its stderr (a dying process's fault dump) is dropped.
    """
    import os
    import subprocess

    env = {**os.environ, "EAGLEFUZZ_WORKER": "1", "EAGLEFUZZ_JOURNAL": str(journal_dir)}
    proc = subprocess.Popen([sys.executable, "-m", "eaglefuzz.harness.cli", *args], env=env,
                            stderr=subprocess.DEVNULL if quiet else None)

    def forward(signum: int, frame: Any) -> None:
        proc.send_signal(signal.SIGTERM)

    old = signal.signal(signal.SIGTERM, forward), signal.signal(signal.SIGINT, forward)
    try:
        return proc.wait()
    finally:
        signal.signal(signal.SIGTERM, old[0])
        signal.signal(signal.SIGINT, old[1])


def shrink_crash(
    case: Any, message: str, *, source: Any, backend: str, budget_s: float = 120.0, rounds: int = 40
) -> tuple[Any, str, int]:
    """Shrink a case that kills the process, one fresh worker per step.

    Each worker tries the case's smaller variants (the target's shrink moves) in turn; the
    first one that kills it becomes the case. Stops when a worker survives every variant, or
    after ``rounds`` steps or ``budget_s`` seconds. Returns the case, its crash message and
    how many steps succeeded.
    """
    import tempfile

    from .corpus import encode
    from .journal import orphans

    deadline = time.monotonic() + budget_s
    steps = 0
    while steps < rounds and time.monotonic() < deadline:
        with tempfile.TemporaryDirectory(prefix="eaglefuzz-shrink-") as d:
            f = Path(d) / "case.json"
            f.write_text(encode(case))
            args = ["_shrink-crash", str(f), "--backend", backend, "--source", source.spec]
            code = _run_worker(args, Path(d) / "journal", quiet=True)
            died = orphans(Path(d) / "journal") if code != EXIT_OK else []
        if not died or died[0].case is None:
            break
        case, message = died[0].case, died[0].message or message
        steps += 1
    return case, message, steps


def supervise(
    argv: list[str],
    *,
    source: Any,
    corpus_dir: Path,
    as_json: bool,
    backend: str = "auto",
    save: bool = True,
) -> int:
    """Run ``eaglefuzz`` with ``argv`` in a child process; report the case that killed it, if any.

    The child journals each case before running it. When it dies of a signal (or leaves after
    a CUDA error), the journal names the case in flight: it is shrunk (one fresh worker per
    step, see :func:`shrink_crash`), reported as a crash finding and saved to the corpus like
    any other (into ``corpus_dir``; unless ``save`` is false: a replayed case is already there, and not shrunk).
    """
    import tempfile

    from .check import Finding
    from .corpus import save_finding
    from .journal import orphans
    from .targets import Outcome

    with tempfile.TemporaryDirectory(prefix="eaglefuzz-journal-") as jdir:
        code = _run_worker(argv, Path(jdir))
        if code in (EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_EDGE):
            return code
        if code == EXIT_DEVICE_LOST:
            how = "the device became unusable"
        elif code == EXIT_INTERNAL:
            how = "eaglefuzz itself failed (traceback above)"
        else:
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        crashed = orphans(Path(jdir))
    results = []
    edges_only = True
    for orphan in crashed:
        if orphan.case is None:
            edges_only = False
            results.append({"kind": "crash", "file": None, "report": f"the journal could not be read: {orphan.error}"})
            continue
        case, crash = orphan.case, orphan.message or f"the process died ({how}) while running this case"
        if save:
            print(f"eaglefuzz: a case killed the process ({how}); shrinking it, one process per step",
                  file=sys.stderr)
            case, crash, _ = shrink_crash(case, crash, source=source, backend=backend)
        finding = Finding(case, Outcome(crash=crash), source.origin(case.kernel), _tier(case))
        edges_only &= finding.is_edge
        path = save_finding(finding, corpus_dir) if save else None
        results.append({"kind": finding.kind, "tier": finding.tier, "file": str(path) if path else None,
                        "report": finding.report(saved=path)})
    if not results:
        edges_only = False
        results.append({"kind": "crash", "file": None, "report": f"the fuzzing process ended ({how}) outside any case"})
        if code == EXIT_INTERNAL:
            return EXIT_INTERNAL
    if as_json:
        print(json.dumps({"crashed": how, "findings": results}, indent=2))
    else:
        for r in results:
            print(f"\n=== finding: {r['kind']}, saved to {r['file']}\n{r['report']}")
    return EXIT_EDGE if edges_only else EXIT_FINDINGS


def _tier(case: Any) -> str:
    """The domain tier of a journaled case (production when it cannot be told)."""
    from .targets import TARGETS, ContractViolation

    try:
        return TARGETS[case.kernel].tier_of(case, "extended")
    except (ContractViolation, KeyError):
        return "production"
