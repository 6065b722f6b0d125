"""A fuzzing campaign: targets in turn, live progress, findings saved as they come, a summary.

The report depends only on the seed and options, timings aside: targets run in a fixed
order, chunk seeds derive from the base seed, and findings are listed in the order found.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from ..checking.check import Finding, warm_compiled, warm_oracles
from ..checking.corpus import case_path, save_finding
from ..checking.domains import EXTENDED, PRODUCTION, default_domain
from ..checking.fuzz import Stats, bulk_fuzz_target, fuzz_target
from ..core import clock, interrupts
from ..core.errors import UserError
from ..generation.strategies import CUDA_SCALE, INTERPRETER_SCALE
from ..reporting.fuzz_report import finding_record, fuzz_doc, fuzz_exit_code, plural, print_fuzz
from ..sources import InterfaceMismatch, implementations_for
from ..sources.triton_backend import select_backend
from ..targetkit.base import CannotTest
from ..targetkit.scale import note as scale_note
from ..targetkit.scale import unreachable
from ..targets import TARGETS, has_role
from .journal import Journal
from .runlog import RunLog

ORDINARY_MIN_S = 2.0
"""Seconds kept for each target left when a production-scale case is given the run's time
(``--mode device`` under ``--time-budget``: :meth:`Campaign._scale_first`)."""


def progress_every() -> float:
    """Seconds between progress lines when no progress bar is shown (no terminal):
    ``$EAGLEFUZZ_PROGRESS_EVERY`` (10), read when a campaign starts, never at import (a warm
    server's workers take each command's)."""
    return float(os.environ.get("EAGLEFUZZ_PROGRESS_EVERY", "10"))


@dataclass
class Campaign:
    """Options of one ``eaglefuzz fuzz`` run (see the CLI for their meaning)."""

    names: list[str] | None
    """Explicitly named targets; ``None``: every target the source defines."""
    source: Any
    """The :class:`~..sources.Source` of the code under test."""
    backend: str
    seed: int
    mode: str
    examples: int | None
    time_budget: float | None
    shard: tuple[int, int]
    corpus_dir: Path
    keep_going: bool
    progress: bool
    as_json: bool
    journal_dir: Path | None = None
    """Under a supervisor: the journal of the case in flight, and the run's record (``run/``)."""
    report: bool = True
    """Print the report at the end (a supervisor that merges several workers' runs prints it)."""
    domain: str | None = None
    """``production`` or ``extended`` (:mod:`..checking.domains`); ``None``: the default,
    ``extended`` (the production tier, then the edges), or ``production`` in device mode (which
    draws production cases only)."""
    lane: tuple[int, int] = (0, 1)
    """Lane ``k`` of ``n`` processes fuzzing one GPU at once (``--lanes``, 0-based ``k``): lane 0
    alone draws production-scale cases (the parent makes it a lane whose share holds them:
    :func:`~.multi.lane_numbers`), and each lane's device targets take ``1/n`` of the host's
    producer processes."""
    unsaved: dict[int, str] = field(default_factory=dict)
    """``id`` of a finding that could not be written -> why."""

    def _save(self, finding: Finding) -> Path | None:
        """Save ``finding``; ``None`` when it could not be written (the reason is kept in
        :attr:`unsaved`: the report says so and still prints the finding in full)."""

        try:
            return save_finding(finding, self.corpus_dir)
        except OSError as exc:
            self.unsaved[id(finding)] = f"{self.corpus_dir}: {exc.strerror or exc}"
            return None

    def _path(self, finding: Finding) -> Path:

        return case_path(finding.case, self.corpus_dir)

    def meta(self, backend: str, impls: Any) -> dict[str, Any]:
        """What this run is, for its report (and for a supervisor reporting a fault of it)."""

        return {
            "command": "fuzz",
            "seed": self.seed,
            "mode": self.mode,
            "backend": backend,
            "source": self.source.describe(),
            "notes": list(impls.notes),
            "untested": dict(impls.untested),
            "shard": f"{self.shard[0] + 1}/{self.shard[1]}",
            "domain": self.domain,
            "origins": {n: asdict(impls.origin[n]) for n in impls},
        }

    def run(self) -> int:
        """Fuzz every target in turn; print the report; the exit code. A signal (Ctrl-C, a
        timeout) stops it: what was found is kept and reported."""

        with interrupts.interruptible():
            return self._run()

    def _run(self) -> int:

        # counted from the command's start (start-up, loading the source, warming up included)
        deadline = None if self.time_budget is None else clock.deadline(self.time_budget)
        marks = [("start", time.monotonic())]  # the start-up's phases, for the report (under a budget)
        backend = select_backend(self.backend)
        marks.append(("backend", time.monotonic()))
        device_run = {}
        if self.domain is None:
            self.domain = default_domain(self.mode)
        if self.mode == "device":
            from ..checking.device_mode import device_targets
            from ..checking.device_mode.engine import device_fuzz_target
            from ..checking.device_mode.producers import default_workers

            if not backend.compiled:
                raise UserError("--mode device: needs a CUDA device (cases are drawn and checked on the GPU) and "
                                "this machine has none; use --mode bulk or --mode hypothesis")
            if self.domain != PRODUCTION:
                raise UserError("--mode device: draws production cases only; leave out --domain extended")
            device_run = dict.fromkeys(device_targets(), device_fuzz_target)
        impls = implementations_for(self.source, self.names)
        marks.append(("source", time.monotonic()))
        self.impls = impls
        names = list(impls.funcs)
        log = RunLog(self.journal_dir / "run" if self.journal_dir else None)
        meta = self.meta(backend.name, impls)
        self.scale_why = unreachable(self.mode, backend.device)
        for name in names:  # the production tier does not change with the backend; what a run reaches does
            if TARGETS[name].scale_features and self._scale_unreached(name):
                meta["notes"].append(scale_note(name, TARGETS[name].scale_features, self._scale_unreached(name)))
        log.set_meta(meta)
        log.set_plan(names)
        finished = log.records()  # units finished by an earlier worker of this run (see .supervisor)
        if not finished and self.as_json:  # the text report prints them (once), the JSON document holds them
            for note in (*impls.notes, *impls.untested.values()):
                print(f"eaglefuzz: {note}", file=sys.stderr)
        journal = Journal(self.journal_dir) if self.journal_dir else None
        marks.append(("plan", time.monotonic()))
        warm_oracles([n for n in names if n not in finished])  # compiled before any case's clock runs
        marks.append(("oracles", time.monotonic()))
        warm_compiled(impls, [n for n in names if n not in finished], backend.device)
        marks.append(("torch.compile", time.monotonic()))
        scale = CUDA_SCALE if backend.compiled else INTERPRETER_SCALE
        console = Console(stderr=True)
        per_budget = None
        if deadline is not None and not finished:  # what the budget spent before the first case
            meta["startup_seconds"] = round(self.time_budget - (deadline - time.monotonic()), 3)
            meta["startup_stages"] = {"process": round(meta["startup_seconds"] - (marks[-1][1] - marks[0][1]), 3)} | {
                n: round(t - marks[k][1], 3) for k, (n, t) in enumerate(marks[1:])}
            log.set_meta(meta)
        saved: dict[int, Path] = {}
        interrupted = False
        run_fn = fuzz_target if self.mode == "hypothesis" else bulk_fuzz_target
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[examples]} ex  {task.fields[rate]:.1f} ex/s  {task.fields[findings]} findings"),
            TimeElapsedColumn(),
            console=console,
            disable=not self.progress,
            transient=False,
        ) as bar:
            every = progress_every()
            scale_first = self._scale_first(names, device_run, deadline)
            order = [n for n in names if n in scale_first] + [n for n in names if n not in scale_first]
            for name in order:
                if name in finished:
                    continue
                log.begin(name)
                extra: dict[str, Any] = {}
                if deadline is not None:  # what the run has left, shared by the targets left: one that ran over
                    left = [n for n in order[order.index(name):] if n not in finished]  # leaves less to the next
                    per_budget = max(0.0, deadline - time.monotonic()) / len(left)
                    if name in scale_first:  # its first scale case now, if the run can afford one
                        extra["scale_first"] = deadline - time.monotonic() - ORDINARY_MIN_S * len(left)
                if name in device_run and self.lane[1] > 1:
                    extra["workers"] = default_workers(backend.device, self.lane[1])
                    extra["scale_cases"] = self.lane[0] == 0
                    extra["shared_gpu"] = True
                total = self.examples if self.examples is not None else per_budget
                task = bar.add_task(name, total=total, examples=0, rate=0.0, findings=0)
                start = time.monotonic()

                stats = Stats()
                pending: list[Path] = []  # unshrunk findings saved by this run, replaced once shrunk

                last_line: list[Any] = [start, None]  # when the last progress line was printed, and its counts

                def on_progress(stats: Stats, task: Any = task, start: float = start, pending: list[Path] = pending,
                                name: str = name, last_line: list[Any] = last_line, per_budget: float | None = per_budget) -> None:
                    now = time.monotonic()
                    elapsed = max(now - start, 1e-9)
                    counts = (stats.examples, len(stats.findings) + (stats.unshrunk is not None))
                    if not self.progress and now - last_line[0] >= every and counts != last_line[1]:
                        last_line[:] = [now, counts]
                        print(f"eaglefuzz: {name}: {plural(stats.examples, 'example')}, "
                              f"{stats.examples / elapsed:.1f} ex/s, {counts[1]} finding(s), {elapsed:.0f} s",
                              file=sys.stderr, flush=True)
                    done = stats.examples if self.examples is not None else min(elapsed, per_budget or 0)
                    bar.update(task, completed=done, examples=stats.examples, rate=stats.examples / elapsed, findings=len(stats.findings))
                    u = stats.unshrunk
                    if u is not None and id(u) not in saved:
                        existed = self._path(u).exists()
                        saved[id(u)] = self._save(u)
                        if not existed and saved[id(u)] is not None:
                            pending.append(saved[id(u)])
                    for f in stats.findings:
                        if id(f) not in saved:
                            saved[id(f)] = self._save(f)
                            for p in pending:
                                if p != saved[id(f)]:
                                    p.unlink(missing_ok=True)
                            pending.clear()
                    if stats.unshrunk is None and pending:  # it shrank into a finding saved before
                        reported = {saved.get(id(f)) for f in stats.findings}
                        for p in pending:
                            if p not in reported:
                                p.unlink(missing_ok=True)
                        pending.clear()

                try:
                    device_run.get(name, run_fn)(
                        name, impls, backend.device, scale, seed=self.seed, examples=self.examples,
                        time_budget=per_budget, stop_on_finding=not self.keep_going, on_progress=on_progress,
                        chunk_offset=self.shard[0], chunk_step=self.shard[1], journal=journal, stats=stats,
                        domain=self.domain, **extra,
                    )
                except CannotTest as exc:  # what it needs is not here: its verdict; the others go on
                    log.add(name, {"untested": str(exc)})
                    continue
                except KeyboardInterrupt:
                    interrupted = True
                    interrupts.hold()  # a second signal must not cut the report short
                    if stats.unshrunk is not None:  # the interrupt cut its shrinking short
                        u = stats.smallest
                        if u is None or u.shrink == "":  # no step done yet (or Hypothesis's): say which
                            u = u or stats.unshrunk
                            u.shrink = ("shrinking was interrupted before its first step: this is the case "
                                        "as first found" if u is stats.unshrunk else
                                        "shrinking was interrupted: this is the smallest failing case found so far")
                        u = stats.add(u)
                        if id(u) not in saved:
                            saved[id(u)] = self._save(u)
                        for p in pending:
                            if p != saved[id(u)]:
                                p.unlink(missing_ok=True)
                        pending.clear()
                    log.add(name, self._entry(name, stats, saved))
                    break
                on_progress(stats)
                log.add(name, self._entry(name, stats, saved))
        doc = fuzz_doc(meta, log.ordered(), interrupted)
        if not doc["targets"] and doc["untested"] and not interrupted:

            raise InterfaceMismatch("\n".join(doc["untested"].values()))  # nothing tested: the verdicts alone
        if self.report:
            if self.as_json:
                print(json.dumps(doc, indent=2))
            else:
                print_fuzz(doc, width=console.width)
            sys.stdout.flush()
            log.mark_reported()
        return fuzz_exit_code(doc, interrupts.received())

    def _scale_first(self, names: list[str], device_run: dict[str, Any], deadline: float | None) -> set[str]:
        """The targets that run first, each with its first production-scale case before its
        ordinary examples: in device mode under a time budget, those with scale cases where
        this backend holds them. A short run then still reaches production scale where its
        budget affords a scale case, instead of leaving it to the every-eighth example of a
        target's even share (seconds)."""
        if deadline is None or self.mode != "device" or getattr(self, "scale_why", None) is not None or self.lane[0]:
            return set()
        from ..checking.device_mode import device_targets

        return {n for n in names if n in device_run and device_targets()[n].scale}

    def _scale_unreached(self, name: str) -> str | None:
        """Why this run cannot reach ``name``'s scale features (``None``: it can)."""
        why = getattr(self, "scale_why", None)
        if why is None and self.mode == "device" and not has_role(name, "device"):
            return "it has no device module: fuzzed in bulk mode"
        return why

    def _entry(self, name: str, s: Stats, saved: dict[int, Path | None]) -> dict[str, Any]:
        """The report of target ``name`` (JSON-ready; the same in the JSON document)."""

        def record(f: Finding) -> dict[str, Any]:
            return finding_record(f, saved.get(id(f)), met=s.met(f), unsaved=self.unsaved.get(id(f)))

        return {
            "runner": TARGETS[name].runner,
            "implementation": self.impls.origin[name].describe(),
            "examples": s.examples,
            "shrink_attempts": s.shrink_attempts,
            "tokens_verified": s.tokens,
            "seconds": round(s.seconds, 3),
            "features_reached": sorted(s.features),
            "features_missed": sorted(set(TARGETS[name].features) - s.features
                                      - (set(TARGETS[name].scale_features) if self._scale_unreached(name) else set())),
            "features_by_tour_only": sorted(s.toured - s.features),
            **({"tiers_searched": list(s.searched),
                "examples_per_tier": dict(sorted(s.tiers.items())),
                "edges_reached": sorted(s.edges),
                "edges_missed": sorted(set(TARGETS[name].extended_features) - s.edges)}
               if self.domain == EXTENDED else {}),
            **({"device": {"stage_seconds": {k: round(v, 4) for k, v in s.stages.items()},
                           "cross_checked": s.cross_checked, "warmup_seconds": round(s.warmup, 3),
                           "scale_cases": getattr(s, "scale_cases", 0),
                           **({"scale_skipped": s.scale_skipped} if getattr(s, "scale_skipped", None) else {}),
                           **({"scale_unfit": s.scale_unfit} if getattr(s, "scale_unfit", 0) else {}),
                           **({"oom_retries": s.oom_retries} if s.oom_retries else {})}}
               if s.stages else {}),
            "findings": [record(f) for f in s.contract_findings],
            "edge_divergences": [record(f) for f in s.findings if f.is_edge],
        }
