"""Replaying corpus cases against a source: one report per distinct finding, with its files."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from ..checking.check import Finding
from ..core.case import Case
from ..core.exitcodes import findings_exit


def signature(finding: Finding) -> tuple[Any, ...]:
    """What makes two findings "the same": target, kind, and the (array, region) pairs that
    differ (or the crash's exception type); values and indices may differ."""
    o = finding.outcome
    diffs = o.oracle_disagreements or o.differences
    crash = (o.crash or "").split(":", 1)[0]
    return (finding.case.kernel, finding.kind, crash, tuple(sorted({(d.array, d.region) for d in diffs})))


STRUCTURED = ("tier", "crash", "hang", "differences_total", "differences", "oracle_disagreements")
"""The fields of :meth:`~..checking.check.Finding.to_json` a replayed failure carries in ``--json``."""


def failed_record(file: str, finding: Finding) -> dict[str, Any]:
    """The record of a replayed file that fails (its report names the file as saved)."""
    return {
        **finding.to_json(), "file": file, "kernel": finding.case.kernel, "status": "failed",
        "report": finding.report(saved=Path(file)), "signature": repr(signature(finding)),
        "size": len(finding.case.to_python()),
    }


def replay_cases(
    cases: Sequence[tuple[Path, Case] | tuple[Path, Case, str]],
    source: Any,
    *,
    backend: str,
    as_json: bool,
    journal_dir: Path | None = None,
    report: bool = True,
) -> int:
    """Check every case against ``source``; print ``ok``/``FAIL`` per file (text) and one
    report per group of identical findings; the exit code.

    A case may come with its corpus tier (``(path, case, tier)``): an extended-tier case is
    checked in the extended domain, and a failure there is an edge divergence (exit code 4 when
    every failure is one).

    Every case's cost on the chosen backend is checked before any runs (a
    :class:`~..core.errors.UserError` naming the file, the field and the limit). A signal stops the
    replay: what was replayed is reported. With ``journal_dir`` (under a supervisor), files
    already recorded there by an earlier worker are skipped and each file's result is recorded.
    """
    from ..core import interrupts

    with interrupts.interruptible():
        return _replay(cases, source, backend=backend, as_json=as_json, journal_dir=journal_dir, report=report)


def _replay(
    cases: Sequence[tuple[Path, Case] | tuple[Path, Case, str]],
    source: Any,
    *,
    backend: str,
    as_json: bool,
    journal_dir: Path | None,
    report: bool,
) -> int:
    from dataclasses import asdict

    from ..checking.check import check_case, warm_oracles
    from ..core import interrupts
    from ..core.errors import UserError
    from ..core.limits import LimitExceeded, check_cost
    from ..sources import implementations_for
    from ..sources.triton_backend import select_backend
    from .journal import Journal
    from .runlog import RunLog

    b = select_backend(backend)
    impls = implementations_for(source)
    tiers = {str(c[0]): (c[2] if len(c) > 2 else "production") for c in cases}
    cases = [(c[0], c[1]) for c in cases]
    for f, case in cases:
        if case.kernel in impls:
            try:
                check_cost(case, interpreter=not b.compiled)
            except LimitExceeded as exc:
                raise UserError(f"{f}: {exc.field}: {exc.rule}") from None
    journal = Journal(journal_dir) if journal_dir else None
    log = RunLog(journal_dir / "run" if journal_dir else None)
    meta = {
        "command": "replay", "backend": b.name, "source": source.describe(),
        "implementations": {n: impls.origin[n].describe() for n in impls},
        "origins": {n: asdict(impls.origin[n]) for n in impls},
        "untested": dict(impls.untested),
    }
    log.set_meta(meta)
    log.set_plan([str(f) for f, _ in cases])
    finished = log.records()
    warm_oracles(sorted({c.kernel for f, c in cases if c.kernel in impls and str(f) not in finished}))
    stopped = False
    try:
        for f, case in cases:
            unit = str(f)
            if unit in finished:
                continue
            log.begin(unit)
            if case.kernel not in impls:
                log.add(unit, {"file": unit, "kernel": case.kernel, "status": "skipped"})
                continue
            finding = check_case(case, impls, b.device, journal, domain=tiers[unit])
            if finding is None:
                log.add(unit, {"file": unit, "kernel": case.kernel, "status": "ok"})
            else:
                log.add(unit, failed_record(unit, finding))
            if not as_json:
                click.echo(f"ok   {f}" if finding is None else f"FAIL {f}")
    except KeyboardInterrupt:
        stopped = True
        interrupts.hold()
    doc = replay_doc(meta, [r for _, r in log.ordered()], stopped, planned=len(cases))
    if report:
        print_replay(doc, as_json=as_json)
        sys.stdout.flush()
        log.mark_reported()
    return replay_exit_code(doc, interrupts.received())


def replay_doc(meta: dict[str, Any], records: list[dict[str, Any]], stopped: bool, *, planned: int) -> dict[str, Any]:
    """The JSON document of a replay: ``records`` (one per file) grouped by signature."""
    skipped: dict[str, int] = {}
    untested: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
    replayed = 0
    verdicts = meta.get("untested", {})
    for r in records:
        if r["status"] == "skipped" and r["kernel"] in verdicts:
            u = untested.setdefault(r["kernel"], {"cases": 0, "verdict": verdicts[r["kernel"]]})
            u["cases"] += 1
            continue
        if r["status"] == "skipped":
            skipped[r["kernel"]] = skipped.get(r["kernel"], 0) + 1
            continue
        replayed += 1
        if r["status"] == "failed":
            groups.setdefault(r["signature"], []).append(r)
    return {
        "backend": meta["backend"],
        "source": meta["source"],
        "implementations": meta["implementations"],
        "replayed": replayed,
        "not_replayed": skipped,
        "untested": untested,
        "failed": [
            {"file": r["file"], "kernel": r["kernel"], "kind": r["kind"], "group": i,
             **{k: r[k] for k in STRUCTURED if k in r}, "report": r["report"], "size": r["size"]}
            for i, g in enumerate(groups.values()) for r in g
        ],
        "distinct_findings": len(groups),
        "interrupted": stopped,
        "not_run": planned - len(records),
    }


def replay_exit_code(doc: dict[str, Any], signum: int | None) -> int:
    """1 when a file fails in the production tier; else 2 when cases were not replayed for
    their target's interface verdict; else 4 when every failure is an edge divergence; else
    128 + signal when interrupted; else 0."""
    return findings_exit([r["kind"] for r in doc["failed"]], signum, doc["interrupted"],
                         untested=bool(doc.get("untested")))


def print_replay(doc: dict[str, Any], *, as_json: bool) -> None:
    """Print a replay's document: as JSON, or one report per group and a summary line."""
    if as_json:
        failed = [{k: v for k, v in r.items() if k != "size"} for r in doc["failed"]]  # size: internal
        click.echo(json.dumps(dict(doc, failed=failed), indent=2))
        return
    groups: dict[int, list[dict[str, Any]]] = {}
    for r in doc["failed"]:
        groups.setdefault(r["group"], []).append(r)
    for g in groups.values():
        rep = min(g, key=lambda r: (r["size"], r["file"]))
        files = ", ".join(r["file"] for r in g)
        click.echo(f"\n=== {len(g)} case(s) fail the same way ({rep['kernel']}, {rep['kind']}): {files}")
        click.echo(rep["report"])
    if groups:
        click.echo()  # the last reproducer ends in a blank line: copying it takes nothing more
    for k, n in sorted(doc["not_replayed"].items()):
        click.echo(f"not replayed: {n} case(s) of {k}: {doc['source']} does not define it")
    for k, u in doc.get("untested", {}).items():
        click.echo(f"not replayed: {u['cases']} case(s) of {k}: {u['verdict']}")
    failed = len(doc["failed"])
    click.echo(f"{doc['replayed'] - failed} passed, {failed} failed ({len(groups)} distinct) against {doc['source']}")
    if doc["interrupted"]:
        click.echo(f"interrupted: {doc['not_run']} file(s) not replayed")
