"""Replaying corpus cases against a source: one report per distinct finding, with its files."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from .case import Case
from .check import Finding


def signature(finding: Finding) -> tuple[Any, ...]:
    """What makes two findings "the same": target, kind, and the (array, region) pairs that
    differ (or the crash's exception type); values and indices may differ."""
    o = finding.outcome
    diffs = o.oracle_disagreements or o.differences
    crash = (o.crash or "").split(":", 1)[0]
    return (finding.case.kernel, finding.kind, crash, tuple(sorted({(d.array, d.region) for d in diffs})))


def replay_cases(
    cases: Sequence[tuple[Path, Case] | tuple[Path, Case, str]],
    source: Any,
    *,
    backend: str,
    as_json: bool,
    journal_dir: Path | None = None,
) -> int:
    """Check every case against ``source``; print ``ok``/``FAIL`` per file (text) and one
    report per group of identical findings; the exit code (:func:`~.exitcodes.findings_exit`).

    A case may come with its corpus tier (``(path, case, tier)``): an extended-tier case is
    checked in the extended domain, and a failure there is an edge divergence.
    """
    from .backend import select_backend
    from .check import check_case
    from .exitcodes import findings_exit
    from .journal import Journal
    from .sources import implementations_for

    b = select_backend(backend)
    impls = implementations_for(source)
    journal = Journal(journal_dir) if journal_dir else None
    skipped: dict[str, int] = {}
    groups: dict[tuple[Any, ...], list[tuple[Path, Finding]]] = {}
    replayed = 0
    for f, case, *tier in cases:
        if case.kernel not in impls:
            skipped[case.kernel] = skipped.get(case.kernel, 0) + 1
            continue
        replayed += 1
        finding = check_case(case, impls, b.device, journal, domain=tier[0] if tier else "production")
        if finding is None:
            if not as_json:
                click.echo(f"ok   {f}")
            continue
        groups.setdefault(signature(finding), []).append((f, finding))
        if not as_json:
            click.echo(f"FAIL {f}")
    notes = [
        f"not replayed: {n} case(s) of {k}: {source.describe()} does not define it"
        for k, n in sorted(skipped.items())
    ]
    failed = sum(len(g) for g in groups.values())
    if as_json:
        click.echo(json.dumps({
            "backend": b.name,
            "source": source.describe(),
            "implementations": {n: impls.origin[n].describe() for n in impls},
            "replayed": replayed,
            "not_replayed": skipped,
            "failed": [
                {"file": str(f), "kernel": fd.case.kernel, "kind": fd.kind, "group": i,
                 "report": fd.report(saved=f)}
                for i, g in enumerate(groups.values()) for f, fd in g
            ],
            "distinct_findings": len(groups),
        }, indent=2))
    else:
        for g in groups.values():
            f, fd = min(g, key=lambda x: (len(str(x[1].case.to_python())), str(x[0])))
            files = ", ".join(str(x[0]) for x in g)
            click.echo(f"\n=== {len(g)} case(s) fail the same way ({fd.case.kernel}, {fd.kind}): {files}")
            click.echo(fd.report(saved=f))
        for n in notes:
            click.echo(n)
        click.echo(f"{replayed - failed} passed, {failed} failed ({len(groups)} distinct) against {source.describe()}")
    return findings_exit([g[0][1] for g in groups.values()])
