"""Where a device campaign's time goes (not a test): figures and a cProfile of steady-state runs.

    python benchmarks/profile_device.py [NAME ...] [--seconds S] [--warmup N] [--source SPEC] [--json FILE]

Per target (vLLM 0.33.0's files by default; no production-scale case): a warm-up run of
``--warmup`` examples (seed 1: Triton compiles what it meets), two runs of ``S`` seconds (seed 0:
the first compiles the specializations its cases meet, the second finds them compiled), then,
on exactly the second's cases (compiled, its batches whole), the figures' run (output tokens verified per second), a profiled run (the
device waited for after every stage: each stage's share), the kernel alone
(``device_throughput.kernel_alone``: the cases or batches the steady state checked), a batched
target's kernel alone on two batches of another seed too (the definition before session 5),
then the 18 functions of most own time and the 35 of most cumulative time of a cProfile of
those cases once more (a profile of new cases would be Triton compiling). One JSON line per
target on stdout (and in ``--json``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

TARGETS = ("copy_and_expand_eagle_inputs_kernel", "rejection_random_sample_kernel", "sample_recovered_tokens_kernel")


def _two_batches_alone(dt, impl, device: str) -> float:  # noqa: ANN001
    """Output tokens per second of the launches of two batches of seeds 10000 and 10001 (full
    tables): the kernel alone of a batched target before session 5."""
    import torch

    from eaglefuzz.harness.targetkit.device_batch import BatchArenas

    runs = []
    for b in range(2):
        batch = dt.draw_batch((10_000, 10_000 + b), device, dt.batch)
        arenas = BatchArenas(batch, dt.oracle_batch(batch), device)
        runs += [(arenas.views[j], batch.launch_case(j), batch.tokens(j)) for j in range(len(batch))]
    for views, dc, _ in runs:
        dt.launch(impl, views, dc)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        for views, dc, _ in runs:
            dt.launch(impl, views, dc)
    end.record()
    torch.cuda.synchronize()
    return 5 * sum(t for *_, t in runs) / (start.elapsed_time(end) / 1000)


def _device_busy(run, kernel: str) -> dict:  # noqa: ANN001
    """The device's busy time during ``run()`` (``torch.profiler``, CUDA activity): the wall
    seconds, the seconds its kernels and copies ran, the share of them that are the target's
    own kernel, and the 8 names of most device time (a run whose busy share is low is the
    host's: Python and launches; a high one is the device's: its passes over the data)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        run()
        wall = time.perf_counter() - t0
    names: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            names[e.name] = names.get(e.name, 0.0) + e.time_range.elapsed_us() / 1e6
    busy = sum(names.values())
    own = sum(v for n, v in names.items() if kernel.strip("_") in n)
    top = sorted(names.items(), key=lambda kv: -kv[1])[:8]
    return {"wall_s": round(wall, 3), "busy_s": round(busy, 3), "busy_share": round(busy / wall, 3),
            "own_kernel_s": round(own, 4), "top": [[n[:60], round(v, 4)] for n, v in top]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", default=list(TARGETS), metavar="NAME")
    p.add_argument("--seconds", type=float, default=6.0, help="steady-state seconds per target")
    p.add_argument("--warmup", type=int, default=300, help="examples of the warm-up run")
    p.add_argument("--source", default="vllm-release:0.33.0")
    p.add_argument("--json", type=Path, help="also append the JSON lines here")
    args = p.parse_args()

    import device_throughput as bench

    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.engine import STAGES, device_fuzz_target
    from eaglefuzz.harness.sources import implementations_for, parse_source
    from eaglefuzz.harness.sources.triton_backend import select_backend

    dev = select_backend("cuda").device
    for name in args.names:
        t0 = time.monotonic()
        impls = implementations_for(parse_source(args.source), [name])
        dt = device_targets()[name]
        device_fuzz_target(name, impls, dev, seed=1, examples=args.warmup, shrink=False, scale_cases=False)
        jit = time.monotonic() - t0
        for _ in range(2):  # the second finds the first's specializations compiled (device_throughput's reason)
            st = device_fuzz_target(name, impls, dev, seed=0, examples=None, time_budget=args.seconds, shrink=False,
                                    scale_cases=False)
        again = {"seed": 0, "examples": max(st.examples, 1), "min_batches": 1, "shrink": False, "scale_cases": False}
        st = device_fuzz_target(name, impls, dev, keep_batches=True, **again)  # the same cases, compiled: the figures
        rate = st.tokens / st.seconds
        pr = device_fuzz_target(name, impls, dev, profile=True, **again)
        total = sum(pr.stages.values()) or 1.0
        alone = bench.kernel_alone(dt, impls[name], dev, batches=-(-st.examples // dt.batch) if dt.batch else None,
                                   checked=st.batches)
        row = {"target": name, "examples": st.examples, "seconds": st.seconds, "tokens": st.tokens, "rate": rate,
               "alone": alone, "ratio": None if alone is None else rate / alone, "jit": jit,
               "cross_checked": st.cross_checked, "findings": len(st.findings),
               "features_missed": sorted(bench._missed(name, st)),
               "stages": {k: round(pr.stages[k] / total, 3) for k in STAGES},
               "steady_stages_s": {k: round(v, 3) for k, v in st.stages.items()}}
        try:
            row["device_busy"] = _device_busy(partial(device_fuzz_target, name, impls, dev, **again), dt.name)
        except Exception as exc:  # noqa: BLE001 - a profiler that cannot start: the other figures stand
            row["device_busy"] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        if dt.batch:
            row["alone_two_batches"] = _two_batches_alone(dt, impls[name], dev)
            row["ratio_two_batches"] = rate / row["alone_two_batches"]
        print(json.dumps(row), flush=True)
        if args.json:
            with args.json.open("a") as f:
                f.write(json.dumps(row) + "\n")
        prof = cProfile.Profile()
        prof.enable()
        device_fuzz_target(name, impls, dev, **again)
        prof.disable()
        for order, n in (("tottime", 18), ("cumtime", 35)):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats(order).print_stats(n)
            print(s.getvalue(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
