"""``fuzz --ray local --shards 2``: two Ray tasks on a local Ray instance (CPU, interpreter), a
seeded bug, its finding in the one corpus and named in the merged report.

Ray is an optional extra: ``tox -e ray`` installs ``eaglefuzz[ray]`` and runs this file; the
default suite (no Ray) skips it, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eaglefuzz.harness.checking.corpus import load_entry

pytest.importorskip("ray", reason="Ray is not installed: `tox -e ray` installs the extra eaglefuzz[ray] and runs this file")

ROOT = Path(__file__).resolve().parent.parent
BUG = "pi_cu_read_as_exclusive"  # tests/seeded_bugs/mutants.py
PI = "eagle_prepare_inputs_padded_kernel"


@pytest.mark.kernel
def test_ray_shards_find_a_seeded_bug_into_one_corpus(tmp_path, seeded_bugs_dir):
    bug = seeded_bugs_dir / f"{BUG}.py"
    corpus = tmp_path / "corpus"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EAGLEFUZZ_SHRINK_BUDGET": "5"}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--ray", "local", "--shards", "2",
         "--kernels", str(bug), "--kernel", PI, "--examples", "8", "--backend", "interpreter",
         "--corpus", str(corpus), "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600, check=False,
    )
    seconds = time.monotonic() - start
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert [s["shard"] for s in doc["shards"]] == ["1/2", "2/2"]
    findings = doc["targets"][PI]["findings"]
    assert findings, proc.stdout
    for f in findings:
        assert f["shard"] in ("1/2", "2/2") and f["where"]
        assert Path(f["file"]).is_file() and Path(f["file"]).is_relative_to(corpus)
        assert load_entry(f["file"]).case.kernel == PI
    saved = sorted(corpus.rglob("*.json"))
    print(f"\nray: {seconds:.1f} s, shards {[(s['shard'], s['where'], s['examples'], s['findings']) for s in doc['shards']]}, "
          f"{len(findings)} finding(s), {len(saved)} corpus file(s)")
