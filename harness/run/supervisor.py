"""Process isolation: the work runs in a child process, watched, so no fault gives a wrong verdict.

The parent (the supervisor) runs ``eaglefuzz`` again as a worker, in its own process group,
tied to the parent's life (:mod:`.lifeline`). The worker journals each case before running it
(:mod:`.journal`), with the case's time limit (:func:`~..checking.costs.time_limit`), and records the
run unit by unit (:mod:`.runlog`: a target fuzzed, a file replayed). Three faults are handled:

- A crash: the worker dies (under the Triton interpreter a wild store lands in the Python
  heap), or leaves on purpose after a CUDA error. The journal names the case in flight.
- A hang: a case runs past its time limit. The supervisor kills the worker's process group,
  then runs the case again alone in a fresh process (:func:`hangs_alone`): one that finishes
  within its limit there was slowed by the machine (a loaded CI runner), not stuck, and its
  unit runs again (:data:`HANG_RECHECKS` times at most per unit) instead of becoming a finding.
- An interruption: SIGINT, SIGTERM or SIGHUP reaches the supervisor (Ctrl-C, ``timeout``, a CI
  runner signalling the process group). It is forwarded to the worker, which stops and
  reports what it found; a worker that does not stop within :data:`GRACE_S` is killed. An
  interruption is never a finding; the exit code is 128 + the signal (1 if something was found).

A crash or a hang is a finding of its own kind: shrunk (one fresh worker per step, see
:func:`shrink_fault`; replayed files are not), saved like any other, and the run goes on with
a new worker from the next unit. The report at the end merges every worker's units.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ..core.errors import UserError
from ..core.exitcodes import (
    EXIT_DEVICE_LOST,
    EXIT_EDGE,
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    interrupted,
)
from ..core.interrupts import SIGNALS
from ..core.mps import alone as without_mps
from ..core.mps import under_mps
from ..sources import Origin
from . import warm_servers as warm
from .lifeline import lifeline
from .runlog import RunLog

POLL_S = 0.2
"""How often the supervisor looks at the journal's clock (a hang is seen this much late at most)."""
GRACE_S = 5.0
"""How long an interrupted worker may take to stop and report before it is killed."""
WORKER_ENV = "EAGLEFUZZ_WORKER"
"""Set in a worker: it does the work itself instead of supervising a worker."""
JOURNAL_ENV = "EAGLEFUZZ_JOURNAL"
"""The worker's journal folder (the case in flight, its clock, and the run's record in ``run/``)."""
REPORT_ENV = "EAGLEFUZZ_REPORT"
"""``0``: the worker prints no report at the end (the supervisor prints the merged one)."""


