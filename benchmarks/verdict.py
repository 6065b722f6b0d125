"""Time to verdict, first-example latency and shrink time (``bench.py --verdict/--latency/--shrink150``).

Every figure is wall clock on this machine, whole commands where a user runs a command:
``eaglefuzz fuzz --kernels BUG --kernel K`` from start to exit (the interpreter's start-up, the
worker process, detection, shrinking, the report). The machine's load average is printed with
each table: on a shared machine the numbers move with it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "eaglefuzz.harness.cli"]


def _load_mutants():
    spec = importlib.util.spec_from_file_location("eaglefuzz_seeded_mutants", ROOT / "tests" / "seeded_bugs" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    except OSError:  # pragma: no cover
        return "load average unknown"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["EAGLEFUZZ_PROGRESS_EVERY"] = "0"  # a stderr line per example: the first one is timed
    return env


def run_timed(args: list[str], timeout: float = 600.0) -> dict:
    """Run ``eaglefuzz ARGS``; wall seconds to exit and to the first example's progress line."""
    t0 = time.monotonic()
    proc = subprocess.Popen(CLI + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    first: list[float] = []
    err: list[str] = []

    def pump() -> None:
        for line in proc.stderr:
            if not first and ": 1 example, " in line:
                first.append(time.monotonic() - t0)
            err.append(line)

    t = threading.Thread(target=pump)
    t.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    t.join()
    return {"wall": time.monotonic() - t0, "first": first[0] if first else None, "code": proc.returncode,
            "stdout": out, "stderr": "".join(err)}


def prepare_warm(on: bool) -> str:
    """Every command after this runs with warm servers ``on`` or off (``EAGLEFUZZ_WARM``); with
    them on, one command is run first and its server waited for, so that every timed command's
    workers are forked from it. The table's words for the mode."""
    os.environ["EAGLEFUZZ_WARM"] = "1" if on else "0"
    if not on:
        return "warm servers off (`EAGLEFUZZ_WARM=0`: every worker a fresh process)"
    from eaglefuzz.harness.core.paths import user_cache
    from eaglefuzz.harness.run import warm_servers as warm

    env = _env()
    env.setdefault("NUMBA_CACHE_DIR", str(user_cache() / "numba"))  # as the command's own start sets it
    path = warm.socket_path(warm.server_key(env))
    run_timed(["fuzz", "--kernel", "eagle_prepare_inputs_padded_kernel", "--examples", "1", "--no-progress"])
    deadline = time.monotonic() + 120
    while not warm._up(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"no warm server came up at {path}")
        time.sleep(0.2)
    return "warm servers on (one was up before the first timed command: every worker forked from it)"


def _requests(case) -> int:
    a, s = case.arrays, case.scalars
    if "num_reqs" in s and "seq_lens" not in a:
        return int(s["num_reqs"])
    for name in ("query_end_loc", "seq_lens"):
        if name in a:
            return len(a[name])
    return 0


def verdict_table(only: list[str] | None, repeat: int, mode: str = "") -> str:
    """One row per seeded bug: the whole command's wall clock (median of ``repeat`` runs)."""
    from eaglefuzz.harness.checking.corpus import load_case

    mutants = _load_mutants()
    chosen = [m for m in mutants.MUTANTS if not only or m.name in only]
    bug_dir = Path(tempfile.mkdtemp(prefix="eaglefuzz-verdict-"))
    lines = [f"Time to verdict: `eaglefuzz fuzz --kernels BUG --kernel K --json`, whole command, wall clock; "
             f"median of {repeat} run(s); {mode}; {_load()} at the start.", "",
             "| seeded bug | needs | target | exit | examples | shrink attempts | verdict (s) | first example (s) | "
             "shrunk to requests | shrinking |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    print("\n".join(lines), flush=True)
    times: dict[bool, list[float]] = {True: [], False: []}
    for m in chosen:
        path = mutants.write(m, bug_dir)
        runs = []
        for k in range(repeat):
            corpus = bug_dir / f"findings-{m.name}-{k}"
            runs.append(run_timed(["fuzz", "--kernels", str(path), "--kernel", m.target, "--corpus", str(corpus), "--json"]))
        runs.sort(key=lambda r: r["wall"])
        r = runs[len(runs) // 2]
        examples, shrinks, requests, note = "?", "?", "?", ""
        try:
            doc = json.loads(r["stdout"])
            t = doc["targets"][m.target]
            examples, shrinks = t["examples"], t.get("shrink_attempts", "?")
            f = t["findings"][0]
            requests = _requests(load_case(f["file"]))
            note = "stopped at its budget" if "shrinking stopped" in f["report"] else "done"
        except (ValueError, KeyError, IndexError, TypeError):
            note = (r["stderr"].strip().splitlines() or ["no output"])[-1][:80]
        times[bool(m.extreme)].append(r["wall"])
        first = f"{r['first']:.1f}" if r["first"] is not None else "-"
        row = (f"| `{m.name}` | {m.extreme or '-'} | `{m.target}` | {r['code']} | {examples} | {shrinks} | {r['wall']:.1f} | "
               f"{first} | {requests} | {note} |")
        lines.append(row)
        print(row, flush=True)
    lines.append("")
    for extreme, label in ((True, "bugs that need a production extreme"), (False, "the other seeded bugs")):
        if times[extreme]:
            v = times[extreme]
            lines.append(f"- {label}: {len(v)} bugs, median {statistics.median(v):.1f} s, max {max(v):.1f} s")
    lines.append(f"- {_load()} at the end")
    print("\n".join(lines[-3:]), flush=True)
    return "\n".join(lines) + "\n"


def latency_table(repeat: int, mode: str = "") -> str:
    """Per target: seconds from the command to its first example, and to its exit (1 example)."""
    from eaglefuzz.harness.sources.bundled import BundledSource
    from eaglefuzz.harness.sources.vllm import PINNED_RELEASE
    from eaglefuzz.harness.targets import TARGETS

    bundled = set(BundledSource().load(None).funcs)
    lines = [f"First-example latency: `eaglefuzz fuzz --kernel K --examples 1` (targets newer than the bundled "
             f"copy: `--vllm-version {PINNED_RELEASE}`, its files cached), median of {repeat} run(s); {mode}; {_load()}.", "",
             "| target | first example (s) | whole command (s) | exit |", "|---|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    for name in TARGETS:
        source = [] if name in bundled else ["--vllm-version", PINNED_RELEASE]
        runs = sorted((run_timed(["fuzz", "--kernel", name, *source, "--examples", "1", "--no-progress"])
                       for _ in range(repeat)), key=lambda r: r["wall"])
        r = runs[len(runs) // 2]
        first = f"{r['first']:.2f}" if r["first"] else "-"
        row = f"| `{name}` | {first} | {r['wall']:.2f} | {r['code']} |"
        lines.append(row)
        print(row, flush=True)
    return "\n".join(lines) + "\n"


def shrink150_table() -> str:
    """In one process: findings on 150-request batches, shrunk by ``shrink_finding`` (timed)."""
    import numpy as np

    from eaglefuzz.harness.sources.triton_backend import select_backend

    backend = select_backend("auto")
    from eaglefuzz.harness.checking.check import check_case
    from eaglefuzz.harness.checking.fuzz import shrink_finding
    from eaglefuzz.harness.sources import implementations_for
    from eaglefuzz.harness.sources.file import FileSource
    from eaglefuzz.harness.targets.copy_and_expand_eagle_inputs_kernel import layout as ce
    from eaglefuzz.harness.targets.eagle_prepare_inputs_padded_kernel import layout as pi
    from eaglefuzz.harness.targets.eagle_prepare_next_token_padded_kernel import layout as nt

    mutants = _load_mutants()
    bug_dir = Path(tempfile.mkdtemp(prefix="eaglefuzz-shrink150-"))
    rng = np.random.default_rng(150)
    R = 150

    def ce_batch(culprit: int | None, shift: bool) -> object:
        lengths = rng.integers(1, 40, size=R).tolist()
        lengths = [max(n, 2) for n in lengths]
        rejected = [0] * R if culprit is not None else [int(rng.integers(0, n)) for n in lengths]
        if culprit is not None:
            rejected[culprit] = 1
        T = sum(lengths)
        return ce.build(lengths, rejected, shift=shift, P=3, token_ids=rng.integers(0, 1 << 31, size=T),
                         positions=np.concatenate([np.arange(n) + int(rng.integers(0, 1 << 20)) for n in lengths]),
                         next_ids=rng.integers(0, 1 << 31, size=R), padding_id=0, parallel_id=7,
                         launch={"block_size_tokens": None, "num_blocks": None})

    def pi_batch() -> object:
        d = rng.integers(0, 9, size=R).tolist()
        valid = [int(rng.integers(0, 2)) if x == 0 else int(rng.integers(1, x + 2)) for x in d]
        return pi.build(d, valid, rng.integers(0, 32, size=R).tolist(), None)

    def nt_batch() -> object:
        S = 6
        rows = np.full((R, S), -1, dtype=np.int64)
        for r in range(R):
            k = int(rng.integers(0, S + 1))
            rows[r, :k] = rng.integers(0, 32000, size=k)
        return nt.build(rows.astype(np.int32), np.zeros(R, bool), rng.integers(0, 32000, size=R), 32000, S, None, None)

    cases = [
        ("ce_rejected_positions_not_zeroed", "one request of 150 has a rejected token", ce_batch(77, False)),
        ("ce_rejected_positions_not_zeroed", "random rejected tokens", ce_batch(None, True)),
        ("ce_output_start_shift_uses_p", "random (needs 2 requests)", ce_batch(None, True)),
        ("pi_rejected_missing_plus_one", "random", pi_batch()),
        ("nt_first_valid_column", "random", nt_batch()),
    ]
    lines = [f"Shrinking findings on 150-request batches (`shrink_finding`, one process, {backend.name}); {_load()}.", "",
             "| seeded bug | batch | requests before | requests after | checks | seconds |", "|---|---|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    import eaglefuzz.harness.checking.shrinking as shrinking

    for name, what, case in cases:
        impls = implementations_for(FileSource(mutants.write(mutants.BY_NAME[name], bug_dir)))
        finding = check_case(case, impls, backend.device)
        if finding is None:
            lines.append(f"| `{name}` | {what} | {R} | (no finding) | - | - |")
            continue
        count = {"checks": 0}
        orig = shrinking.Shrinker.fails

        def fails(self, c, deadline=None, orig=orig, count=count):  # noqa: ANN001
            before = self.checks
            r = orig(self, c, deadline)
            count["checks"] += self.checks - before
            return r

        shrinking.Shrinker.fails = fails
        t0 = time.monotonic()
        shrunk = shrink_finding(finding, impls, backend.device)
        dt = time.monotonic() - t0
        shrinking.Shrinker.fails = orig
        row = f"| `{name}` | {what} | {R} | {_requests(shrunk.case)} | {count['checks']} | {dt:.1f} |"
        lines.append(row)
        print(row, flush=True)
    return "\n".join(lines) + "\n"
