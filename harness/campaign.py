"""A fuzzing campaign: targets in turn, live progress, findings saved as they come, a summary.

The report depends only on the seed and options, timings aside: targets run in a fixed
order, chunk seeds derive from the base seed, and findings are listed in the order found.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .check import Finding
from .exitcodes import findings_exit
from .fuzz import Stats, bulk_fuzz_target, fuzz_target

PROGRESS_EVERY = float(os.environ.get("EAGLEFUZZ_PROGRESS_EVERY", "10"))
"""Seconds between progress lines when no progress bar is shown (no terminal)."""


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@dataclass
class Campaign:
    """Options of one ``eaglefuzz fuzz`` run (see the CLI for their meaning)."""

    names: list[str] | None
    """Explicitly named targets; ``None``: every target the source defines."""
    source: Any
    """The :class:`~.sources.Source` of the code under test."""
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
    domain: str = "production"
    """``production`` or ``extended`` (:mod:`.domains`)."""

    def _save(self, finding: Finding) -> Path:
        from .corpus import save_finding

        return save_finding(finding, self.corpus_dir)

    def _path(self, finding: Finding) -> Path:
        from .corpus import case_path

        return case_path(finding.case, self.corpus_dir)

    def run(self) -> int:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from .backend import select_backend
        from .journal import Journal
        from .sources import implementations_for
        from .strategies import CUDA_SCALE, INTERPRETER_SCALE

        signal.signal(signal.SIGTERM, _interrupt)  # a timeout stops the run like Ctrl-C: findings kept
        backend = select_backend(self.backend)
        impls = implementations_for(self.source, self.names)
        self.impls = impls
        names = list(impls.funcs)
        for note in impls.notes:
            print(f"eaglefuzz: {note}", file=sys.stderr)
        journal = Journal(self.journal_dir) if self.journal_dir else None
        scale = CUDA_SCALE if backend.compiled else INTERPRETER_SCALE
        console = Console(stderr=True)
        per_budget = None if self.time_budget is None else self.time_budget / len(names)
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
            for name in names:
                total = self.examples if self.examples is not None else per_budget
                task = bar.add_task(name, total=total, examples=0, rate=0.0, findings=0)
                start = time.monotonic()

                stats = Stats()
                pending: list[Path] = []  # unshrunk findings saved by this run, replaced once shrunk

                last_line = [start]

                def on_progress(stats: Stats, task: Any = task, start: float = start, pending: list[Path] = pending,
                                name: str = name, last_line: list[float] = last_line) -> None:
                    now = time.monotonic()
                    elapsed = max(now - start, 1e-9)
                    if not self.progress and now - last_line[0] >= PROGRESS_EVERY:
                        last_line[0] = now
                        print(f"eaglefuzz: {name}: {stats.examples} examples, {stats.examples / elapsed:.1f} ex/s, "
                              f"{len(stats.findings) + (stats.unshrunk is not None)} finding(s), {elapsed:.0f} s",
                              file=sys.stderr, flush=True)
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
                        domain=self.domain,
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
        findings = [f for s in results.values() for f in s.findings]
        if self.as_json:
            print(json.dumps(self._json(backend.name, results, saved, interrupted), indent=2))
        else:
            self._print(console, results, saved, interrupted)
        return findings_exit(findings, interrupted)

    def _json(self, backend: str, results: dict[str, Stats], saved: dict[int, Path], interrupted: bool) -> dict[str, Any]:
        from .targets import TARGETS

        return {
            "seed": self.seed,
            "mode": self.mode,
            "domain": self.domain,
            "backend": backend,
            "source": self.source.describe(),
            "notes": list(self.impls.notes),
            "shard": f"{self.shard[0] + 1}/{self.shard[1]}",
            "interrupted": interrupted,
            "targets": {
                n: {
                    "implementation": self.impls.origin[n].describe(),
                    "examples": s.examples,
                    "tokens_verified": s.tokens,
                    "seconds": round(s.seconds, 3),
                    "features_reached": sorted(s.features),
                    "features_missed": sorted(set(TARGETS[n].features) - s.features),
                    **({"examples_per_tier": dict(sorted(s.tiers.items())),
                        "edges_reached": sorted(s.edges),
                        "edges_missed": sorted(set(TARGETS[n].extended_features) - s.edges)}
                       if self.domain == "extended" else {}),
                    "findings": [
                        {"kind": f.kind, "tier": f.tier, "file": str(saved.get(id(f), "")),
                         "report": f.report(saved=saved.get(id(f)))} for f in s.contract_findings
                    ],
                    "edge_divergences": [
                        {"kind": f.kind, "tier": f.tier, "file": str(saved.get(id(f), "")),
                         "report": f.report(saved=saved.get(id(f)))} for f in s.findings if f.is_edge
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
            for f in s.contract_findings:
                print(f"\n=== finding: {n} ({f.kind}) saved to {saved.get(id(f))}", file=out)
                print(f.report(saved=saved.get(id(f))), file=out)
        for n, s in results.items():  # apart from contract violations, after them
            for f in s.findings:
                if f.is_edge:
                    print(f"\n=== edge divergence (extended tier, not a contract violation): {n} "
                          f"saved to {saved.get(id(f))}", file=out)
                    print(f.report(saved=saved.get(id(f))), file=out)
        extended = self.domain == "extended"
        domain = f", domain {self.domain}" if extended else ""
        table = Table(title=f"eaglefuzz fuzz: seed {self.seed}, mode {self.mode}{domain}, shard {self.shard[0] + 1}/{self.shard[1]}")
        cols = ["target", "examples", "tokens verified", "ex/s", "features", "findings"]
        if extended:
            cols[2:2] = ["extended-tier examples"]
            cols[-1:-1] = ["edges"]
            cols.append("edge divergences")
        for col in cols:
            table.add_column(col, justify="left" if col == "target" else "right")
        for n, s in results.items():
            rate = s.examples / s.seconds if s.seconds else 0.0
            row = [n, str(s.examples), str(s.tokens), f"{rate:.1f}", f"{len(s.features)}/{len(TARGETS[n].features)}",
                   str(len(s.contract_findings))]
            if extended:
                row[2:2] = [str(s.tiers.get("extended", 0))]
                row[-1:-1] = [f"{len(s.edges)}/{len(TARGETS[n].extended_features)}"]
                row.append(str(len(s.findings) - len(s.contract_findings)))
            table.add_row(*row)
        Console_ = type(console)
        Console_(file=out, width=max(console.width, 110)).print(table)
        print(f"source: {self.source.describe()}", file=out)
        for n in results:
            print(f"  {n}: {self.impls.origin[n].describe()}", file=out)
        for note in self.impls.notes:
            print(f"note: {note}", file=out)
        missed = {n: sorted(set(TARGETS[n].features) - s.features) for n, s in results.items()}
        for n, m in missed.items():
            if m:
                print(f"coverage note: {n} did not reach {', '.join(m)} in this run "
                      "(not an error; more examples or --mode bulk reach them)", file=out)
        if extended:
            for n, s in results.items():
                m = sorted(set(TARGETS[n].extended_features) - s.edges)
                if m:
                    print(f"coverage note: {n} did not reach the edges {', '.join(m)} in this run", file=out)
                if any(f.is_edge for f in s.findings) and not s.contract_findings:
                    print(f"{n}: edge divergences only: the production tier was searched on "
                          f"({s.tiers.get('production', 0)} production-tier examples) without a contract violation",
                          file=out)
        if interrupted:
            print("interrupted: findings so far are saved", file=out)
