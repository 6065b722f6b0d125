"""A kernel author's session, timed: the seeded bugs that need more than 1024 requests, and the
pytest plugin against the CLI.

    python benchmarks/user_session.py [--reproducers] [--plugin] [--out FILE]

``--reproducers``: for every seeded bug whose extreme needs more than 1024 requests
(``beyond_1024_requests``, ``rp_past_32767``), ``eaglefuzz fuzz --kernels BUG.py`` from a scratch
folder as a user runs it (default options, default shrink budget); the whole command's wall
clock; the reproducer the report prints, pasted into a file and run with ``python`` against
the buggy file (it must fail) and, its ``source=`` removed, against the bundled production
copy (it must pass). ``--plugin``: ``pytest --kernels BUG.py -n auto`` against the same
``eaglefuzz fuzz`` for two ordinary seeded bugs and one that needs more than 1024 requests.

Everything runs with this checkout first on ``PYTHONPATH`` (copy the file into another
checkout to time that one), warm servers on in a folder of the session's own (one is up
before the first timed command; all are stopped at the end). Wall clock on a shared machine
moves with its load: the load average is printed with each table.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MANY = ("beyond_1024_requests", "rp_past_32767")
"""The extremes that need more than 1024 requests."""
PLUGIN_BUGS = ("pi_rejected_missing_plus_one", "ce_positions_shifted", "pi_grid_capped_at_1024")
HEAD = "# --- reproducer: paste into a file and run it with python"
END = "# --- end of reproducer ---"


def _mutants():
    spec = importlib.util.spec_from_file_location("eaglefuzz_seeded_mutants", ROOT / "tests" / "seeded_bugs" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def _env(warm_dir: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "EAGLEFUZZ_WARM": "1", "EAGLEFUZZ_WARM_DIR": str(warm_dir)}


def _timed(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.monotonic()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return time.monotonic() - t0, proc


def _warm_up(scratch: Path, env: dict[str, str], warm_dir: Path) -> None:
    """One command, then wait until the server it leaves takes work."""
    _timed([sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--kernel", "eagle_prepare_inputs_padded_kernel",
            "--examples", "1", "--no-progress"], scratch, env)
    end = time.monotonic() + 120
    while not list(warm_dir.glob("*.sock")) and time.monotonic() < end:
        time.sleep(0.2)


def _stop(warm_dir: Path) -> None:
    import signal

    for lock in warm_dir.glob("*.lock"):
        try:
            os.kill(int(lock.read_text().split()[0]), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            pass


def reproducer_of(stdout: str) -> str:
    """The reproducer block of the first report, as a user copies it: from its opening fence
    line to its closing one, both included, as printed."""
    lines = stdout.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(HEAD))
    end = lines.index(END, start)
    return "\n".join(lines[start : end + 1]) + "\n"


def requests_of(src: str) -> int | str:
    """How many requests the reproducer's case has (its ``Case`` evaluated, not run)."""
    captured: dict = {}
    code = src.replace("from eaglefuzz.harness.check import assert_case\n",
                       "def assert_case(case, **kwargs):\n    CAPTURED['case'] = case\n")
    try:
        exec(compile(code, "reproducer", "exec"), {"CAPTURED": captured})
    except Exception:  # noqa: BLE001 - a table cell, not a verdict
        return "?"
    a, s = captured["case"].arrays, captured["case"].scalars
    if "num_reqs" in s and "seq_lens" not in a:
        return int(s["num_reqs"])
    for name in ("query_end_loc", "seq_lens", "next_token_ids", "block_table"):
        if name in a:
            return len(a[name])
    return len(a["query_start_loc"]) - 1 if "query_start_loc" in a else "?"


