"""README's shown output, made by running the commands README shows, as a newcomer runs them.

    python tests/readme_output.py            # say which blocks of README.md differ from a run now
    python tests/readme_output.py --write    # rewrite them

Each block of README.md between ``<!-- output: NAME -->`` and ``<!-- end output -->`` is an
indented code block that :data:`BLOCKS` ``[NAME]`` makes: it runs the commands in a fresh
folder (printed as README's ``/tmp/qs`` and ``/tmp/qs2``, whatever folder it really is) with the
checkout's eaglefuzz, and keeps the lines README shows (``...`` where it leaves lines out). A
full run takes a few minutes on 2 cores. ``tests/test_readme.py`` checks the cheap blocks, and
the cheap parts of the others, on every run of the suite. Timings (``ex/s``) differ from run to
run and machine to machine: :func:`masked` blanks them for comparisons.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BEGIN = re.compile(r"^<!-- output: ([\w-]+) -->$")
END = "<!-- end output -->"

QS, QS2 = "/tmp/qs", "/tmp/qs2"
"""The folders README's commands work in."""
PI = "eagle_prepare_inputs_padded_kernel"
BUG = ("num_rejected_tokens = num_draft_tokens + 1 - valid_count", "num_rejected_tokens = num_draft_tokens - valid_count")
"""The quick start's edit of the bundled copy (README's sed command)."""
FORK = ("    index_to_sample = q_last_tok_idx - num_rejected_tokens\n",
        "    q_first_tok_idx = tl.load(query_start_loc_gpu_ptr + req_idx)\n"
        "    q_last_tok_idx = tl.where(q_last_tok_idx < q_first_tok_idx, q_first_tok_idx, q_last_tok_idx)\n"
        "    index_to_sample = q_last_tok_idx - num_rejected_tokens\n")
"""fork.py: the bundled copy with an empty request sampling at its own start."""
FORK_PARAM = ("    num_rejected_tokens_gpu_ptr,  # [num_reqs] (output)\n    num_reqs,  # tl.int32\n",
              "    num_rejected_tokens_gpu_ptr,  # [num_reqs] (output)\n    num_reqs,  # tl.int32\n"
              "    CLAMP_INDEX: tl.constexpr,\n")
"""fork_param.py: the bundled copy with a parameter of its own in eagle_prepare_inputs_padded_kernel."""


def eaglefuzz(*args: str, cwd: Path) -> tuple[int, str, str]:
    """``eaglefuzz ARGS`` in ``cwd`` with this checkout's eaglefuzz: exit code, stdout, stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    env.pop("EAGLEFUZZ_SHRINK_BUDGET", None)
    proc = subprocess.run([sys.executable, "-m", "eaglefuzz.harness.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=1800, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def bundled_edit(folder: Path, name: str, edit: tuple[str, str]) -> Path:
    """``folder/name``: the bundled copy with ``edit`` (old, new) made once."""
    text = (ROOT / "kernels" / "spec_decode_utils.py").read_text()
    assert text.count(edit[0]) == 1, f"README's edit no longer applies: {edit[0]!r}"
    path = folder / name
    path.write_text(text.replace(edit[0], edit[1]))
    return path


def shown(text: str, folder: Path, readme_folder: str) -> list[str]:
    """``text``'s lines as README shows them: the real folder written as README's."""
    return text.replace(str(folder), readme_folder).splitlines()


REPRODUCER = "# --- reproducer: paste into a file and run it with python; it fails while this stands ---"


def finding_block(out: list[str]) -> list[str]:
    """The first finding's block: from its ``===`` line to the end of its reproducer."""
    start = next(i for i, ln in enumerate(out) if ln.startswith("=== "))
    end = next(i for i in range(start, len(out)) if out[i] == "# --- end of reproducer ---")
    return out[start : end + 1]


def table(out: list[str]) -> list[str]:
    """The report's table (its title, rules and rows)."""
    start = next(i for i, ln in enumerate(out) if ln.strip().startswith("eaglefuzz fuzz: seed "))
    end = next(i for i in range(start, len(out)) if out[i].startswith("└"))
    return out[start : end + 1]


