"""The same seed draws the same cases whatever else the process has loaded (Hypothesis would
otherwise mix in the constants of every local module it finds in ``sys.modules``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DRAW = """
import json, sys
if sys.argv[1] == "with-module":
    sys.path.insert(0, sys.argv[2])
    import odd_constants  # a local module full of integers a strategy could pick up
from hypothesis import Phase, given, settings, seed
from eaglefuzz.harness.checking.corpus import case_hash
from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE
from eaglefuzz.harness.targets import TARGETS

hashes = []
for name in ("eagle_prepare_inputs_padded_kernel", "extend_all_queries_by_N"):
    @settings(max_examples=60, phases=[Phase.generate], database=None, deadline=None)
    @seed(12345)
    @given(TARGETS[name].strategy(INTERPRETER_SCALE))
    def draw(case):
        hashes.append(case_hash(case))
    draw()
print(json.dumps(hashes))
"""


def _draw(tmp_path: Path, *args: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", DRAW, *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_draws_do_not_depend_on_the_modules_loaded(tmp_path):
    mod = tmp_path / "mods"
    mod.mkdir()
    values = ", ".join(str(v) for v in (3, 7, 17, 31, 33, 63, 65, 127, 129, 255, 257, 1023, 1025, 4097, 32767, 32768, 65535, 65536, -2, -3, 2**31 - 2))
    (mod / "odd_constants.py").write_text(f"VALUES = [{values}]\nX = {{'a': 5, 'b': 9, 'c': 11}}\n")
    plain = _draw(tmp_path, "plain")
    assert len(plain) == 120
    assert _draw(tmp_path, "with-module", str(mod)) == plain
