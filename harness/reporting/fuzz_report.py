"""The report of ``eaglefuzz fuzz``: a run's JSON document, its text (findings, a table, the
source, notes), and its exit code."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from ..core.exitcodes import findings_exit

if TYPE_CHECKING:  # for the annotations: printing a run's document needs no target
    from ..checking.check import Finding


def plural(n: int, word: str) -> str:
    """``1 example``, ``2 examples``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def finding_record(f: Finding, saved: Path | None, *, met: int = 1, unsaved: str | None = None) -> dict[str, Any]:
    """One finding in a run's document: its kind, tier, file, how many cases of the run failed
    that way (``met``), its report, and the structured fields of :meth:`Finding.to_json`
    (``not_saved``: why it could not be written, when it could not)."""
    return {**f.to_json(), "file": str(saved or ""), "met": met,
            **({"not_saved": unsaved} if unsaved else {}), "report": f.report(saved=saved)}


def fuzz_doc(meta: dict[str, Any], entries: list[tuple[str, dict[str, Any]]], interrupted: bool) -> dict[str, Any]:
    """The JSON document of a fuzzing run: ``meta`` and each target's entry, in order."""
    keys = ("seed", "mode", "backend", "source", "notes", "shard")
    doc: dict[str, Any] = {k: meta[k] for k in keys}
    doc["domain"] = meta.get("domain", "production")
    doc["untested"] = dict(meta.get("untested", {}))
    doc["untested"].update((n, e["untested"]) for n, e in entries if "untested" in e)
    if "startup_seconds" in meta:  # --time-budget: spent before the first target's cases, and on what
        doc["startup_seconds"] = meta["startup_seconds"]
        doc["startup_stages"] = meta.get("startup_stages", {})
    doc["interrupted"] = interrupted
    doc["targets"] = {n: e for n, e in entries if "untested" not in e}
    return doc


def fuzz_exit_code(doc: dict[str, Any], signum: int | None) -> int:
    """1 when any target has a finding in the production tier (or the oracles disagree); else 2
    when a target could not be tested (``untested``: its interface verdict); else 4 when every
    finding is an edge divergence; else 128 + signal when interrupted; else 0."""
    kinds = [f["kind"] for t in doc["targets"].values() for f in (*t["findings"], *t.get("edge_divergences", ()))]
    return findings_exit(kinds, signum, doc["interrupted"], untested=bool(doc.get("untested")))


