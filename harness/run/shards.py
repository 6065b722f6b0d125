"""The shards of one campaign: each shard's command line, and their runs merged into one report.

Shard ``i`` of ``m`` is the ordinary ``eaglefuzz fuzz`` with ``--shard`` and the user's other
options (:func:`child_args`); :func:`sub_shards` splits a share ``K/N`` further, so that shards
on several machines stay disjoint. Whatever runs them (:mod:`.multi` on this host's GPUs,
:mod:`.ray_shards` as Ray tasks) hands back a :class:`ShardRun` each, and :func:`merge` makes
the one document (:mod:`..reporting.fuzz_report`) of all of them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.exitcodes import EXIT_FINDINGS, EXIT_INTERNAL, EXIT_USAGE
from ..reporting.fuzz_report import fuzz_exit_code, print_fuzz

# Options the parent handles itself: (flag, takes a value).
_PARENT_OPTIONS = {"--devices": True, "--lanes": True, "--lane": True, "--ray": True, "--shards": True, "--shard": True, "--json": False,
                   "--corpus": True, "--progress": False, "--no-progress": False, "--mps": False}


@dataclass
class ShardRun:
    """One shard's run: its ``--shard`` value, where it ran, its exit code, its JSON document
    (``None`` when it printed none) and the last lines of its stderr."""

    shard: str
    where: str
    code: int
    doc: dict[str, Any] | None = None
    stderr_tail: list[str] = field(default_factory=list)


def child_args(argv: Sequence[str], shard: str, corpus: Path) -> list[str]:
    """The ``eaglefuzz`` arguments of one shard: ``argv`` (the user's ``fuzz ...``) without the
    options the parent handles, plus ``--shard shard --json --no-progress --corpus corpus``."""
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        flag = a.split("=", 1)[0]
        if flag in _PARENT_OPTIONS:
            skip = _PARENT_OPTIONS[flag] and "=" not in a
            continue
        out.append(a)
    return [*out, "--shard", shard, "--json", "--no-progress", "--corpus", str(corpus)]


def sub_shards(shard: tuple[int, int], m: int) -> list[str]:
    """``m`` disjoint ``--shard`` values whose union is share ``shard`` (0-based ``(k, n)``)."""
    k, n = shard
    return [f"{k + i * n + 1}/{n * m}" for i in range(m)]


def parse_doc(stdout: str) -> dict[str, Any] | None:
    """The JSON document a shard printed (``None`` when it printed none)."""
    text = stdout.strip()
    if not text:
        return None
    try:
        doc = json.loads(text[text.index("{"):])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _merge_target(entries: list[tuple[ShardRun, dict[str, Any]]]) -> dict[str, Any]:
    """One target's entry from the shards' entries (see the module's text)."""
    ran = [(r, t) for r, t in entries if not t.get("fault")]
    first = entries[0][1]
    out: dict[str, Any] = {k: first[k] for k in ("runner", "implementation") if k in first}
    out["examples"] = sum(t["examples"] or 0 for _, t in ran)
    out["shrink_attempts"] = sum(t.get("shrink_attempts") or 0 for _, t in ran)
    out["tokens_verified"] = sum(t["tokens_verified"] or 0 for _, t in ran)
    out["seconds"] = max((t["seconds"] or 0.0 for _, t in ran), default=0.0)
    for got, lack in (("features_reached", "features_missed"), ("edges_reached", "edges_missed")):
        if got in first or not ran:
            reached = set().union(*(t.get(got, []) for _, t in entries))
            every = reached.union(*(t.get(lack, []) for _, t in entries))
            out[got], out[lack] = sorted(reached), sorted(every - reached)
    if any("features_by_tour_only" in t for _, t in entries):
        toured = set().union(*(t.get("features_by_tour_only", []) for _, t in entries))
        out["features_by_tour_only"] = sorted(toured - set(out.get("features_reached", [])))
    if any("examples_per_tier" in t for _, t in ran):
        tiers: dict[str, int] = {}
        for _, t in ran:
            for k, v in t.get("examples_per_tier", {}).items():
                tiers[k] = tiers.get(k, 0) + v
        out["examples_per_tier"] = dict(sorted(tiers.items()))
    if any("tiers_searched" in t for _, t in ran):  # what any shard searched
        out["tiers_searched"] = [k for k in ("production", "extended")
                                 if any(k in t.get("tiers_searched", ()) for _, t in ran)]
    if any("device" in t for _, t in ran):  # device mode: the shards' stages and cross-checks summed
        dev = [t["device"] for _, t in ran if "device" in t]
        out["device"] = {
            "stage_seconds": {k: round(sum(d["stage_seconds"].get(k, 0.0) for d in dev), 4) for k in dev[0]["stage_seconds"]},
            "cross_checked": sum(d["cross_checked"] for d in dev),
            "warmup_seconds": max(d["warmup_seconds"] for d in dev),
            "scale_cases": sum(d.get("scale_cases", 0) for d in dev),
        }
        for key in ("oom_retries", "scale_unfit"):
            if any(d.get(key) for d in dev):
                out["device"][key] = sum(d.get(key, 0) for d in dev)
        skipped = [d["scale_skipped"] for d in dev if d.get("scale_skipped")]
        if skipped and not out["device"]["scale_cases"]:
            out["device"]["scale_skipped"] = skipped[0]
    for key in ("findings", "edge_divergences"):
        if any(key in t for _, t in entries):
            out[key] = [dict(f, shard=r.shard, where=r.where) for r, t in entries for f in t.get(key, [])]
    if not ran:
        out["fault"] = first["fault"]
    return out


def merge(runs: list[ShardRun], shard: tuple[int, int]) -> dict[str, Any] | None:
    """The merged document of the shards' runs (``None`` when no shard printed a report):
    the fields of a fuzzing run's document (:func:`~..reporting.fuzz_report.fuzz_doc`), with ``shard`` the
    share the shards cover together and ``shards`` one line per shard."""
    docs = [(r, r.doc) for r in runs if r.doc is not None and "targets" in r.doc]
    if not docs:
        return None
    base = docs[0][1]
    doc: dict[str, Any] = {k: base[k] for k in ("seed", "mode", "backend", "source", "notes")}
    doc["shard"] = f"{shard[0] + 1}/{shard[1]}"
    doc["domain"] = base.get("domain", "production")
    doc["untested"] = dict(base.get("untested", {}))
    doc["interrupted"] = any(d.get("interrupted") for _, d in docs)
    names: list[str] = []
    for _, d in docs:
        names += [n for n in d["targets"] if n not in names]
    doc["targets"] = {n: _merge_target([(r, d["targets"][n]) for r, d in docs if n in d["targets"]]) for n in names}
    doc["shards"] = []
    for r in runs:
        line: dict[str, Any] = {"shard": r.shard, "where": r.where, "exit_code": r.code}
        if r.doc is not None and "targets" in r.doc:
            ts = r.doc["targets"].values()
            line["examples"] = sum(t.get("examples") or 0 for t in ts)
            line["findings"] = sum(len(t.get("findings", [])) + len(t.get("edge_divergences", [])) for t in ts)
        elif r.doc is not None:  # the shard's worker died outside any case
            line["failure"] = [f.get("report", "") for f in r.doc.get("findings", [])]
        else:
            line["failure"] = r.stderr_tail[-3:]
        doc["shards"].append(line)
    return doc


def merged_exit_code(doc: dict[str, Any] | None, runs: list[ShardRun]) -> int:
    """The exit code of the shards together: a shard's usage error (2, with no report) or
    internal error (3) first; then a shard that failed outside any case (1); else the merged
    document's code (:func:`~..reporting.fuzz_report.fuzz_exit_code`)."""
    codes = [r.code for r in runs]
    if any(r.code == EXIT_USAGE and (r.doc is None or "targets" not in r.doc) for r in runs):
        return EXIT_USAGE
    if doc is None:
        return EXIT_INTERNAL if EXIT_INTERNAL in codes or not codes else max(codes)
    code = fuzz_exit_code(doc, None)
    if any("failure" in s for s in doc["shards"]):
        return EXIT_FINDINGS
    if code == 0 and doc["interrupted"]:
        return max(c for c in codes if c > 128) if any(c > 128 for c in codes) else 130
    return code


def report(doc: dict[str, Any] | None, runs: list[ShardRun], *, as_json: bool) -> int:
    """Print the merged report (text or JSON); the exit code."""
    if doc is not None:
        if as_json:
            print(json.dumps(doc, indent=2), flush=True)
        else:
            print_fuzz(doc)
            sys.stdout.flush()
    return merged_exit_code(doc, runs)