def quickstart(folder: Path) -> dict[str, list[str]]:
    """The quick start: fuzz the edited copy, run the reproducer on the bug and after the fix,
    replay the saved case."""
    utils = bundled_edit(folder, "utils.py", BUG)
    code, out, _ = eaglefuzz("fuzz", "--kernels", "utils.py", cwd=folder)
    lines = shown(out, folder, QS)
    found = finding_block(lines)
    after = lines[lines.index(table(lines)[-1]) + 1 :]
    blocks = {"quickstart-fuzz": ["$ eaglefuzz fuzz --kernels utils.py", *found, "", *table(lines), *after,
                                  "$ echo $?", str(code)]}
    raw = finding_block(out.splitlines())  # the folder as it is: the reproducer must run there
    (folder / "repro.py").write_text("\n".join(raw[raw.index(REPRODUCER):]) + "\n")
    proc = subprocess.run([sys.executable, "repro.py"], capture_output=True, text=True, cwd=folder, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    err = shown(proc.stderr, folder, QS)
    at = next(i for i, ln in enumerate(err) if ln.startswith("eaglefuzz.harness.checking.check.DifferenceFound: "))
    shown_diffs = [ln for ln in err[at + 2 :] if ln.startswith("  ")][:2]
    blocks["quickstart-repro"] = ["$ python repro.py", *err[:3], "...", *err[at : at + 2], *shown_diffs, "...",
                                  "$ echo $?", str(proc.returncode)]
    utils.write_text((ROOT / "kernels" / "spec_decode_utils.py").read_text())  # the fix: the edit undone
    proc = subprocess.run([sys.executable, "repro.py"], capture_output=True, text=True, cwd=folder, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    saved = found[0].rsplit(" saved to ", 1)[1].removeprefix(QS + "/")
    _, replayed, _ = eaglefuzz("replay", saved, "--kernels", "utils.py", cwd=folder)
    blocks["quickstart-fixed"] = ["$ python repro.py; echo $?", str(proc.returncode),
                                  f"$ eaglefuzz replay {saved} --kernels utils.py", *shown(replayed, folder, QS)]
    return blocks


def fork_param(folder: Path) -> dict[str, list[str]]:
    """A fork's extra parameter: the verdict, then the run with it bound (its source line)."""
    bundled_edit(folder, "fork_param.py", FORK_PARAM)
    args = ["fuzz", "--kernels", "fork_param.py", "--kernel", PI]
    _, _, err = eaglefuzz(*args, cwd=folder)
    _, out, _ = eaglefuzz(*args, "--param", "CLAMP_INDEX=False", cwd=folder)
    source = next(ln for ln in shown(out, folder, QS2) if ln.startswith("source: "))
    return {"fork-param": [f"$ eaglefuzz {' '.join(args)}", *shown(err, folder, QS2),
                           f"$ eaglefuzz {' '.join(args)} --param CLAMP_INDEX=False", "...", source, "..."]}


def fork_edges(folder: Path) -> dict[str, list[str]]:
    """A fork that parts from the reference on an edge only: a default run's edge divergence."""
    bundled_edit(folder, "fork.py", FORK)
    code, out, _ = eaglefuzz("fuzz", "--kernels", "fork.py", "--kernel", PI, cwd=folder)
    lines = shown(out, folder, QS2)
    block = finding_block(lines)
    edges = next(i for i, ln in enumerate(block) if ln.startswith("edges: "))
    summary = [ln for ln in lines if ln.startswith(f"{PI}: edge divergences only")]
    return {"fork-edges": [f"$ eaglefuzz fuzz --kernels fork.py --kernel {PI}", *block[: edges + 1], "...",
                           *summary, "$ echo $?", str(code)]}


def matrix(folder: Path) -> dict[str, list[str]]:
    """The capability matrix that ``eaglefuzz list`` ends with."""
    import io

    from eaglefuzz.harness.reporting import capabilities

    buf = io.StringIO()
    capabilities.print_matrix(capabilities.matrix(), buf)
    return {"matrix": buf.getvalue().rstrip("\n").splitlines()}


BLOCKS: dict[str, Callable[[Path], dict[str, list[str]]]] = {
    "quickstart": quickstart, "fork-param": fork_param, "fork-edges": fork_edges, "matrix": matrix,
}
"""Block makers: each runs in a fresh folder and gives the blocks it makes, by name."""

TIMING = re.compile(r"(?<=│)( *)\d+\.\d( │)")


def masked(line: str) -> str:
    """``line`` with the timings of a report's table blanked (``ex/s``: the one column with a
    decimal point)."""
    return TIMING.sub(lambda m: m.group(1) + "#.#" + m.group(2), line)


def readme_blocks(text: str | None = None) -> dict[str, list[str]]:
    """README's output blocks: name -> their lines, without the code block's indentation."""
    lines = (README.read_text() if text is None else text).splitlines()
    out: dict[str, list[str]] = {}
    for i, ln in enumerate(lines):
        m = BEGIN.match(ln)
        if m:
            end = lines.index(END, i)
            body = [x for x in lines[i + 1 : end]]
            while body and not body[0].strip():
                body.pop(0)
            while body and not body[-1].strip():
                body.pop()
            out[m.group(1)] = [x[4:] if x.startswith("    ") else x for x in body]
    return out


def make(names: list[str] | None = None) -> dict[str, list[str]]:
    """Run the makers (all, or those named) in fresh folders; every block they make."""
    blocks: dict[str, list[str]] = {}
    for name, maker in BLOCKS.items():
        if names is None or name in names:
            with tempfile.TemporaryDirectory(prefix="eaglefuzz-readme-") as d:
                blocks.update(maker(Path(d)))
    return blocks


def rewrite(text: str, blocks: dict[str, list[str]]) -> str:
    """``text`` (README's) with each named block replaced by ``blocks[name]``, indented."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        out.append(lines[i])
        if m and m.group(1) in blocks:
            end = lines.index(END, i)
            out += ["", *[("    " + b).rstrip() for b in blocks[m.group(1)]], "", END]
            i = end
        i += 1
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    write = "--write" in argv
    blocks = make()
    text = README.read_text()
    have = readme_blocks(text)
    stale = [n for n, b in blocks.items() if [masked(x) for x in have.get(n, [])] != [masked(x) for x in b]]
    missing = [n for n in blocks if n not in have]
    if write:
        README.write_text(rewrite(text, blocks))
        print(f"README.md: {len(blocks)} block(s) written; {len(stale)} had changed" +
              (f" ({', '.join(stale)})" if stale else ""))
        return 0
    for n in stale:
        print(f"README.md: block {n} differs from a run now ({'no such block' if n in missing else 'run with --write'})")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