def reproducers(scratch: Path, env: dict[str, str]) -> str:
    mutants = _mutants()
    bugs = scratch / "bugs"
    chosen = [m for m in mutants.MUTANTS if m.extreme in MANY]
    rows = [f"`eaglefuzz fuzz --kernels BUG.py` (defaults) from a scratch folder; {_load()} at the start.", "",
            "| seeded bug | needs | verdict (s) | exit | reproducer lines | characters | longest line | requests | fails on the bug | passes on production |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for m in chosen:
        path = mutants.write(m, bugs)
        run = scratch / m.name
        run.mkdir()
        seconds, proc = _timed([sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--kernels", str(path)], run, env)
        try:
            src = reproducer_of(proc.stdout)
        except StopIteration:
            rows.append(f"| `{m.name}` | {m.extreme} | {seconds:.1f} | {proc.returncode} | no reproducer | | | | | |")
            continue
        n = requests_of(src)
        (run / "repro.py").write_text(src)
        bug_run = subprocess.run([sys.executable, "repro.py"], cwd=run, env=env, capture_output=True, text=True, check=False)
        prod = re.sub(r", source='[^']*'\)", ")", src)
        (run / "repro_production.py").write_text(prod)
        prod_run = subprocess.run([sys.executable, "repro_production.py"], cwd=run, env=env, capture_output=True,
                                  text=True, check=False)
        fails = "yes" if bug_run.returncode != 0 and "DifferenceFound" in bug_run.stderr else f"no ({bug_run.returncode})"
        passes = "yes" if prod_run.returncode == 0 and prod != src else f"no ({prod_run.returncode})"
        lines = src.splitlines()
        row = (f"| `{m.name}` | {m.extreme} | {seconds:.1f} | {proc.returncode} | {len(lines)} | {len(src)} | "
               f"{max(map(len, lines))} | {n} | {fails} | {passes} |")
        rows.append(row)
        print(row, flush=True)
    rows.append(f"\n{_load()} at the end")
    return "\n".join(rows) + "\n"


def plugin(scratch: Path, env: dict[str, str]) -> str:
    mutants = _mutants()
    bugs = scratch / "plugin-bugs"
    rows = [f"`eaglefuzz fuzz --kernels BUG.py` and `pytest --kernels BUG.py -n auto -p no:cacheprovider` "
            f"(the plugin's own suite: fuzz items and the target's corpus replayed) from a scratch folder; "
            f"{_load()} at the start.", "",
            "| seeded bug | needs | CLI (s) | CLI exit | pytest (s) | pytest exit | fuzz items failed | corpus items failed |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name in PLUGIN_BUGS:
        m = mutants.BY_NAME[name]
        path = mutants.write(m, bugs)
        run = scratch / f"plugin-{name}"
        run.mkdir()
        cli_s, cli = _timed([sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--kernels", str(path)], run, env)
        py_s, py = _timed([sys.executable, "-m", "pytest", "--kernels", str(path), "-n", "auto", "-p", "no:cacheprovider",
                           "-q"], run, env)
        failed = [ln for ln in py.stdout.splitlines() if ln.startswith("FAILED")]
        fuzz = sum("test_fuzz[" in ln for ln in failed)
        corpus = sum("test_replay[" in ln for ln in failed)
        row = (f"| `{name}` | {m.extreme or '-'} | {cli_s:.1f} | {cli.returncode} | {py_s:.1f} | {py.returncode} | "
               f"{fuzz} | {corpus} |")
        rows.append(row)
        print(row, flush=True)
    rows.append(f"\n{_load()} at the end")
    return "\n".join(rows) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reproducers", action="store_true", help="the bugs that need more than 1024 requests")
    p.add_argument("--plugin", action="store_true", help="pytest --kernels against eaglefuzz fuzz")
    p.add_argument("--out", default=None, help="also write the Markdown here")
    args = p.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="eaglefuzz-session-"))
    warm_dir = Path(tempfile.mkdtemp(prefix="efb", dir="/tmp")) / "w"
    env = _env(warm_dir)
    text = ""
    try:
        _warm_up(scratch, env, warm_dir)
        if args.reproducers:
            text += reproducers(scratch, env) + "\n"
        if args.plugin:
            text += plugin(scratch, env) + "\n"
    finally:
        _stop(warm_dir)
        shutil.rmtree(warm_dir.parent, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