class Signals:
    """Interrupting signals received by the supervisor. The handler only records them; the
    loop waiting for a worker forwards the first one and kills the worker on a second."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        self.received.append(signum)

    def install(self) -> None:
        for s in SIGNALS:
            self._old[s] = signal.signal(s, self._handle)

    def restore(self) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)

    @property
    def signum(self) -> int | None:
        return self.received[0] if self.received else None


@dataclass
class Hang:
    """A case that ran past its time limit: the case, its limit, how long it ran, its ``seq``."""

    case: Any
    limit: float
    seconds: float
    seq: int

    def message(self) -> str:
        return (f"it ran past its time limit of {self.limit:g} s and was stopped after {self.seconds:.1f} s "
                "(the limit: --case-timeout SECONDS, or --limits timeout_scale=X)")


@dataclass
class Ended:
    """How a worker ended: its exit ``code`` (negative: the signal that killed it), the
    ``hang`` it was killed for, and whether the supervisor ``killed`` it for an interruption
    or a deadline."""

    code: int
    hang: Hang | None = None
    killed: bool = False


@dataclass
class _Clocks:
    """The journal clocks of a worker, each with when it was first seen at its ``seq``."""

    directory: Path
    seen: dict[Path, tuple[int, float]] = field(default_factory=dict)

    def overdue(self) -> Hang | None:
        from ..checking.corpus import decode
        from .journal import read_clock

        now = time.monotonic()
        for clock in sorted(self.directory.glob("*.clock")):
            c = read_clock(clock)
            if c is None:
                continue
            seq, limit = c
            first = self.seen.get(clock)
            if first is None or first[0] != seq:
                self.seen[clock] = (seq, now)
                continue
            if now - first[1] <= limit:
                continue
            try:
                text = clock.with_suffix(".json").read_text()
            except OSError:
                continue
            if read_clock(clock) != c:  # the case ended while we read it
                continue
            try:
                case = decode(text, str(clock.with_suffix(".json")), contract=False).case
            except UserError:
                continue
            return Hang(case, limit, now - first[1], seq)
        return None


def _killpg(proc: subprocess.Popen[Any], sig: int) -> None:
    """Signal the worker's process group (only while the worker is not yet reaped)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_worker(
    args: list[str],
    journal_dir: Path,
    signals: Signals,
    *,
    quiet: bool = False,
    env: dict[str, str] | None = None,
    stop_at: float | None = None,
    alone: bool = False,
) -> Ended:
    """Run ``eaglefuzz args`` as a worker journaling into ``journal_dir``, watched until it ends.

    The worker runs in its own process group and dies with this process. A case past its
    time limit gets the group killed (:attr:`Ended.hang`); an interrupting signal is
    forwarded, and the group killed after :data:`GRACE_S` or on a second signal; at
    ``stop_at`` (a ``time.monotonic()`` value) the group is killed. With ``quiet`` the
    worker's output (a dying process's fault dump) is dropped. ``alone``: the worker is no
    client of this campaign's MPS daemon (:mod:`~..core.mps`): a CUDA context of its own, whose
    fault is its own.
    """

    line = lifeline()
    full_env = {**(without_mps() if alone else os.environ), WORKER_ENV: "1", JOURNAL_ENV: str(journal_dir), **line.env, **(env or {})}
    out = subprocess.DEVNULL if quiet else None
    try:
        proc = warm.spawn(args, full_env, line.pass_fds, quiet) or subprocess.Popen(
            [sys.executable, "-m", "eaglefuzz.harness.cli", *args], env=full_env,
            start_new_session=True, pass_fds=line.pass_fds, stdout=out, stderr=out)
    except BaseException:
        line.close()
        raise
    line.spawned()
    clocks = _Clocks(Path(journal_dir))
    forwarded, grace_end, hang, killed = 0, 0.0, None, False
    try:
        while True:
            try:
                code = proc.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if signals.received:
                if not forwarded:
                    _killpg(proc, signals.received[0])
                    forwarded, grace_end = len(signals.received), time.monotonic() + GRACE_S
                elif len(signals.received) > forwarded or time.monotonic() > grace_end:
                    _killpg(proc, signal.SIGKILL)
                    killed = True
                continue
            if stop_at is not None and time.monotonic() > stop_at:
                _killpg(proc, signal.SIGKILL)
                killed = True
            elif hang is None:
                hang = clocks.overdue()
                if hang is not None:
                    _killpg(proc, signal.SIGKILL)
    finally:
        if proc.poll() is None:  # the supervisor itself is failing: take the worker with it
            _killpg(proc, signal.SIGKILL)
            proc.wait()
        line.close()
    return Ended(code, hang, killed)


def fault_candidates(case: Any) -> list[Any]:
    """The smaller variants of ``case`` a fault is shrunk through: the target's shrink moves,
    in order, those in the case's tier and within the cost limits (an extended-tier case takes
    its target's edge moves too, :func:`~..checking.domains.shrink_candidates_for`)."""
    from ..checking.costs import check_cost
    from ..checking.domains import shrink_candidates_for
    from ..targets import TARGETS, ContractViolation

    target = TARGETS[case.kernel]
    tier = case_tier(case)
    out = []
    for c in shrink_candidates_for(target, case, tier):
        try:
            target.tier_of(c, tier)
            check_cost(c)
        except ContractViolation:
            continue
        out.append(c)
    return out