def print_fuzz(doc: dict[str, Any], *, width: int = 110, out: Any = None) -> None:
    """The text report of a fuzzing run's JSON document: findings (contract violations, then
    edge divergences), a table, the source, notes."""

    out = out or sys.stdout
    targets = doc["targets"]
    extended = doc.get("domain") == "extended"
    blocks = []
    for n, t in targets.items():
        for f in t["findings"]:
            where = f" [shard {f['shard']}, {f['where']}]" if "shard" in f else ""
            blocks.append(f"=== finding: {n} ({f['kind']}){where} {_saved(f)}{_met(f)}\n{f['report']}")
    for n, t in targets.items():  # apart from contract violations, after them
        for f in t.get("edge_divergences", ()):
            blocks.append(f"=== edge divergence (extended tier, not a contract violation): {n} "
                          f"{_saved(f)}{_met(f)}\n{f['report']}")
    for b in blocks:
        print(f"\n{b}", file=out)
    if blocks:
        print(file=out)  # the last reproducer ends in a blank line: copying it takes nothing more
    tiers = "production and extended tiers" if extended else "production tier"
    table = Table(title=f"eaglefuzz fuzz: seed {doc['seed']}, mode {doc['mode']}, {tiers}, shard {doc['shard']}")
    shrinks = any(t.get("shrink_attempts") for t in targets.values())
    cols = ["target", "examples", "tokens verified", "ex/s", "features", "findings"]
    if shrinks:
        cols[2:2] = ["shrink attempts"]
    if extended:
        cols[1:2] = ["production-tier examples", "extended-tier examples"]
        cols[-1:-1] = ["edges"]
        cols.append("edge divergences")
    for col in cols:
        # a target's name is never cut or wrapped: the table grows instead (see the console below)
        table.add_column(col, justify="left" if col == "target" else "right",
                         no_wrap=col == "target", min_width=max(map(len, targets), default=0) if col == "target" else None)
    for n, t in targets.items():
        edges = len(t.get("edge_divergences", ()))
        if t.get("fault"):
            row = [n, "-", "-", "-", "-", str(len(t["findings"]))]
            if shrinks:
                row[2:2] = ["-"]
            if extended:
                row[1:2] = ["-", "-"]
                row[-1:-1] = ["-"]
                row.append(str(edges))
            table.add_row(*row)
            continue
        rate = t["examples"] / t["seconds"] if t["seconds"] else 0.0
        reached, missed = t["features_reached"], t["features_missed"]
        row = [n, str(t["examples"]), str(t["tokens_verified"]), f"{rate:.1f}",
               f"{len(reached)}/{len(reached) + len(missed)}", str(len(t["findings"]))]
        if shrinks:
            row[2:2] = [str(t.get("shrink_attempts") or 0)]
        if extended:
            per_tier = t.get("examples_per_tier", {})
            got, lack = t.get("edges_reached", []), t.get("edges_missed", [])
            searched = "extended" in t.get("tiers_searched", ("extended",))  # '-': a contract violation ended it
            row[1:2] = [str(per_tier.get("production", 0)), str(per_tier.get("extended", 0)) if searched else "-"]
            row[-1:-1] = [f"{len(got)}/{len(got) + len(lack)}" if searched else "-"]
            row.append(str(edges))
        table.add_row(*row)
    console = Console(file=out, width=max(width, 110))
    needed = console.measure(table, options=console.options.update_width(100_000)).maximum
    console.width = max(console.width, needed)  # never cut a cell: a log is wider than a terminal
    console.print(table)
    others = apart(targets)
    print(f"source: {doc['source']}{runners({n: t for n, t in targets.items() if n not in others})}", file=out)
    for n, impl in others.items():  # the rest are the source's file, each under its own name
        print(f"  {n}: {impl}{runners({n: targets[n]})}", file=out)
    for line in doc.get("untested", {}).values():
        print(f"not tested: {line}", file=out)
    for note in doc["notes"]:
        print(f"note: {note}", file=out)
    for n, t in targets.items():
        if t.get("device"):
            d = t["device"]
            st = ", ".join(f"{k} {v:.2f}" for k, v in d["stage_seconds"].items())
            scale = (f"; {plural(d['scale_cases'], 'production-scale case')} (tables past 2**31 elements) in a "
                     "process of their own") if d.get("scale_cases") else ""
            scale += f"; production-scale cases skipped: {d['scale_skipped']}" if d.get("scale_skipped") else ""
            scale += (f"; {plural(d['scale_unfit'], 'production-scale example')} not checked: they did not fit in the "
                      "GPU's free memory (other --lanes of this GPU held it: fewer lanes, or a larger GPU, check "
                      "them)") if d.get("scale_unfit") else ""
            scale += (f"; {d['oom_retries']} batch{'es' if d['oom_retries'] != 1 else ''} drawn and checked again after the GPU ran out of "
                      "memory (fewer --lanes on this GPU would avoid the waits)") if d.get("oom_retries") else ""
            print(f"device: {n}: seconds per stage: {st}; warm-up (JIT) {d['warmup_seconds']:.1f} s; "
                  f"{d['cross_checked']} case(s) cross-checked against the NumPy and Numba oracles{scale}", file=out)
        elif doc["mode"] == "device" and not t.get("fault"):  # a fault lost the counts, not the generator
            print(f"device: {n} has no device generator (no device.py in its folder): fuzzed in bulk mode", file=out)
    for n, t in targets.items():
        if t.get("fault"):
            print(f"{n}: a case {'hung' if t['fault'] == 'hang' else 'killed the worker'}; its counts are "
                  "lost, the run went on with the next target", file=out)
            continue
        if t["features_missed"] and not t["findings"]:  # a finding stops the target's run early
            where = (f" (device mode: features are counted on the {t['device']['cross_checked']} cross-checked "
                     "cases only)") if t.get("device") else ""
            missed = t["features_missed"]
            what = f"the feature {missed[0]}" if len(missed) == 1 else f"the features {', '.join(missed)}"
            toured = [f for f in t.get("features_by_tour_only", ()) if f in missed]
            tour = f"; the tour's shapes alone reached {', '.join(toured)}, which count only when drawn" if toured else ""
            print(f"coverage note: {n} did not reach {what} in this run{where} (not an error; more examples "
                  f"or --mode bulk reach {'it' if len(missed) == 1 else 'them'}{tour})", file=out)
        if extended and "extended" not in t.get("tiers_searched", ("extended",)):
            print(f"{n}: its extended tier was not searched: a contract violation ends a target's run "
                  "(--keep-going searches it too)", file=out)
        elif extended and t.get("edges_missed") and not t.get("edge_divergences"):  # it ends the edges' search
            missed = t["edges_missed"]
            what = f"the edge {missed[0]}" if len(missed) == 1 else f"the edges {', '.join(missed)}"
            print(f"coverage note: {n} did not reach {what} of its extended tier in this run (not an error; "
                  f"more examples reach {'it' if len(missed) == 1 else 'them'})", file=out)
        if t.get("edge_divergences") and not t["findings"]:
            print(f"{n}: edge divergences only: {t.get('examples_per_tier', {}).get('production', 0)} "
                  "production-tier examples kept the contract", file=out)
    for s in doc.get("shards", ()):  # several shards at once (.multi)
        if "failure" in s:
            print(f"shard {s['shard']} on {s['where']}: failed (exit code {s['exit_code']}): "
                  + " | ".join(s["failure"]), file=out)
        else:
            print(f"shard {s['shard']} on {s['where']}: {s['examples']} examples, {s['findings']} finding(s), "
                  f"exit code {s['exit_code']}", file=out)
    if doc["interrupted"]:
        print("interrupted: findings so far are saved", file=out)


