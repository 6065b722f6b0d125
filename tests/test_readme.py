"""README's shown output is what a fresh clone prints (tests/readme_output.py writes it).

The blocks between ``<!-- output: NAME -->`` and ``<!-- end output -->`` are made by running
README's commands (``python tests/readme_output.py --write``). Here they are checked against a
run now, the cheap way: the capability matrix in full; the quick start's finding, its target's
row of the table, the notes, the reproducer and the replay, from a run of that one target (the
other rows are the other targets' runs, which take minutes: ``python tests/readme_output.py``
checks them); the fork's edge divergence and the fork's parameter verdict in full. Timings are
masked.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eaglefuzz_readme_output", Path(__file__).with_name("readme_output.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


R = _load()
BLOCKS = R.readme_blocks()


def masked(lines: list[str]) -> list[str]:
    return [R.masked(ln) for ln in lines]


def cells(row: str) -> list[str]:
    return [c.strip() for c in R.masked(row).strip("│┃").split("│" if "│" in row else "┃")]


def test_every_block_of_readme_has_a_maker():
    made = {"quickstart-fuzz", "quickstart-repro", "quickstart-fixed", "fork-param", "fork-edges", "matrix"}
    assert set(BLOCKS) == made, sorted(set(BLOCKS) ^ made)
    assert all(BLOCKS[n] for n in made), [n for n in made if not BLOCKS[n]]


def test_the_capability_matrix_is_what_list_prints():
    assert BLOCKS["matrix"] == R.matrix(Path("."))["matrix"]


@pytest.mark.kernel
def test_the_quick_start_is_what_a_fresh_clone_prints(tmp_path):
    """The quick start's commands on the quick start's bug, the one target that has it: its
    finding (report, saved file, reproducer), its row of the table, the notes, the exit code;
    the reproducer fails on the bug and passes after the fix, and so does the replay."""
    from eaglefuzz.harness.sources import implementations_for
    from eaglefuzz.harness.sources.file import FileSource
    from eaglefuzz.harness.targets import TARGETS

    readme = BLOCKS["quickstart-fuzz"]
    utils = R.bundled_edit(tmp_path, "utils.py", R.BUG)
    code, out, _ = R.eaglefuzz("fuzz", "--kernels", "utils.py", "--kernel", R.PI, cwd=tmp_path)
    lines = R.shown(out, tmp_path, R.QS)
    assert readme[0] == "$ eaglefuzz fuzz --kernels utils.py" and readme[-2:] == ["$ echo $?", str(code)]
    assert R.finding_block(readme) == R.finding_block(lines)
    mine, theirs = R.table(lines), R.table(readme)
    assert mine[0].strip() == theirs[0].strip()  # the title
    assert cells(mine[2]) == cells(theirs[2])  # the columns
    row = next(r for r in theirs if r.startswith(f"│ {R.PI} "))
    assert cells(row) == cells(next(r for r in mine if r.startswith(f"│ {R.PI} ")))
    notes = [f"note: {n}".replace(str(tmp_path), R.QS) for n in implementations_for(FileSource(utils)).notes]
    assert [ln for ln in readme if ln.startswith("note: ")] == notes
    assert f"source: file {R.QS}/utils.py, model runner {TARGETS[R.PI].runner}" in readme

    repro_block = BLOCKS["quickstart-repro"]
    found, raw = R.finding_block(lines), R.finding_block(out.splitlines())
    (tmp_path / "repro.py").write_text("\n".join(raw[raw.index(R.REPRODUCER):]) + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "repro.py"], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=600, check=False)
    err = R.shown(proc.stderr, tmp_path, R.QS)
    assert proc.returncode == 1 and repro_block[-2:] == ["$ echo $?", "1"]
    missing = [ln for ln in repro_block[1:-2] if ln != "..." and ln not in err]
    assert not missing, (missing, err)

    utils.write_text((ROOT / "kernels" / "spec_decode_utils.py").read_text())  # the fix
    fixed = BLOCKS["quickstart-fixed"]
    proc = subprocess.run([sys.executable, "repro.py"], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=600, check=False)
    assert fixed[:2] == ["$ python repro.py; echo $?", str(proc.returncode)] and proc.returncode == 0, proc.stderr
    saved = found[0].rsplit(" saved to ", 1)[1].removeprefix(R.QS + "/")
    _, replayed, _ = R.eaglefuzz("replay", saved, "--kernels", "utils.py", cwd=tmp_path)
    assert fixed[2:] == [f"$ eaglefuzz replay {saved} --kernels utils.py", *R.shown(replayed, tmp_path, R.QS)]


@pytest.mark.kernel
def test_the_forks_edge_divergence_is_what_a_run_prints(tmp_path):
    assert masked(BLOCKS["fork-edges"]) == masked(R.fork_edges(tmp_path)["fork-edges"])


def test_the_fork_parameters_verdict_is_what_a_run_prints(tmp_path):
    """The verdict in full; the source line of the run with the parameter bound (one example:
    the line does not depend on the run's length)."""
    block = BLOCKS["fork-param"]
    R.bundled_edit(tmp_path, "fork_param.py", R.FORK_PARAM)
    args = ["fuzz", "--kernels", "fork_param.py", "--kernel", R.PI]
    code, _, err = R.eaglefuzz(*args, cwd=tmp_path)
    assert code == 2 and block[:2] == [f"$ eaglefuzz {' '.join(args)}", *R.shown(err, tmp_path, R.QS2)]
    _, out, _ = R.eaglefuzz(*args, "--param", "CLAMP_INDEX=False", "--examples", "1", "--domain", "production",
                            cwd=tmp_path)
    source = next(ln for ln in R.shown(out, tmp_path, R.QS2) if ln.startswith("source: "))
    assert source in block


def test_the_help_of_vllm_torch_names_every_method_it_adapts(capsys):
    """`fuzz --help` named one of the two torch methods --vllm-torch fuzzes."""
    from eaglefuzz.harness import cli
    from eaglefuzz.harness.sources.vllm_torch import METHODS

    with pytest.raises(SystemExit):
        cli.main(["fuzz", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--vllm-torch X.Y.Z")
    option = text[start : text.index(" --", start + 5)]
    for target, method in METHODS.items():
        assert f"EagleProposer.{method}" in option and target in option, option