def case_tier(case: Any) -> str:
    """The domain tier of a journaled case (``production`` when it lies in neither)."""
    from ..targets import TARGETS, ContractViolation

    try:
        return TARGETS[case.kernel].tier_of(case, "extended")
    except (ContractViolation, KeyError):
        return "production"


def _how(code: int) -> str:
    if code == EXIT_DEVICE_LOST:
        return "the device became unusable"
    if code == EXIT_INTERNAL:
        return "eaglefuzz itself failed (traceback above)"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


FAULT_SHRINK_BUDGET_ENV = "EAGLEFUZZ_FAULT_SHRINK_BUDGET"


def fault_shrink_budget() -> float:
    """Seconds a crash or hang may take to shrink (``$EAGLEFUZZ_FAULT_SHRINK_BUDGET``, 120 by
    default): each step starts a fresh worker, and a hang's step waits out its time limit."""
    try:
        return max(0.0, float(os.environ.get(FAULT_SHRINK_BUDGET_ENV, "120")))
    except ValueError:
        return 120.0


def shrink_fault(
    case: Any, kind: str, message: str, *, spec: str, backend: str, signals: Signals,
    budget_s: float | None = None, rounds: int = 40,
) -> tuple[Any, str, int]:
    """Shrink a case that crashes (``kind`` "crash") or hangs ("hang") the process, one fresh
    worker per step (forked from a warm server, :mod:`.warm_servers`, unless those are off).

    Each worker runs the case's smaller variants (:func:`fault_candidates`) in turn, each with
    its time limit; the first one that faults the same way becomes the case (one that faults
    the other way is passed over). Stops when a worker survives every variant, after
    ``rounds`` steps, after ``budget_s`` seconds, or on an interruption. Returns the case, its
    message and how many steps succeeded.
    """
    from ..checking.corpus import encode
    from .journal import orphans

    deadline = time.monotonic() + (fault_shrink_budget() if budget_s is None else budget_s)
    # a worker per step: forked from a warm server they start in a fraction of a second (waited
    # for within the budget only: a budget spent waiting for it would leave no step anyway)
    warm.start_server(wait=max(0.0, min(15.0, deadline - time.monotonic())))
    steps, skip = 0, 0
    while steps < rounds and time.monotonic() < deadline and not signals.received:
        if skip >= len(fault_candidates(case)):
            break
        with tempfile.TemporaryDirectory(prefix="eaglefuzz-shrink-") as d:
            f = Path(d) / "case.json"
            f.write_text(encode(case))
            args = ["_shrink-fault", str(f), "--backend", backend, "--source", spec, "--skip", str(skip)]
            ended = run_worker(args, Path(d) / "journal", signals, quiet=True, stop_at=deadline, alone=True)
            if ended.hang is not None:
                got, seq, smaller, why = "hang", ended.hang.seq, ended.hang.case, ended.hang.message()
            elif ended.code == EXIT_OK or ended.killed or signals.received:
                break
            else:
                died = orphans(Path(d) / "journal")
                if not died or died[0].case is None:
                    break
                got, seq, smaller = "crash", died[0].seq, died[0].case
                why = died[0].message or message
        if got == kind:
            case, message, steps, skip = smaller, why, steps + 1, 0
        elif seq is None:
            break
        else:
            skip += seq  # candidate skip + seq - 1 faulted the other way: go on after it
    return case, message, steps


HANG_RECHECKS = 2
"""Times a supervised run puts a case of one unit (a target fuzzed, a file replayed) that ran
past its time limit down to a slow machine (it finished within its limit when run again alone,
:func:`hangs_alone`) and runs the unit again; the next time that unit's case is a hang finding
whatever a recheck says."""


def hangs_alone(case: Any, *, spec: str, backend: str, signals: Signals) -> bool:
    """Whether ``case``, checked alone in a fresh worker with the same time limit, fails to
    finish cleanly: it runs past its limit again, kills the process, or is interrupted. A
    ``False`` means it finished (a divergence it shows is left to its unit's run)."""
    with _checked_alone([case], spec=spec, backend=backend, signals=signals, prefix="eaglefuzz-recheck-") as (ended, _):
        return ended.code != EXIT_OK or ended.hang is not None or ended.killed or signals.received


