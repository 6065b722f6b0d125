"""``benchmarks/sweep_table.py``: the table of a device sweep's JSON lines, and bad lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "sweep_table.py"


def _line(target: str, tokens: float, alone: float | None, **extra: object) -> str:
    row = {"target": target, "lanes": 4, "examples": 512, "seconds": 2.0, "tokens": tokens, "alone": alone,
           "stages": {"draw": 0.5, "kernel": 0.3, "buffers": 0.2}} | extra
    return json.dumps(row)


def _run(*files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, files)], capture_output=True, text=True, check=False)


def test_a_sweep_table_ranks_targets_by_ratio_and_counts_those_at_half(tmp_path):
    """Rows by ratio, highest first; at or above half (exactly half too) in bold and counted; a target's last line over the
    files wins; a torch function's ratio is n/a and not counted."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(_line("slow", 2e6, 4e6) + "\n" + _line("fast", 4e6, 1e6) + "\n" + _line("half", 2e6, 2e6) + "\n")
    second.write_text("\n" + _line("slow", 0.8e6, 4e6, alone_batches=7) + "\n" + _line("torch_fn", 1e6, None) + "\n")
    done = _run(first, second)
    assert done.returncode == 0, done.stderr
    rows = [r for r in done.stdout.splitlines() if r.startswith("| ") and not r.startswith(("| target", "| ---"))]
    assert [r.split(" | ")[0][2:] for r in rows] == ["fast", "half", "slow", "torch_fn"]
    assert "| **2.000** |" in rows[0] and "| **0.500** |" in rows[1] and "| 0.100 | 7 |" in rows[2] and "| n/a |" in rows[3]
    assert "draw 50%, kernel 30%, buffers 20%" in rows[0]
    assert done.stdout.strip().endswith("2 of 3 targets verify at least half of their kernel alone.")


def test_a_bad_sweep_line_is_one_line_naming_the_file_line_and_field(tmp_path):
    """A line that is not JSON, lacks a field, or holds an impossible value: exit 2 and one
    line naming the file, its line number and the field; no traceback."""
    cases = {"x\n": "1: not a JSON line", _line("t", 1.0, 1.0) + "\n[1]\n": "2: not a JSON object",
             json.dumps({"target": "t"}) + "\n": "1: no field 'lanes'",
             _line("t", 1.0, 1.0, seconds=0) + "\n": "1: field 'seconds' is 0",
             _line("t", 1.0, -3.0) + "\n": "1: field 'alone' is -3.0"}
    for i, (text, said) in enumerate(cases.items()):
        path = tmp_path / f"bad{i}.jsonl"
        path.write_text(text)
        done = _run(path)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.strip() == done.stderr.strip().splitlines()[0] and f"{path}:{said}" in done.stderr
    done = _run(tmp_path / "missing.jsonl")
    assert done.returncode == 2 and "missing.jsonl: cannot read it" in done.stderr and "Traceback" not in done.stderr
