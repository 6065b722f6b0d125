"""A fuzzing campaign: targets in turn, live progress, findings saved as they come, a summary.

The report depends only on the seed and options, timings aside: targets run in a fixed
order, chunk seeds derive from the base seed, and findings are listed in the order found.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .check import EXIT_DEVICE_LOST, Finding
from .fuzz import Stats, bulk_fuzz_target, fuzz_target

EXIT_OK, EXIT_FINDINGS, EXIT_INTERRUPTED = 0, 1, 130
EXIT_INTERNAL = 3
"""A bug of eaglefuzz itself (an unexpected exception): the traceback is printed."""


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@dataclass
class Campaign:
    """Options of one ``eaglefuzz fuzz`` run (see the CLI for their meaning)."""

    names: list[str]
    kernels_path: str | None
    backend: str
    seed: int
    mode: str
    examples: int | None
    time_budget: float | None
    shard: tuple[int, int]
    corpus_dir: Path | None
    keep_going: bool
    progress: bool
    as_json: bool
    journal_dir: Path | None = None

    def _save(self, finding: Finding) -> Path:
        return save_finding(finding, self.corpus_dir, self.kernels_path)

    def _path(self, finding: Finding) -> Path:
        from .corpus import CORPUS_DIR, case_path

        return case_path(finding.case, self.corpus_dir or CORPUS_DIR)

    def run(self) -> int:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from .backend import select_backend
        from .impls import load_implementations
        from .journal import Journal
        from .strategies import CUDA_SCALE, INTERPRETER_SCALE
        from .targets import TARGETS

        signal.signal(signal.SIGTERM, _interrupt)  # a timeout stops the run like Ctrl-C: findings kept
        backend = select_backend(self.backend)
        impls = load_implementations(self.kernels_path, TARGETS)
        journal = Journal(self.journal_dir) if self.journal_dir else None
        scale = CUDA_SCALE if backend.compiled else INTERPRETER_SCALE
        console = Console(stderr=True)
        per_budget = None if self.time_budget is None else self.time_budget / len(self.names)
        results: dict[str, Stats] = {}
        saved: dict[int, Path] = {}
        interrupted = False
        run_fn = bulk_fuzz_target if self.mode == "bulk" else fuzz_target
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[examples]} ex  {task.fields[rate]:.1f} ex/s  {task.fields[findings]} findings"),
            TimeElapsedColumn(),
            console=console,
            disable=not self.progress,
            transient=False,
        ) as bar:
            for name in self.names:
                total = self.examples if self.examples is not None else per_budget
                task = bar.add_task(name, total=total, examples=0, rate=0.0, findings=0)
                start = time.monotonic()

                stats = Stats()
                pending: list[Path] = []  # unshrunk findings saved by this run, replaced once shrunk

                def on_progress(stats: Stats, task: Any = task, start: float = start, pending: list[Path] = pending) -> None:
                    elapsed = max(time.monotonic() - start, 1e-9)
                    done = stats.examples if self.examples is not None else min(elapsed, per_budget or 0)
                    bar.update(task, completed=done, examples=stats.examples, rate=stats.examples / elapsed, findings=len(stats.findings))
                    u = stats.unshrunk
                    if u is not None and id(u) not in saved:
                        existed = self._path(u).exists()
                        saved[id(u)] = self._save(u)
                        if not existed:
                            pending.append(saved[id(u)])
                    for f in stats.findings:
                        if id(f) not in saved:
                            saved[id(f)] = self._save(f)
                            for p in pending:
                                if p != saved[id(f)]:
                                    p.unlink(missing_ok=True)
                            pending.clear()

                try:
                    run_fn(
                        name, impls, backend.device, scale, seed=self.seed, examples=self.examples,
                        time_budget=per_budget, stop_on_finding=not self.keep_going, on_progress=on_progress,
                        chunk_offset=self.shard[0], chunk_step=self.shard[1], journal=journal, stats=stats,
                    )
                except KeyboardInterrupt:
                    interrupted = True
                    if stats.unshrunk is not None:  # kept as found: the interrupt cut its shrinking short
                        stats.findings.append(stats.unshrunk)
                        saved.setdefault(id(stats.unshrunk), self._path(stats.unshrunk))
                    results[name] = stats
                    break
                on_progress(stats)
                results[name] = stats
        if interrupted:  # a second signal must not cut the report short
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        findings = [(n, f) for n, s in results.items() for f in s.findings]
        if self.as_json:
            print(json.dumps(self._json(backend.name, results, saved, interrupted), indent=2))
        else:
            self._print(console, results, saved, interrupted)
        if findings:
            return EXIT_FINDINGS
        return EXIT_INTERRUPTED if interrupted else EXIT_OK

    def _json(self, backend: str, results: dict[str, Stats], saved: dict[int, Path], interrupted: bool) -> dict[str, Any]:
        from .targets import TARGETS

        return {
            "seed": self.seed,
            "mode": self.mode,
            "backend": backend,
            "shard": f"{self.shard[0] + 1}/{self.shard[1]}",
            "interrupted": interrupted,
            "targets": {
                n: {
                    "examples": s.examples,
                    "tokens_verified": s.tokens,
                    "seconds": round(s.seconds, 3),
                    "features_reached": sorted(s.features),
                    "features_missed": sorted(set(TARGETS[n].features) - s.features),
                    "findings": [
                        {"kind": f.kind, "file": str(saved.get(id(f), "")), "report": f.report()} for f in s.findings
                    ],
                }
                for n, s in results.items()
            },
        }

    def _print(self, console: Any, results: dict[str, Stats], saved: dict[int, Path], interrupted: bool) -> None:
        from rich.table import Table

        from .targets import TARGETS

        out = sys.stdout
        for n, s in results.items():
            for f in s.findings:
                print(f"\n=== finding: {n} ({f.kind}) saved to {saved.get(id(f))}", file=out)
                print(f.report(), file=out)
        table = Table(title=f"eaglefuzz fuzz: seed {self.seed}, mode {self.mode}, shard {self.shard[0] + 1}/{self.shard[1]}")
        for col in ("target", "examples", "tokens verified", "ex/s", "features", "findings"):
            table.add_column(col, justify="left" if col == "target" else "right")
        for n, s in results.items():
            rate = s.examples / s.seconds if s.seconds else 0.0
            table.add_row(n, str(s.examples), str(s.tokens), f"{rate:.1f}", f"{len(s.features)}/{len(TARGETS[n].features)}", str(len(s.findings)))
        Console_ = type(console)
        Console_(file=out, width=max(console.width, 110)).print(table)
        missed = {n: sorted(set(TARGETS[n].features) - s.features) for n, s in results.items()}
        for n, m in missed.items():
            if m:
                print(f"{n}: features not reached: {', '.join(m)}", file=out)
        if interrupted:
            print("interrupted: findings so far are saved", file=out)


def save_finding(finding: Finding, corpus_dir: Path | None, kernels_path: str | None) -> Path:
    """Write ``finding``'s case to the corpus with its report and the command that replays it."""
    from .corpus import CORPUS_DIR, case_path, finding_record, save_case

    root = corpus_dir or CORPUS_DIR
    replay = "eaglefuzz replay " + shlex.quote(str(case_path(finding.case, root)))
    if kernels_path:
        replay += " --kernels " + shlex.quote(kernels_path)
    found_by = "eaglefuzz " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    record = finding_record(finding, found_by=found_by, replay=replay)
    return save_case(finding.case, root, finding=record)


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
    case: Any, message: str, *, kernels_path: str | None, backend: str, budget_s: float = 120.0, rounds: int = 40
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
            args = ["_shrink-crash", str(f), "--backend", backend]
            if kernels_path:
                args += ["--kernels", kernels_path]
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
    kernels_path: str | None,
    corpus_dir: Path | None,
    as_json: bool,
    backend: str = "auto",
    save: bool = True,
) -> int:
    """Run ``eaglefuzz`` with ``argv`` in a child process; report the case that killed it, if any.

    The child journals each case before running it. When it dies of a signal (or leaves after
    a CUDA error), the journal names the case in flight: it is shrunk (one fresh worker per
    step, see :func:`shrink_crash`), reported as a crash finding and saved to the corpus like
    any other (unless ``save`` is false: a replayed case is already there, and not shrunk).
    """
    import tempfile

    from .check import Finding
    from .journal import orphans
    from .targets import Outcome

    with tempfile.TemporaryDirectory(prefix="eaglefuzz-journal-") as jdir:
        code = _run_worker(argv, Path(jdir))
        if code in (EXIT_OK, EXIT_FINDINGS, 2, EXIT_INTERRUPTED):
            return code
        if code == EXIT_DEVICE_LOST:
            how = "the device became unusable"
        elif code == EXIT_INTERNAL:
            how = "eaglefuzz itself failed (traceback above)"
        else:
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        crashed = orphans(Path(jdir))
    results = []
    for orphan in crashed:
        if orphan.case is None:
            results.append({"kind": "crash", "file": None, "report": f"the journal could not be read: {orphan.error}"})
            continue
        case, crash = orphan.case, orphan.message or f"the process died ({how}) while running this case"
        if save:
            print(f"eaglefuzz: a case killed the process ({how}); shrinking it, one process per step",
                  file=sys.stderr)
            case, crash, _ = shrink_crash(case, crash, kernels_path=kernels_path, backend=backend)
        finding = Finding(case, Outcome(crash=crash), kernels_path or "kernels/spec_decode_utils.py")
        path = save_finding(finding, corpus_dir, kernels_path) if save else None
        results.append({"kind": "crash", "file": str(path) if path else None, "report": finding.report()})
    if not results:
        results.append({"kind": "crash", "file": None, "report": f"the fuzzing process ended ({how}) outside any case"})
        if code == EXIT_INTERNAL:
            return EXIT_INTERNAL
    if as_json:
        print(json.dumps({"crashed": how, "findings": results}, indent=2))
    else:
        for r in results:
            print(f"\n=== finding: crash, saved to {r['file']}\n{r['report']}")
    return EXIT_FINDINGS
