"""Throughput benchmark of eaglefuzz (not a test): prints Markdown tables for README.

For each target on the current backend (CUDA when present, else the Triton interpreter):
examples/s and verified output elements ("tokens")/s of a Hypothesis run and of a bulk run,
then the time each seeded bug of tests/seeded_bugs/mutants.py takes to be detected and shrunk.

    python benchmarks/bench.py [--examples N] [--seed S] [--no-bugs] [--backend B]

Time to verdict (what a user waits for): the whole command ``eaglefuzz fuzz --kernels BUG
--kernel K`` per seeded bug, wall clock from start to exit (start-up, detection, shrinking,
report), with the median and maximum for the bugs that need a production extreme and for the
others; the first-example latency of ``eaglefuzz fuzz --kernel K`` per target; the time to
shrink findings on 150-request batches:

    python benchmarks/bench.py --verdict [--only NAME ...] [--repeat N] [--out FILE]
    python benchmarks/bench.py --latency [--repeat N]
    python benchmarks/bench.py --shrink150
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=60, help="examples per target and mode")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="auto", choices=["auto", "cuda", "interpreter"])
    p.add_argument("--no-bugs", action="store_true", help="skip the seeded-bug detection timings")
    p.add_argument("--bug-examples", type=int, default=300, help="example limit per seeded bug")
    p.add_argument("--verdict", action="store_true", help="time to verdict of each seeded bug (whole CLI command)")
    p.add_argument("--latency", action="store_true", help="first-example latency of `eaglefuzz fuzz --kernel K`")
    p.add_argument("--shrink150", action="store_true", help="seconds to shrink findings on 150-request batches")
    p.add_argument("--only", nargs="*", default=None, metavar="NAME", help="--verdict: these seeded bugs only")
    p.add_argument("--repeat", type=int, default=1, help="--verdict/--latency: runs per item (the median is kept)")
    p.add_argument("--out", default=None, help="--verdict/--latency: also write the Markdown here")
    p.add_argument("--warm", choices=["on", "off"], default="off",
                   help="--verdict/--latency: with warm servers (harness/run/warm_servers.py; a server is up before the first "
                        "timed command) or without (every worker a fresh process)")
    args = p.parse_args()
    if args.verdict or args.latency or args.shrink150:
        # benchmarks/verdict.py
        from verdict import latency_table, prepare_warm, shrink150_table, verdict_table

        text = ""
        mode = prepare_warm(args.warm == "on") if args.latency or args.verdict else ""
        if args.latency:
            text += latency_table(args.repeat, mode) + "\n"
        if args.verdict:
            text += verdict_table(args.only, args.repeat, mode) + "\n"
        if args.shrink150:
            text += shrink150_table() + "\n"
        if args.out:
            Path(args.out).write_text(text)
        return 0

    from eaglefuzz.harness.sources.triton_backend import select_backend

    backend = select_backend(args.backend)
    import torch
    import triton

    from eaglefuzz.harness.checking.fuzz import bulk_fuzz_target, fuzz_target
    from eaglefuzz.harness.generation.strategies import CUDA_SCALE, INTERPRETER_SCALE
    from eaglefuzz.harness.sources import implementations_for
    from eaglefuzz.harness.sources.bundled import BundledSource
    from eaglefuzz.harness.sources.file import FileSource
    from eaglefuzz.harness.targets import TARGETS

    scale = CUDA_SCALE if backend.compiled else INTERPRETER_SCALE
    impls = implementations_for(BundledSource())
    device_name = torch.cuda.get_device_name() if backend.compiled else platform.processor() or platform.machine()
    print(f"backend: {backend.name} ({device_name}); torch {torch.__version__}, triton {triton.__version__}; "
          f"{args.examples} examples per target and mode, seed {args.seed}\n")
    # Warm-up: Numba compilation and the first Triton compilations are not throughput.
    for name in TARGETS:
        fuzz_target(name, impls, backend.device, scale, seed=10**6, examples=3)

    # Pass 1 meets every new kernel specialization for the first time (compiled: JIT cost);
    # pass 2 replays the same cases with everything compiled: the steady state of a campaign.
    print("| target | mode | examples | tokens verified | pass 1 examples/s | pass 1 tokens/s | pass 2 examples/s | pass 2 tokens/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name in TARGETS:
        for mode, fn in (("hypothesis", fuzz_target), ("bulk", bulk_fuzz_target)):
            rates = []
            for _ in range(2):
                t0 = time.perf_counter()
                s = fn(name, impls, backend.device, scale, seed=args.seed, examples=args.examples)
                dt = time.perf_counter() - t0
                rates += [f"{s.examples / dt:.1f}", f"{s.tokens / dt:,.0f}"]
            print(f"| {name} | {mode} | {s.examples} | {s.tokens} | " + " | ".join(rates) + " |")
            sys.stdout.flush()

    if args.no_bugs:
        return 0
    print("\n| seeded bug | target | mode | examples to detect | seconds to detect | seconds to shrink | reproducer requests |")
    print("|---|---|---|---:|---:|---:|---:|")
    import importlib.util
    import tempfile

    spec = importlib.util.spec_from_file_location("eaglefuzz_seeded_mutants", ROOT / "tests" / "seeded_bugs" / "mutants.py")
    mutants = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mutants
    spec.loader.exec_module(mutants)
    bug_dir = Path(tempfile.mkdtemp(prefix="eaglefuzz-bench-bugs-"))
    for mutant in mutants.MUTANTS:
        path = mutants.write(mutant, bug_dir)
        bug_impls = implementations_for(FileSource(path))
        for name in bug_impls:
            for mode, fn in (("hypothesis", fuzz_target), ("bulk", bulk_fuzz_target)):
                t0 = time.perf_counter()
                s = fn(name, bug_impls, backend.device, scale, seed=args.seed, examples=args.bug_examples, shrink=False)
                detect = time.perf_counter() - t0
                if not s.findings:
                    print(f"| {path.stem} | {name} | {mode} | not found in {s.examples} | {detect:.1f} | - | - |")
                    continue
                t1 = time.perf_counter()
                shrunk = fn(name, bug_impls, backend.device, scale, seed=args.seed, examples=args.bug_examples, shrink=True)
                shrink = time.perf_counter() - t1 - detect
                case = shrunk.findings[0].case
                reqs = case.scalars.get("num_reqs", len(case.arrays.get("query_start_loc", [0])) - 1)
                print(f"| {path.stem} | {name} | {mode} | {s.examples} | {detect:.2f} | {max(shrink, 0):.2f} | {reqs} |")
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