@contextmanager
def _checked_alone(cases: list[Any], *, spec: str, backend: str, signals: Signals, prefix: str,
                   stop_at: float | None = None) -> Iterator[tuple[Ended, Path]]:
    """``cases`` checked one at a time, each with its time limit, in one fresh worker outside
    any MPS daemon (``_locate-fault``) until one kills it or runs past its limit: how the
    worker ended, and its journal folder (removed when the block ends)."""
    from ..checking.corpus import encode

    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        folder = Path(d) / "cases"
        folder.mkdir()
        for k, c in enumerate(cases):
            (folder / f"{k:05d}.json").write_text(encode(c))
        yield (run_worker(["_locate-fault", str(folder), "--backend", backend, "--source", spec], Path(d) / "journal",
                          signals, quiet=True, stop_at=stop_at, alone=True), Path(d) / "journal")


MPS_PASSES = 8
"""Crashes a supervised run under ``--mps`` puts down to another lane's fault (their unit run
again, or a new worker that ended outside any case after one, started again) before the lane
leaves the daemon: its later workers run alone, and their crashes are findings as without MPS."""
MPS_WAIT_S = 2.0
"""Seconds before a worker is started again after one that ended outside any case under
``--mps`` (the daemon, after a fault, refuses clients until every old one is gone)."""
LOCATE_LIMIT_S = 120.0
"""Seconds the suspects of a batch's fault may take to run one at a time."""


def locate_fault(suspects: list[Any], message: str, *, spec: str, backend: str, signals: Signals,
                 budget_s: float = LOCATE_LIMIT_S) -> tuple[Any, str, bool]:
    """The case among ``suspects`` (a device batch's cases, in the order they were launched)
    that faults alone: one fresh worker (no client of an MPS daemon) runs them one at a time, each checked as a case alone
    (a wait for the device after its launch), and the first that kills it or leaves the device
    unusable is the one. Returns the case, its message and whether one was found (else the
    first suspect, the message saying that none faults alone)."""
    from .journal import orphans

    with _checked_alone(suspects, spec=spec, backend=backend, signals=signals, prefix="eaglefuzz-locate-",
                        stop_at=time.monotonic() + budget_s) as (ended, journal):
        if ended.hang is None and ended.code != EXIT_OK and not ended.killed:
            died = orphans(journal)
            if died and died[0].case is not None:
                return died[0].case, died[0].message or message, True
    return suspects[0], (f"{message}; none of the batch's {len(suspects)} cases faults alone: its first is "
                         "reported"), False


