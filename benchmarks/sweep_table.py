"""The Markdown table of a device sweep's JSON lines, and how many targets verify half of their kernel alone.

Not a test. One row per target of ``device_throughput.py --json``, the highest ratio first (a
torch function's, which has none, last):

    python benchmarks/sweep_table.py sweep.jsonl [more.jsonl ...]

A sweep that spans several device calls (``--resume``) leaves one file, or one per call: a
target measured more than once keeps its last line (the files in the order given, each top to
bottom). Where a kernel alone was timed in several rounds (``--alone-rounds``), its spread
column is its fastest round's rate over its slowest's, and the summary counts the targets
whose ratio lies on either side of half between those two rounds (not settled by them). A
line that is not JSON, or lacks a field the table needs, is one line naming the file, its line
number and the field (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

FIELDS = ("target", "lanes", "examples", "seconds", "tokens", "alone", "stages")
"""The fields of a JSON line the table reads (``alone`` is ``None`` for a torch function)."""


def _bad(message: str) -> None:
    """One line on stderr, exit 2."""
    print(f"sweep_table: {message}", file=sys.stderr)
    sys.exit(2)


def rate(x: float) -> str:
    """Tokens per second as the tables of RESULTS.md write them (M, a decimal below 1 G)."""
    return f"{x / 1e6:,.1f} M" if x < 1e9 else f"{x / 1e6:,.0f} M"


def read(paths: list[Path]) -> dict[str, dict]:
    """Each target's last line over ``paths``; a bad line exits 2 with one line naming it."""
    rows: dict[str, dict] = {}
    for path in paths:
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            _bad(f"{path}: cannot read it ({exc.strerror or exc})")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                _bad(f"{path}:{n}: not a JSON line ({exc.msg})")
            if not isinstance(row, dict):
                _bad(f"{path}:{n}: not a JSON object (a line of device_throughput.py --json)")
            missing = [f for f in FIELDS if f not in row]
            if missing:
                _bad(f"{path}:{n}: no field {missing[0]!r} (a line of device_throughput.py --json)")
            for field in ("tokens", "seconds", "examples", "lanes"):
                if not isinstance(row[field], (int, float)) or row[field] < 0 or (field == "seconds" and not row[field]):
                    _bad(f"{path}:{n}: field {field!r} is {row[field]!r}, not a count or a positive number of seconds")
            if row["alone"] is not None and (not isinstance(row["alone"], (int, float)) or row["alone"] <= 0):
                _bad(f"{path}:{n}: field 'alone' is {row['alone']!r}, not a positive rate (or null: a torch function)")
            rounds = row.get("alone_rounds")
            if rounds is not None and (not isinstance(rounds, list) or
                                       not all(isinstance(x, (int, float)) and x > 0 for x in rounds)):
                _bad(f"{path}:{n}: field 'alone_rounds' is {rounds!r}, not a list of positive rates")
            if not isinstance(row["stages"], dict):
                _bad(f"{path}:{n}: field 'stages' is not an object of each stage's share")
            rows[row["target"]] = row
    return rows


def spread(r: dict) -> tuple[str, bool]:
    """The kernel alone's spread cell (its fastest round over its slowest) and whether the ratio
    lies on either side of half between those rounds (one round, or none: no spread)."""
    rounds = r.get("alone_rounds") or []
    if len(rounds) < 2:
        return "one round" if rounds else "n/a", False
    rate_ = r["tokens"] / r["seconds"]
    return f"{max(rounds) / min(rounds):.2f}x", rate_ / max(rounds) < 0.5 <= rate_ / min(rounds)


def table(rows: dict[str, dict]) -> str:
    """The Markdown table and its summary line."""
    out = ["| target | lanes | examples | verified/s | kernel alone | ratio | alone's spread | alone's batches | "
           "largest stages |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    ratio = {t: (r["tokens"] / r["seconds"]) / r["alone"] if r["alone"] else None for t, r in rows.items()}
    for t in sorted(rows, key=lambda t: float("inf") if ratio[t] is None else -ratio[t]):
        r = rows[t]
        top = sorted(r["stages"].items(), key=lambda kv: -kv[1])[:3]
        cell = "n/a" if ratio[t] is None else (f"**{ratio[t]:.3f}**" if ratio[t] >= 0.5 else f"{ratio[t]:.3f}")
        out.append(f"| {t} | {r['lanes']} | {r['examples']:,} | {rate(r['tokens'] / r['seconds'])} | "
                   f"{'n/a' if not r['alone'] else rate(r['alone'])} | {cell} | {spread(r)[0]} | "
                   f"{r.get('alone_batches', 'sampled')} | " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in top) + " |")
    known = [x for x in ratio.values() if x is not None]
    unsettled = sum(spread(r)[1] for t, r in rows.items() if ratio[t] is not None)
    out.append("")
    out.append(f"{sum(x >= 0.5 for x in known)} of {len(known)} targets verify at least half of their kernel alone"
               + (f"; {unsettled} on either side of half between their fastest and slowest round." if unsettled else "."))
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", type=Path, metavar="JSONL")
    args = p.parse_args()
    rows = read(args.files)
    if not rows:
        _bad(f"{', '.join(map(str, args.files))}: no target's line in it")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
