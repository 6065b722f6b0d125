"""Device campaign throughput (not a test): examples/s and output tokens verified/s end to end,
per stage, against the kernel alone. Needs a CUDA device.

    python benchmarks/device_throughput.py [--seconds S] [--kernel NAME ...] [--source SPEC] [--output FILE]

Per target: a warm-up run (``--warmup`` examples, where Triton compiles the specializations
the campaign meets: its time is the JIT column; Triton's on-disk cache keeps them for later runs), then a steady-state run of ``S``
seconds with another seed (the figures), then a profiled run (the device is waited for after
every stage, so the stage shares add up; its own rate is lower), then the kernel alone: the
launches of 20 drawn cases, repeated, timed with CUDA events.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def kernel_alone(dt, impl, device: str, cases: int = 20, repeat: int = 5) -> float:  # noqa: ANN001
    """Output tokens per second of the implementation's launches alone, on cases drawn as the
    campaign draws them (a batched target's: two batches, every case launched)."""
    import numpy as np
    import torch

    from eaglefuzz.harness.targetkit.device import Arenas, DeviceCase, HostArenas
    from eaglefuzz.harness.targetkit.device_batch import BatchArenas

    runs = []
    if dt.batch:
        for b in range(2):
            batch = dt.draw_batch((10_000, 10_000 + b), device, dt.batch)
            arenas = BatchArenas(batch, dt.oracle_batch(batch), device)
            runs += [(DeviceCase({}, {n: (t, sizes[j]) for n, (t, sizes) in batch.outputs.items()}, batch.scalars[j]), arenas.views[j])
                     for j in range(len(batch))]
        cases = 0
    for k in range(cases):
        gen = torch.Generator(device=device)
        gen.manual_seed(10_000 + k)
        dc = dt.draw(np.random.default_rng(10_000 + k), gen, device)
        if dt.checked_on == "device":
            runs.append((dc, Arenas(dc, dt.oracle(dc), device).views))
        else:
            runs.append((dc, HostArenas(dc, dt.oracle(dc)).upload(device)))
    for dc, views in runs:
        dt.launch(impl, views, dc)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        for dc, views in runs:
            dt.launch(impl, views, dc)
    end.record()
    torch.cuda.synchronize()
    tokens = repeat * sum(dc.tokens for dc, _ in runs)
    return tokens / (start.elapsed_time(end) / 1000)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=20.0, help="steady-state seconds per target")
    p.add_argument("--kernel", nargs="+", metavar="NAME", help="these targets only")
    p.add_argument("--warmup", type=int, default=300,
                   help="examples of the warm-up run, where Triton compiles the specializations a campaign meets "
                        "(timed apart: the JIT column)")
    p.add_argument("--output", type=Path, help="also write the Markdown here")
    p.add_argument("--source", default="bundled",
                   help="where the kernels come from (a source spec: bundled, vllm-release:0.33.0, file:PATH); "
                        "targets the bundled copy lacks (the rejection sampler's) come from vLLM's pinned release")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from eaglefuzz.harness.sources.triton_backend import select_backend

    backend = select_backend("cuda")
    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.engine import STAGES, device_fuzz_target
    from eaglefuzz.harness.sources import (
        Implementations,
        bundled,
        implementations_for,
        parse_source,
        vllm,
    )
    from eaglefuzz.harness.targets import TARGETS

    names = args.kernel or list(device_targets())
    spec = {n: args.source if args.source != "bundled" or TARGETS[n].module == bundled.MODULE
            else f"vllm-release:{vllm.PINNED_RELEASE}" for n in names}
    loaded = {s: implementations_for(parse_source(s), [n for n in names if spec[n] == s]) for s in set(spec.values())}
    impls = Implementations({n: loaded[spec[n]][n] for n in names}, {n: loaded[spec[n]].origin[n] for n in names})
    rows = ["| target | examples/s | output tokens verified/s | kernel alone, tokens/s | ratio | JIT warm-up s | "
            "examples | cross-checked | findings |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    stage_rows = ["| target | " + " | ".join(STAGES) + " |", "| --- |" + " ---: |" * len(STAGES)]
    for name in names:
        t0 = time.monotonic()
        device_fuzz_target(name, impls, backend.device, seed=1, examples=args.warmup, shrink=False)
        jit = time.monotonic() - t0
        s = device_fuzz_target(name, impls, backend.device, seed=0, examples=None, time_budget=args.seconds, shrink=False)
        prof = device_fuzz_target(name, impls, backend.device, seed=2, examples=None,
                                  time_budget=min(args.seconds, 10), shrink=False, profile=True)
        alone = kernel_alone(device_targets()[name], impls[name], backend.device)
        rate = s.tokens / s.seconds
        rows.append(f"| {name} | {s.examples / s.seconds:,.0f} | {rate / 1e6:,.1f} M | {alone / 1e6:,.0f} M | "
                    f"{rate / alone:.3f} | {jit:.1f} | {s.examples:,} | {s.cross_checked} | {len(s.findings)} |")
        total = sum(prof.stages.values()) or 1.0
        stage_rows.append(f"| {name} | " + " | ".join(f"{100 * prof.stages[k] / total:.0f}%" for k in STAGES) + " |")
        print(rows[-1], file=sys.stderr, flush=True)
    text = "\n".join(rows) + "\n\nShare of the time per stage (profiled run, the device waited for after every stage):\n\n" + "\n".join(stage_rows)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
