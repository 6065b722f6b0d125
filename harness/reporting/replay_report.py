"""The report of ``eaglefuzz replay``: one record per file, grouped by distinct finding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ..checking.check import Finding, signature
from ..core.exitcodes import findings_exit

STRUCTURED = ("tier", "runner", "crash", "hang", "differences_total", "differences", "oracle_disagreements")
"""The fields of :meth:`~..checking.check.Finding.to_json` a replayed failure carries in ``--json``."""


def failed_record(file: str, finding: Finding) -> dict[str, Any]:
    """The record of a replayed file that fails (its report names the file as saved)."""
    return {
        **finding.to_json(), "file": file, "kernel": finding.case.kernel, "status": "failed",
        "report": finding.report(saved=Path(file)), "signature": repr(signature(finding)),
        "size": len(finding.case.to_python()),
    }


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
        "replayed_by": {k: v for k, v in meta.get("elsewhere", {}).items() if k in skipped and v},
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
    by: dict[str, list[str]] = {}
    for k in doc["not_replayed"]:
        by.setdefault(doc.get("replayed_by", {}).get(k, ""), []).append(k)
    for how, kernels in sorted(by.items()):  # one line per way to replay them
        n = sum(doc["not_replayed"][k] for k in kernels)
        hint = f"; {how}" if how else ""
        if len(kernels) == 1:
            click.echo(f"not replayed: {n} case(s) of {kernels[0]}: {doc['source']} does not define it{hint}")
        else:
            counts = ", ".join(f"{k} {doc['not_replayed'][k]}" for k in kernels)
            click.echo(f"not replayed: {n} case(s) of {len(kernels)} targets {doc['source']} does not define "
                       f"({counts}){hint}")
    for k, u in doc.get("untested", {}).items():
        click.echo(f"not replayed: {u['cases']} case(s) of {k}: {u['verdict']}")
    failed = len(doc["failed"])
    click.echo(f"{doc['replayed'] - failed} passed, {failed} failed ({len(groups)} distinct) against {doc['source']}")
    if doc["interrupted"]:
        click.echo(f"interrupted: {doc['not_run']} file(s) not replayed")