class _Supervision:
    """One supervised ``fuzz`` or ``replay``: workers until every unit is done, then the report."""

    def __init__(self, argv: list[str], *, source: Any, corpus_dir: Path, as_json: bool, save: bool,
                 backend: str, signals: Signals, journal_dir: Path) -> None:

        self.argv, self.source, self.corpus_dir, self.backend = argv, source, corpus_dir, backend
        self.as_json, self.save, self.signals = as_json, save, signals
        self.jdir = journal_dir
        self.log = RunLog(journal_dir / "run")

    def run(self) -> int:
        faults, passed = 0, 0  # passed: crashes of another lane's fault (--mps), their unit run again
        stalls: dict[str, int] = {}  # per unit: cases past their limit that finished alone, the unit run again
        solo = False  # under --mps: this lane has left the daemon (MPS_PASSES faults not of its own)
        left = self.log.remaining()
        while True:
            mps = under_mps() and not solo
            ended = run_worker(self.argv, self.jdir, self.signals,
                               env={REPORT_ENV: "0"} if faults + passed + len(stalls) else None, alone=solo)
            # Imported once the first worker is started: NumPy's import is no longer in its way.
            from .journal import orphans

            if self.signals.received:
                return self._stopped(printed=self.log.reported())
            if ended.hang is not None:
                for o in orphans(self.jdir):  # the killed worker's journal: the hang, not a crash
                    o.remove()
                unit = self.log.current() or ended.hang.case.kernel
                if stalls.get(unit, 0) < HANG_RECHECKS and not self._hangs_alone(ended.hang):
                    stalls[unit] = stalls.get(unit, 0) + 1
                    continue
                if stalls.get(unit, 0) >= HANG_RECHECKS:
                    print(f"eaglefuzz: {unit}: a case ran past its time limit again, after {HANG_RECHECKS} put down to a "
                          "slow machine: a hang finding, not checked again", file=sys.stderr, flush=True)
                self._fault("hang", ended.hang.case, ended.hang.message())
            elif ended.code in (EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_EDGE) or ended.code > 128:
                if not faults + passed + len(stalls) or self.log.meta() is None:
                    return ended.code
                return self._report()  # 2 here: a target's interface verdict, or a later usage error
            else:
                how = _how(ended.code)
                crashed = orphans(self.jdir)
                lost = ended.code == EXIT_DEVICE_LOST  # outside any launch: the worker's own line says so
                if (not crashed or crashed[0].case is None) and mps and (passed or lost):
                    # a fault outside this lane's launches is another lane's (MPS shares it); after one the
                    # daemon refuses clients until all of its old ones are gone
                    why = ("a worker's device became unusable outside any case, under --mps (another lane's fault)" if lost
                           else f"a new worker ended ({how}) outside any case, under --mps after another lane's fault")
                    print(f"eaglefuzz: {why}; starting one again in {MPS_WAIT_S:g} s", file=sys.stderr, flush=True)
                    passed += 1
                    solo = self._leave_mps(passed)
                    time.sleep(MPS_WAIT_S)
                    continue
                if not crashed or crashed[0].case is None:
                    return self._outside_any_case(how, ended.code, crashed[0].error if crashed else "",
                                                  faults + passed + len(stalls))
                case, message = crashed[0].case, crashed[0].message or f"the process died ({how}) while running this case"
                suspects = list(crashed[0].suspects) or [case]
                for o in crashed:
                    o.remove()
                if mps:
                    found = self._alone(case, message, suspects)
                    if found is None:
                        passed += 1
                        solo = self._leave_mps(passed)
                        continue
                    case, message, suspects = *found, []
                self._fault("crash", case, message, suspects)
            faults += 1
            before, left = left, self.log.remaining()
            if not left or self.signals.received or (faults > 1 and len(left) >= len(before)):
                return self._report()  # done; interrupted; or (never seen) a fault outside any unit
            print(f"eaglefuzz: going on with {left[0]}" + (f" and {len(left) - 1} more" if len(left) > 1 else ""),
                  file=sys.stderr, flush=True)

    def _leave_mps(self, passed: int) -> bool:
        """Whether, after ``passed`` faults not of this lane's cases under ``--mps``, the lane
        leaves the daemon: from :data:`MPS_PASSES` on, its workers run alone (a CUDA context of
        their own, time-sliced), so that faults that come only under MPS end neither the run nor
        become findings."""
        if passed < MPS_PASSES:
            return False
        print(f"eaglefuzz: {passed} faults under --mps that no case of this lane makes alone: this lane leaves the "
              "MPS daemon and runs on in a CUDA context of its own (time-sliced)", file=sys.stderr, flush=True)
        return True

    def _origin(self, case: Any) -> tuple[Origin, str]:
        """Where ``case``'s target was taken from in this run (as its workers recorded it, else
        as this run's source says), and the run's backend."""
        meta = self.log.meta() or {}
        origins = meta.get("origins", {})
        origin = Origin(**origins[case.kernel]) if case.kernel in origins else self.source.origin(case.kernel)
        return origin, meta.get("backend", self.backend)

    def _hangs_alone(self, hang: Hang) -> bool:
        """Whether the case of ``hang`` runs past its time limit (or faults) again when checked
        alone in a fresh process; when it does not, one line says so and that its unit runs again."""
        case = hang.case
        origin, backend = self._origin(case)
        unit = self.log.current() or case.kernel
        print(f"eaglefuzz: {unit}: a case ran past its time limit of {hang.limit:g} s; running it again alone, in a "
              "fresh process", file=sys.stderr, flush=True)
        if hangs_alone(case, spec=origin.spec, backend=backend, signals=self.signals):
            return True
        print(f"eaglefuzz: {unit}: alone it finished within its limit: the machine was slow, the case does not hang "
              f"(no finding); running {unit} again from its start", file=sys.stderr, flush=True)
        return False

    def _alone(self, case: Any, message: str, suspects: list[Any]) -> tuple[Any, str] | None:
        """Under ``--mps`` (:mod:`~..core.mps`) one lane's CUDA fault ends every lane's context:
        the case among ``suspects`` (the cases in flight) that faults alone, with its message, or
        ``None`` when none does (another lane's fault: the unit runs again in a new worker)."""
        origin, backend = self._origin(case)
        unit = self.log.current() or case.kernel
        print(f"eaglefuzz: {unit}: the device became unusable under --mps; running the {len(suspects)} case(s) in "
              "flight alone, in a fresh process outside MPS", file=sys.stderr, flush=True)
        found_case, found_message, found = locate_fault(suspects, message, spec=origin.spec, backend=backend,
                                                        signals=self.signals)
        if found:
            return found_case, found_message
        print(f"eaglefuzz: {unit}: none of them faults alone: another lane's fault ended this one's CUDA context "
              f"(MPS shares a fault among its clients); running {unit} again", file=sys.stderr, flush=True)
        return None

    def _command(self) -> str:
        meta = self.log.meta() or {}
        return meta.get("command") or ("fuzz" if self.save else "replay")

    def _fault(self, kind: str, case: Any, message: str, suspects: list[Any] | None = None) -> None:
        """Report, shrink (fuzz) and save a crash or hang; record it as its unit's result.
        ``suspects``: the cases that may have caused it (a device batch's), the one found
        first (:func:`locate_fault`)."""

        from ..checking.check import Finding
        from ..checking.corpus import save_finding
        from ..reporting.replay_report import failed_record
        from ..targets import TARGETS, Outcome

        origin, backend = self._origin(case)
        unit = self.log.current() or case.kernel
        what = "ran past its time limit" if kind == "hang" else "killed the process"
        fuzz = self._command() == "fuzz"
        if len(suspects or ()) > 1:
            print(f"eaglefuzz: {unit}: a batch of {len(suspects)} cases left the device unusable; running them one "
                  "at a time in a fresh process to find the one", file=sys.stderr, flush=True)
            case, message, found = locate_fault(suspects, message, spec=origin.spec,
                                                backend=backend, signals=self.signals)
            print(f"eaglefuzz: {unit}: " + ("found the case" if found else "none of them faults alone"),
                  file=sys.stderr, flush=True)
        if fuzz and self.save:
            print(f"eaglefuzz: {unit}: a case {what}; shrinking it, one process per step", file=sys.stderr, flush=True)
            case, message, _ = shrink_fault(case, kind, message, spec=origin.spec,
                                            backend=backend, signals=self.signals)
        outcome = Outcome(hang=message) if kind == "hang" else Outcome(crash=message)
        finding = Finding(case, outcome, origin, tier=case_tier(case))
        if fuzz:
            from ..reporting.fuzz_report import finding_record

            path, unsaved = None, None
            if self.save:
                try:
                    path = save_finding(finding, self.corpus_dir)
                except OSError as exc:
                    unsaved = f"{self.corpus_dir}: {exc.strerror or exc}"
            record = finding_record(finding, path, unsaved=unsaved)
            self.log.add(unit, {
                "runner": TARGETS[case.kernel].runner,
                "implementation": origin.describe(), "examples": None, "shrink_attempts": None,
                "tokens_verified": None, "seconds": None, "features_reached": [], "features_missed": [],
                "findings": [] if finding.is_edge else [record],
                "edge_divergences": [record] if finding.is_edge else [],
                "fault": kind,
            })
            where = f"saved to {path}" if unsaved is None else f"NOT saved: cannot write {unsaved}"
            print(f"eaglefuzz: {unit}: {kind} finding {where}", file=sys.stderr, flush=True)
        else:
            self.log.add(unit, failed_record(unit, finding))
            if not self.as_json:
                click.echo(f"FAIL {unit}")
            print(f"eaglefuzz: {unit}: a {kind}: the case {what}", file=sys.stderr, flush=True)

    def _doc(self) -> dict[str, Any] | None:
        """The merged document of every worker's units (``None`` before any worker said what
        the run is)."""
        from ..reporting.fuzz_report import fuzz_doc
        from ..reporting.replay_report import replay_doc

        meta = self.log.meta()
        stopped = self.signals.signum is not None
        if meta is None:
            return None
        if meta["command"] == "fuzz":
            return fuzz_doc(meta, self.log.ordered(), stopped)
        return replay_doc(meta, [r for _, r in self.log.ordered()], stopped, planned=len(self.log.plan()))

    def _exit_code(self) -> int:
        from ..reporting.fuzz_report import fuzz_exit_code
        from ..reporting.replay_report import replay_exit_code

        doc, signum = self._doc(), self.signals.signum
        if doc is None:
            return interrupted(signum) if signum else EXIT_INTERNAL
        return (fuzz_exit_code if "targets" in doc else replay_exit_code)(doc, signum)

    def _report(self) -> int:
        """Print the merged report of every worker's units; its exit code."""
        from ..reporting.fuzz_report import print_fuzz
        from ..reporting.replay_report import print_replay

        doc = self._doc()
        if doc is not None and "targets" in doc:
            if self.as_json:
                print(json.dumps(doc, indent=2), flush=True)
            else:
                from rich.console import Console

                print_fuzz(doc, width=Console(stderr=True).width)
                sys.stdout.flush()
        elif doc is not None:
            print_replay(doc, as_json=self.as_json)
        return self._exit_code()

    def _stopped(self, *, printed: bool) -> int:
        """The run was interrupted by a signal: never a finding; what was found is reported."""
        name = signal.Signals(self.signals.received[0]).name
        print(f"eaglefuzz: interrupted ({name}): what was found is kept", file=sys.stderr, flush=True)
        if printed:  # the worker stopped and printed the report itself (of every unit)
            return self._exit_code()
        return self._report()

    def _outside_any_case(self, how: str, code: int, error: str, faults: int) -> int:
        """The worker ended abnormally with no case in flight."""
        if code == EXIT_INTERNAL and not error:
            return self._report() if faults else EXIT_INTERNAL
        if faults:
            self._report()
        why = f"the journal could not be read: {error}" if error else f"the fuzzing process ended ({how}) outside any case"
        if self.as_json:
            print(json.dumps({"crashed": how, "findings": [{"kind": "crash", "file": None, "report": why}]}, indent=2))
        else:
            print(f"\n=== finding: crash, saved to None\n{why}")
        return EXIT_FINDINGS


def supervise(
    argv: list[str],
    *,
    source: Any,
    corpus_dir: Path,
    as_json: bool,
    backend: str = "auto",
    save: bool = True,
) -> int:
    """Run ``eaglefuzz`` with ``argv`` in watched worker processes (see the module's text);
    the exit code. ``save``: shrink and save crash and hang findings into ``corpus_dir`` (a
    replayed case is already in the corpus: it is reported as it is)."""

    signals = Signals()
    signals.install()
    try:
        with tempfile.TemporaryDirectory(prefix="eaglefuzz-journal-") as jdir:
            return _Supervision(argv, source=source, corpus_dir=corpus_dir, as_json=as_json, save=save,
                                backend=backend, signals=signals, journal_dir=Path(jdir)).run()
    finally:
        signals.restore()
        warm.start_server()  # for the next command's workers (not when EAGLEFUZZ_WARM=0)
