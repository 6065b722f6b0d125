"""One campaign as several shards at once: one process per GPU (``--devices``), or one Ray task
per shard (``--ray``, :mod:`.ray_shards`), merged into one report.

Each shard is the ordinary ``eaglefuzz fuzz`` with ``--shard i/n`` and the same seed and
options (a supervised run of its own: crashes and hangs are handled per shard), run with
``--json`` into the one corpus; this module starts them, prefixes their progress lines with
the shard's name, and merges their documents. With ``--shard K/N`` given too, share K of N
is split further: its ``m`` shards are ``K + i*N`` of ``N*m`` (``i < m``), whose union is
exactly share K/N, so ``--devices`` runs on N machines still cover disjoint shares.

``--examples`` and ``--time-budget`` apply to each shard, as with ``--shard`` on separate
machines: ``m`` shards check ``m`` times the examples. In the merged report a target's counts
are summed, its seconds are the longest shard's (so ex/s is the rate of all shards together),
its features are the union, and each finding names its shard and device (or Ray node).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import UserError
from ..core.exitcodes import EXIT_FINDINGS, EXIT_INTERNAL, EXIT_USAGE
from ..core.interrupts import SIGNALS

# Options the parent handles itself: (flag, takes a value).
_PARENT_OPTIONS = {"--devices": True, "--ray": True, "--shards": True, "--shard": True, "--json": False,
                   "--corpus": True, "--progress": False, "--no-progress": False}


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


def _pump(stream: Any, label: str, tail: list[str]) -> None:
    for line in iter(stream.readline, ""):
        tail.append(line.rstrip("\n"))
        del tail[:-20]
        sys.stderr.write(f"[{label}] {line}")
        sys.stderr.flush()
    stream.close()


def run_on_devices(argv: Sequence[str], shards: list[str], devices: list[str], corpus: Path) -> list[ShardRun]:
    """Run shard ``shards[i]`` on ``devices[i]`` (``CUDA_VISIBLE_DEVICES`` set to it), all at
    once; their runs, in order. An interrupting signal to this process is forwarded to each
    shard once (each stops and reports what it found)."""
    from .lifeline import lifeline

    procs: list[subprocess.Popen[str]] = []
    tails: list[list[str]] = [[] for _ in shards]
    outs: list[list[str]] = [[] for _ in shards]
    threads: list[threading.Thread] = []
    received: list[int] = []
    lines: list[Any] = []
    old = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in SIGNALS}
    try:
        for i, (shard, device) in enumerate(zip(shards, devices, strict=True)):
            # Its own session, so a Ctrl-C reaches it once (forwarded below), and a lifeline, so
            # it dies with this process even after kill -9 (:mod:`.lifeline`).
            line = lifeline()
            lines.append(line)
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": device, **line.env}
            p = subprocess.Popen([sys.executable, "-m", "eaglefuzz.harness.cli", *child_args(argv, shard, corpus)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True, pass_fds=line.pass_fds)
            line.spawned()
            procs.append(p)
            label = f"shard {shard} device {device}"
            threads.append(threading.Thread(target=_pump, args=(p.stderr, label, tails[i]), daemon=True))
            threads.append(threading.Thread(target=lambda p=p, o=outs[i]: o.append(p.stdout.read()), daemon=True))
        for t in threads:
            t.start()
        forwarded = 0
        while any(p.poll() is None for p in procs):
            if len(received) > forwarded:
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGKILL if forwarded else received[forwarded])
                forwarded = len(received)
            threading.Event().wait(0.2)
        for t in threads:
            t.join()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for s, h in old.items():
            signal.signal(s, h)
        for line in lines:
            line.close()
    return [ShardRun(s, f"device {d}", p.returncode, parse_doc("".join(o)), t)
            for s, d, p, o, t in zip(shards, devices, procs, outs, tails, strict=True)]


def _merge_target(entries: list[tuple[ShardRun, dict[str, Any]]]) -> dict[str, Any]:
    """One target's entry from the shards' entries (see the module's text)."""
    ran = [(r, t) for r, t in entries if not t.get("fault")]
    first = entries[0][1]
    out: dict[str, Any] = {"implementation": first["implementation"]}
    out["examples"] = sum(t["examples"] or 0 for _, t in ran)
    out["shrink_attempts"] = sum(t.get("shrink_attempts") or 0 for _, t in ran)
    out["tokens_verified"] = sum(t["tokens_verified"] or 0 for _, t in ran)
    out["seconds"] = max((t["seconds"] or 0.0 for _, t in ran), default=0.0)
    for got, lack in (("features_reached", "features_missed"), ("edges_reached", "edges_missed")):
        if got in first or not ran:
            reached = set().union(*(t.get(got, []) for _, t in entries))
            every = reached.union(*(t.get(lack, []) for _, t in entries))
            out[got], out[lack] = sorted(reached), sorted(every - reached)
    if any("examples_per_tier" in t for _, t in ran):
        tiers: dict[str, int] = {}
        for _, t in ran:
            for k, v in t.get("examples_per_tier", {}).items():
                tiers[k] = tiers.get(k, 0) + v
        out["examples_per_tier"] = dict(sorted(tiers.items()))
    for key in ("findings", "edge_divergences"):
        if any(key in t for _, t in entries):
            out[key] = [dict(f, shard=r.shard, where=r.where) for r, t in entries for f in t.get(key, [])]
    if not ran:
        out["fault"] = first["fault"]
    return out


def merge(runs: list[ShardRun], shard: tuple[int, int]) -> dict[str, Any] | None:
    """The merged document of the shards' runs (``None`` when no shard printed a report):
    the fields of a fuzzing run's document (:func:`~.campaign.fuzz_doc`), with ``shard`` the
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
    document's code (:func:`~.campaign.fuzz_exit_code`)."""
    from .campaign import fuzz_exit_code

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
    from .campaign import print_fuzz

    if doc is not None:
        if as_json:
            print(json.dumps(doc, indent=2), flush=True)
        else:
            print_fuzz(doc)
            sys.stdout.flush()
    return merged_exit_code(doc, runs)


def fuzz_in_shards(
    argv: Sequence[str],
    *,
    devices: str | None,
    ray_address: str | None,
    shards: int | None,
    shard: tuple[int, int],
    corpus: Path,
    backend: str,
    as_json: bool,
) -> int:
    """``eaglefuzz fuzz --devices ...`` or ``--ray ADDRESS --shards N``: the shards run, their
    reports merged and printed; the exit code. Bad combinations are a :class:`UserError`."""
    if devices is not None and ray_address is not None:
        raise UserError("--devices and --ray: choose one (Ray hands each task its own GPU)")
    if ray_address is not None:
        if shards is None:
            raise UserError(f"--ray {ray_address}: give --shards N (how many Ray tasks)")
        from .ray_shards import run_on_ray

        names = sub_shards(shard, shards)
        runs = run_on_ray(ray_address, argv, names, corpus=corpus.resolve(), backend=backend)
        return report(merge(runs, shard), runs, as_json=as_json)
    if shards is not None:
        raise UserError("--shards: only with --ray (--devices runs one shard per device; --shard K/N picks one share)")
    from .cuda_devices import cuda_devices, pick_devices

    chosen = pick_devices(devices or "all", cuda_devices())
    names = sub_shards(shard, len(chosen))
    runs = run_on_devices(argv, names, chosen, corpus.resolve())
    return report(merge(runs, shard), runs, as_json=as_json)
