"""``benchmarks/ab_device.py``: two trees, or one tree in two environments, on one card (the
parts that need no GPU: its options and how it runs each tree)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "ab_device.py"
_spec = importlib.util.spec_from_file_location("eaglefuzz_ab_device", SCRIPT)
ab_device = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab_device)


def test_a_variable_that_is_not_name_equals_value_is_one_line():
    for option, item in (("--base-env", "EAGLEFUZZ_FUSED_NOISE"), ("--env", "=1"), ("--env", "NOT A NAME=1")):
        done = subprocess.run([sys.executable, str(SCRIPT), "--base", ".", "--kernel", "_gumbel_sample_kernel", option, item],
                              capture_output=True, text=True, check=False, cwd=SCRIPT.parent.parent)
        assert done.returncode == 2, done.stderr
        assert f"{option} {item}: NAME=VALUE" in done.stderr and "Traceback" not in done.stderr


def test_each_tree_runs_with_its_own_variables(monkeypatch, tmp_path):
    """A run of a tree sets the variables given for it, and its checkout first on PYTHONPATH;
    the other tree's variables are not set."""
    seen = []

    def fake_run(cmd, cwd, env, **kw):
        seen.append(env)
        out = Path(cmd[cmd.index("--json") + 1])
        out.write_text(json.dumps({"tokens": 1, "seconds": 1, "ratio": 0.5}) + "\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(ab_device.subprocess, "run", fake_run)
    monkeypatch.delenv("EAGLEFUZZ_FUSED_NOISE", raising=False)
    assert ab_device.run_tree(tmp_path, "_gumbel_sample_kernel", ["--quick"], {"EAGLEFUZZ_FUSED_NOISE": "1"})["ratio"] == 0.5
    assert ab_device.run_tree(tmp_path, "_gumbel_sample_kernel", ["--quick"])["tokens"] == 1
    assert seen[0]["EAGLEFUZZ_FUSED_NOISE"] == "1" and "EAGLEFUZZ_FUSED_NOISE" not in seen[1]
    assert all(e["PYTHONPATH"].split(":")[0] == str(tmp_path) for e in seen)
