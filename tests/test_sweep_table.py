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
    assert "| **2.000** | n/a |" in rows[0] and "| **0.500** |" in rows[1] and "| 0.100 | n/a | 7 |" in rows[2]
    assert "| n/a |" in rows[3]
    assert "draw 50%, kernel 30%, buffers 20%" in rows[0]
    assert done.stdout.strip().endswith("2 of 3 targets verify at least half of their kernel alone.")


def test_a_kernel_alone_of_several_rounds_shows_its_spread_and_whether_half_lies_within_it(tmp_path):
    """Fastest round over slowest; a ratio below half at the fastest round and at or above it at the
    slowest is counted as not settled; one round has no spread."""
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([_line("straddles", 2e6, 2.2e6, alone_rounds=[1.8e6, 2.2e6, 3.0e6]),  # 0.33 .. 0.56
                               _line("clear", 4e6, 2e6, alone_rounds=[2e6, 2.5e6]),  # 0.8 .. 1.0 (verified 2e6 a second)
                               _line("single", 1e6, 4e6, alone_rounds=[4e6])]) + "\n")
    done = _run(path)
    assert done.returncode == 0, done.stderr
    rows = {r.split(" | ")[0][2:]: r for r in done.stdout.splitlines() if r.startswith("| ") and " | 4 | " in r}
    assert "| **1.000** | 1.25x |" in rows["clear"] and "| 0.455 | 1.67x |" in rows["straddles"]
    assert "| 0.125 | one round |" in rows["single"]
    assert done.stdout.strip().endswith("1 of 3 targets verify at least half of their kernel alone; "
                                        "1 on either side of half between their fastest and slowest round.")
    path.write_text(_line("t", 1.0, 1.0, alone_rounds=[1.0, 0]) + "\n")
    done = _run(path)
    assert done.returncode == 2 and f"{path}:1: field 'alone_rounds' is [1.0, 0]" in done.stderr


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