def apart(targets: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The targets whose implementation is not where most of the run's are (another file, the
    bundled copy for a file that lacks it, a variant, bound parameters): name -> implementation.
    The others are the source's file, each under its function's name, as their reports'
    ``tested:`` line says."""
    where = {n: re.sub(r"::\S+ ", "::", t["implementation"], count=1) for n, t in targets.items()}
    counts: dict[str, int] = {}
    for w in where.values():
        counts[w] = counts.get(w, 0) + 1
    usual = max(counts, key=lambda w: counts[w], default=None)
    return {n: targets[n]["implementation"] for n, w in where.items() if w != usual}


def runners(targets: dict[str, dict[str, Any]]) -> str:
    """``, model runner V1``: the vLLM model runner of ``targets`` (a run's entries), as a
    finding's ``tested:`` line ends; ``, model runners V1 for a, b; V2 for c`` when they differ;
    empty for none (a document written before the runner was recorded)."""
    by: dict[str, list[str]] = {}
    for n, t in targets.items():
        if t.get("runner"):
            by.setdefault(t["runner"], []).append(n)
    if len(by) == 1:
        return f", model runner {next(iter(by))}"
    return f", model runners {'; '.join(r + ' for ' + ', '.join(ns) for r, ns in by.items())}" if by else ""


def _saved(f: dict[str, Any]) -> str:
    """``saved to FILE``, or why it is not."""
    if f.get("not_saved"):
        return f"NOT saved (the report and reproducer below are all there is): cannot write {f['not_saved']}"
    return f"saved to {f['file'] or None}"


def _met(f: dict[str, Any]) -> str:
    met = f.get("met", 1)
    return f" (met in {met} cases of this run: the same outputs and regions differ)" if met > 1 else ""
