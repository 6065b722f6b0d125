"""Device campaign throughput (not a test): examples/s and output tokens verified/s end to end,
per stage, against the kernel alone. Needs a CUDA device.

    python benchmarks/device_throughput.py [--seconds S] [--kernel NAME ...] [--source SPEC] [--output FILE] [--quick]
                                           [--lanes N] [--lanes-for NAME=N ...] [--seconds-for NAME=S ...]
                                           [--backend cuda|interpreter]
                                           [--json FILE [--resume]] [--until S] [--alone-rounds N]

A sweep of every target takes longer than one call to the device tool may: ``--until S`` starts
no target once ``S`` seconds have passed (the rest are listed as not run), and ``--resume``
skips the targets ``--json`` already holds, so that the next call goes on where this one
stopped (carry the JSON file along). ``--lanes-for NAME=N`` gives a target its own lanes (four
lanes of sample_recovered do not fit an 80 GB card), ``--seconds-for NAME=S`` its own
steady state (a target of few, large batches: dflash checks 9 in 3 seconds), and each target gives its cached GPU
memory back before the next starts. The JSON line of a target also counts the CUDA caching
allocator's cudaMalloc and cudaFree calls and retried allocations in its steady state, every
lane's (``allocator``: a batch that frees the cache waits for the device), each lane's peak GPU
memory in GiB (``peak_gib``: what its tensors held at once, and what its caching allocator held,
which no other lane can use; a lane that fails leaves its peak too, in the error), and whether the
sampling oracles' noise ran fused (``fused_noise``: unless ``EAGLEFUZZ_FUSED_NOISE=0``, which the lanes
inherit; harness/targetkit/fused.py) and the copy-and-expand oracles' slots compiled
(``fused_slots``: unless ``EAGLEFUZZ_FUSED_SLOTS=0``). The sweep of every
target on an H100:

    python benchmarks/device_throughput.py --quick --seconds 3 --lanes 4 --source vllm-release:0.33.0 \
        --lanes-for sample_recovered_tokens_kernel=2 \
        --seconds-for copy_and_expand_dflash_inputs_kernel=10 --json sweep.jsonl --resume --until 500
    python benchmarks/sweep_table.py sweep.jsonl    # the table for RESULTS.md

Per target: a warm-up run (``--warmup`` examples, where Triton compiles the specializations
the campaign meets: its time is the JIT column; Triton's on-disk cache keeps them for later runs), then a steady-state run of ``S``
seconds with another seed (seed 0), a second one, then the cases the second checked again: the
first meets its cases' specializations (a kernel with many integer arguments has hundreds:
Triton specializes each on 1 and on multiples of 16; its rate is the "first seen" column), the
second finds those compiled (so that how many cases it checks, and so the fixed costs' share
of the figures, does not hang on how much the first compiled or found in Triton's on-disk
cache), the third, exactly the cases the second checked (its batches whole:
``min_batches=1``; a run of a few examples otherwise splits them, and a batch's cases depend on
its size), is the figures (the kernel alone is
timed after a launch that compiles its cases, and a long campaign's are compiled, or in
Triton's cache; the second run may pass the first's last case and meet new specializations,
which the third finds compiled), then a profiled run of the first of those cases (the device is waited for after
every stage, so the stage shares add up; its own rate is lower), then the kernel alone: the
launches of exactly the cases the steady state checked (:func:`kernel_alone`; a batched target's
every batch its lanes checked, drawn again: a sample of 16 of them made the figure of a target
whose batches differ widely 8x that of all of them), repeated, timed with
CUDA events, in ``--alone-rounds`` rounds (3) whose median is the figure (a host-bound kernel
alone moved by up to 2x between calls). A target checked by its record
(:class:`~eaglefuzz.harness.targetkit.device.RecordDevice`) launches the steady state's own
first cases (seed 0) through the record's launch, in the buffers of its record host batches.
``--quick``: every target in a few seconds (2 s steady state, 40 warm-up examples, 1 s
profiled), without production-scale cases
(each takes tens of seconds: their figures are the section "Production scale" of RESULTS.md).
``--lanes N``: the steady state as ``eaglefuzz fuzz --lanes N`` runs it, ``N`` processes on the
one GPU with disjoint shares of the same cases (seed 0, shard ``i/N`` each, each after a
warm-up of its own; the lanes' first runs started together, then their second and third
runs, each lane's third its cases of its second again; no production-scale case), their tokens summed over the
longest lane's seconds;
the profiled run and the kernel alone stay one process (the kernel alone is vLLM's launch, one
process). ``--mps``: the lanes are clients of a CUDA MPS daemon of the sweep's own, as ``eaglefuzz
fuzz --lanes N --mps`` runs them (harness/core/mps.py); this process, which times the kernel alone,
is not (``mps`` in the JSON line).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent


def _small(device: str) -> int | None:
    """The cases' scale: the campaign's on a GPU (``None``), its small one on the CPU (a smoke run)."""
    from eaglefuzz.harness.checking.device_mode.engine import CPU_MAX_REQUESTS

    return CPU_MAX_REQUESTS if device == "cpu" else None


def _timed(launches, device: str, repeat: int, warm: bool = True) -> float:  # noqa: ANN001
    """Seconds ``repeat`` calls of ``launches()`` take, after one that warms them up (``warm``;
    a caller whose launches change their own inputs warms up on other buffers): CUDA events on a
    GPU (the device's time, waited for), the host's clock on the CPU (a smoke run)."""
    import torch

    if warm:
        launches()
    if device == "cpu":
        t0 = time.perf_counter()
        for _ in range(repeat):
            launches()
        return time.perf_counter() - t0
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        launches()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000


def kernel_alone(dt, impl, device: str, cases: int = 20, repeat: int = 5, batches: int | None = None,  # noqa: ANN001
                 workers: int | None = None, checked: list[tuple[int, int]] | None = None) -> float:
    """Output tokens per second of the implementation's launches alone, on cases drawn as the
    campaign draws them (a batched target's: ``checked``, the batches the steady-state run
    checked (``stats.batches``: index and cases asked, seed 0), every one, every case launched;
    without it a sample of up to 16 of its first ``batches``; a target checked
    on the host: the first 256 cases of the steady-state run, seed 0, exactly those it checks
    first: a sample of 20, a quarter of them with up to 4096 requests, made the rate swing by 2x)."""
    import numpy as np
    import torch

    from eaglefuzz.harness.targetkit.device import Arenas, HostArenas

    runs = []
    if dt.checked_on == "record":
        return _record_alone(dt, impl, device, cases, repeat, workers=workers)
    if dt.batch:
        return _batches_alone(dt, impl, device, batches or 2, repeat, checked)
    if dt.checked_on == "host":
        from eaglefuzz.harness.checking.device_mode.producers import host_case

        for i in range(256):
            dc, arenas = host_case(dt.name, 0, i, _small(device))
            runs.append((dc, arenas.upload(device)))
        cases = 0
    for k in range(cases):
        gen = torch.Generator(device=device)
        gen.manual_seed(10_000 + k)
        dc = dt.draw(np.random.default_rng(10_000 + k), gen, device)
        if dt.checked_on == "device":
            runs.append((dc, Arenas(dc, dt.oracle(dc), device).views))
        else:
            runs.append((dc, HostArenas(dc, dt.oracle(dc)).upload(device)))
    def launches() -> None:
        for dc, views in runs:
            dt.launch(impl, views, dc)

    tokens = repeat * sum(dc.tokens for dc, _ in runs)
    return tokens / _timed(launches, device, repeat)


def _batches_alone(dt, impl, device: str, batches: int, repeat: int,  # noqa: ANN001
                   checked: list[tuple[int, int]] | None = None) -> float:
    """:func:`kernel_alone` of a batched target: batches of the steady-state run (seed 0, drawn
    by the engine's :func:`batch_of`): ``checked`` (index, cases asked), each once, or, without
    it, up to 16 of its first ``batches`` of ``dt.batch`` cases evenly spread; every case
    launched ``repeat`` times (once where more than 16 batches are timed) after a launch that warms
    it up, each batch's launches timed with CUDA events (a kernel that updates inputs in place,
    the batch's ``inout``: each case launched once, on its inputs as drawn, after a launch that
    warms it up on buffers of its own: a repeat would feed it its own output, indices past the
    end). A torch function's device mode has
    ``alone(impl, views, dc)``: the function called as vLLM calls it on the case's views (its
    arguments made beforehand), without the checks and copies its launch adds."""
    import numpy as np

    from eaglefuzz.harness.checking.device_mode.engine import CPU_BATCH, batch_of
    from eaglefuzz.harness.targetkit.device_batch import BatchArenas

    seconds, tokens = 0.0, 0
    k = dt.batch if device != "cpu" else CPU_BATCH
    todo = (list(checked) if checked else
            [(i, k) for i in sorted(set(np.linspace(0, max(batches, 1) - 1, min(batches, 16)).astype(int).tolist()))])
    repeat = repeat if len(todo) <= 16 else 1
    for i, k in todo:
        batch = batch_of(dt, 0, i, k, device, _small(device))
        writes = dt.oracle_batch(batch)

        def calls_of(arenas: BatchArenas, batch=batch) -> list:  # noqa: ANN001
            if hasattr(dt, "alone"):  # a torch function: the call alone
                return [dt.alone(impl, arenas.views[j], batch.launch_case(j)) for j in range(len(batch))]
            return [partial(dt.launch, impl, arenas.views[j], batch.launch_case(j)) for j in range(len(batch))]

        def launches(calls: list) -> None:
            for call in calls:
                call()

        if batch.inout:  # updated in place: each case launched once on its inputs as drawn, warmed up on others
            launches(calls_of(BatchArenas(batch, writes, device)))
            n = 1
            seconds += _timed(partial(launches, calls_of(BatchArenas(batch, writes, device))), device, n, warm=False)
        else:
            n = repeat
            seconds += _timed(partial(launches, calls_of(BatchArenas(batch, writes, device))), device, n)
        tokens += n * sum(batch.tokens(j) for j in range(len(batch)))
        del writes, batch
    return tokens / seconds


def _record_alone(dt, impl, device: str, cases: int, repeat: int, seconds: float = 5.0,  # noqa: ANN001
                  workers: int | None = None) -> float | None:
    """:func:`kernel_alone` of a target checked by its record: the launches, through the
    record's launch (as vLLM launches them), of the steady-state run's own first cases (seed 0:
    the first 256, or those the producers (``workers``: the campaign's default) make in
    ``seconds``), in the buffers the run checks them in (record host batches); ``None`` for a torch function (no launch of its own: its
    record calls it). A kernel that updates inputs in place (its record's ``inout``: counts,
    indices) is launched once per case, on the inputs as drawn (a repeat would feed it its own
    output: other paths, indices past the end)."""
    import numpy as np

    from eaglefuzz.harness.checking.device_mode.engine import RECORD_BATCH
    from eaglefuzz.harness.checking.device_mode.producers import HostCases, default_workers
    from eaglefuzz.harness.targetkit.device import DeviceCase

    if not dt.batches_on_host(impl):
        return None
    record = dt.record
    repeat = 1 if record.inout else repeat

    def made() -> list:
        out, t0 = [], time.monotonic()
        producer = HostCases(dt.name, 0, 0, 1, _small(device), default_workers(device) if workers is None else workers,
                             batch=RECORD_BATCH, limit=256)
        try:
            for hb in producer:
                out.append(hb)
                if time.monotonic() - t0 > seconds:
                    break
        finally:
            producer.close()
        return out

    def runs(batches: list) -> list:
        out = []
        for hb in batches:
            for views, dc, rx in zip(hb.upload(device), hb.cases, hb.record, strict=True):
                for n, shape in rx.shapes.items():
                    views[n] = views[n].view(shape)
                views |= {o: views[i] for o, i in rx.alias.items()}
                drawn = DeviceCase(dc.inputs | rx.inputs, dc.outputs, dc.scalars, dc.host)  # in-place inputs as drawn
                out.append((dt.to_case(drawn), views, rx.tokens))
        return out

    batches = made()
    with np.errstate(all="ignore"):
        for case, views, _ in runs(batches):  # the warm-up launch, on buffers of their own
            record.launch(impl, views, case)
        timed = runs(batches)

        def launches() -> None:
            for case, views, _ in timed:
                record.launch(impl, views, case)

        tokens = repeat * sum(t for _, _, t in timed)
        return tokens / _timed(launches, device, repeat, warm=False)


ALLOCATOR = ("num_device_alloc", "num_device_free", "num_alloc_retries")
"""The CUDA caching allocator's counters a steady state's figures carry (``torch.cuda.memory_stats``):
its cudaMalloc and cudaFree calls (a cudaFree waits for the device) and the allocations it retried
after freeing its cache."""


def _allocator(device: str) -> dict[str, int]:
    """:data:`ALLOCATOR` now (zeros on the CPU)."""
    if device == "cpu":
        return dict.fromkeys(ALLOCATOR, 0)
    import torch

    stats = torch.cuda.memory_stats()
    return {k: int(stats.get(k, 0)) for k in ALLOCATOR}


def _peak(device: str) -> dict[str, float]:
    """This process's peak GPU memory so far, GiB: what its tensors held at once (``allocated``)
    and what its caching allocator held (``reserved``: no other lane can use it); zeros on the CPU."""
    if device == "cpu":
        return {"allocated": 0.0, "reserved": 0.0}
    import torch

    return {"allocated": torch.cuda.max_memory_allocated() / 2**30, "reserved": torch.cuda.max_memory_reserved() / 2**30}


def _since(before: dict[str, int], device: str) -> dict[str, int]:
    """:data:`ALLOCATOR`'s counts since ``before``."""
    now = _allocator(device)
    return {k: now[k] - before[k] for k in ALLOCATOR}


def _lane(argv: list[str]) -> int:
    """One lane of :func:`in_lanes` (this script run with ``--lane-child``): its warm-up, then,
    once the ``go`` file exists, its steady state; the figures as JSON into ``out``."""
    name, spec, k, n, seconds, warmup, go, out, backend = argv
    sys.path.insert(0, str(ROOT))
    from eaglefuzz.harness.sources.triton_backend import select_backend

    device = select_backend(backend).device
    from eaglefuzz.harness.checking.device_mode.producers import default_workers
    from eaglefuzz.harness.sources import implementations_for, parse_source

    impls = implementations_for(parse_source(spec), [name])
    opts = {"shrink": False, "scale_cases": False, "workers": default_workers(device, int(n)),
            "chunk_offset": int(k), "chunk_step": int(n), "shared_gpu": True}  # as eaglefuzz fuzz --lanes runs a lane
    try:
        return _lane_runs(name, impls, device, opts, int(warmup), float(seconds), go, out)
    finally:  # a lane that fails (out of memory) leaves its peak too
        Path(out + ".peak").write_text(json.dumps(_peak(device)))


def _lane_runs(name: str, impls, device: str, opts: dict, warmup: int, seconds: float, go: str,  # noqa: ANN001
               out: str) -> int:
    """:func:`_lane`'s runs."""
    from eaglefuzz.harness.checking.device_mode.engine import device_fuzz_target

    device_fuzz_target(name, impls, device, seed=1, examples=warmup, **opts)
    Path(out + ".warm").write_text("")
    while not Path(go + ".first").exists():
        time.sleep(0.005)
    cold = device_fuzz_target(name, impls, device, seed=0, examples=None, time_budget=seconds, **opts)
    Path(out + ".ready").write_text(json.dumps({"tokens": cold.tokens, "seconds": cold.seconds}))
    while not Path(go + ".again").exists():
        time.sleep(0.005)
    again = device_fuzz_target(name, impls, device, seed=0, examples=None, time_budget=seconds, **opts)
    Path(out + ".again").write_text("")
    while not Path(go).exists():
        time.sleep(0.005)
    before = _allocator(device)
    s = device_fuzz_target(name, impls, device, seed=0, examples=max(again.examples, 1), min_batches=1, keep_batches=True,
                           **opts)  # the cases seen
    allocator = _since(before, device)
    retries = cold.oom_retries + again.oom_retries + s.oom_retries
    Path(out).write_text(json.dumps({"tokens": s.tokens, "seconds": s.seconds, "examples": s.examples,
                                     "oom_retries": retries, "cross_checked": s.cross_checked, "findings": len(s.findings),
                                     "features": sorted(getattr(s, "features", set())), "batches": s.batches,
                                     "allocator": allocator}))
    return 0


def in_lanes(name: str, spec: str, seconds: float, lanes: int, warmup: int, backend: str = "cuda",
             extra_env: dict[str, str] | None = None) -> SimpleNamespace:
    """The steady state of ``name`` in ``lanes`` processes on this GPU at once (shards ``k/lanes``
    of seed 0, each warmed up first, started together; ``extra_env``: the lanes' own variables, an
    MPS daemon's): tokens and examples summed, seconds the longest lane's, features the union."""
    with tempfile.TemporaryDirectory() as tmp:
        go, outs = Path(tmp) / "go", [str(Path(tmp) / f"lane{k}.json") for k in range(lanes)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                   **(extra_env or {}))
        procs = [subprocess.Popen([sys.executable, __file__, "--lane-child", name, spec, str(k), str(lanes), str(seconds),
                                   str(warmup), str(go), outs[k], backend], env=env) for k in range(lanes)]
        for stage, start in ((".warm", Path(str(go) + ".first")), (".ready", Path(str(go) + ".again")),
                             (".again", go)):  # each run started together
            while not all(Path(o + stage).exists() for o in outs):
                if any(p.poll() is not None for p in procs):
                    break
                time.sleep(0.05)
            start.write_text("")
        codes = [p.wait() for p in procs]
        peaks = [json.loads(Path(o + ".peak").read_text()) if Path(o + ".peak").exists() else None for o in outs]
        if any(codes):
            raise RuntimeError(f"a lane exited with {max(codes)} (peak GiB per lane, allocated/reserved: {_peaks_text(peaks)})")
        rs = [json.loads(Path(o).read_text()) for o in outs]
        cs = [json.loads(Path(o + ".ready").read_text()) for o in outs]
    return SimpleNamespace(tokens=sum(r["tokens"] for r in rs), seconds=max(r["seconds"] for r in rs),
                           cold_rate=sum(c["tokens"] for c in cs) / max(max(c["seconds"] for c in cs), 1e-9),
                           examples=sum(r["examples"] for r in rs), cross_checked=sum(r["cross_checked"] for r in rs),
                           oom_retries=sum(r["oom_retries"] for r in rs),
                           findings=[None] * sum(r["findings"] for r in rs),
                           features=set().union(*(r["features"] for r in rs)),
                           batches=sorted(tuple(b) for r in rs for b in r["batches"]),
                           allocator={k: sum(r["allocator"][k] for r in rs) for k in ALLOCATOR}, peak=peaks)


def _peaks_text(peaks: list[dict[str, float] | None]) -> str:
    """Each lane's :func:`_peak` as ``allocated/reserved`` (``?``: the lane left none)."""
    return ", ".join("?" if q is None else f"{q['allocated']:.1f}/{q['reserved']:.1f}" for q in peaks)


def _release(device: str) -> None:
    """This process's cached GPU memory given back (what a target's runs and kernel alone left
    unreferenced), so that the next target's lanes, other processes, can use it."""
    import gc

    gc.collect()
    if device != "cpu":
        import torch

        torch.cuda.empty_cache()


def _missed(name: str, stats) -> set[str]:  # noqa: ANN001
    """The coverage features of ``name`` the run did not reach (as the campaign reports them)."""
    from eaglefuzz.harness.targets import TARGETS

    return set(getattr(TARGETS[name], "features", {}) or {}) - set(getattr(stats, "features", set()))


def _positive_seconds(value: str) -> float | None:
    """``value`` as a finite positive number of seconds, or ``None``."""
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def _per_target(p: argparse.ArgumentParser, option: str, rule: str, items: list[str], values: dict,
                parse) -> dict:  # noqa: ANN001
    """``values`` with each ``NAME=VALUE`` of ``items`` (``option``'s) in place: ``parse(VALUE)``,
    ``None`` where it breaks ``rule``; a name that is no device target, or a value that breaks the
    rule, is one line (exit 2)."""
    from eaglefuzz.harness.checking.device_mode import device_targets

    for item in items:
        name, _, value = item.partition("=")
        if name not in device_targets():
            p.error(f"{option} {item}: no device target named {name}")
        parsed = parse(value)
        if parsed is None:
            p.error(f"{option} {item}: {rule}")
        values[name] = parsed
    return values


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, help="steady-state seconds per target (20; 2 with --quick)")
    p.add_argument("--kernel", nargs="+", metavar="NAME", help="these targets only")
    p.add_argument("--warmup", type=int, default=300,
                   help="examples of the warm-up run, where Triton compiles the specializations a campaign meets "
                        "(timed apart: the JIT column)")
    p.add_argument("--output", type=Path, help="also write the Markdown here")
    p.add_argument("--source", default="bundled",
                   help="where the kernels come from (a source spec: bundled, vllm-release:0.33.0, file:PATH); "
                        "targets the bundled copy lacks (the rejection sampler's) come from vLLM's pinned release")
    p.add_argument("--quick", action="store_true",
                   help="every target in a few seconds: --seconds 2, --warmup 40, a profiled run of 1 s, no production-scale case")
    p.add_argument("--json", type=Path, help="also write the figures as JSON lines here (one per target, as each ends)")
    p.add_argument("--workers", type=int, help="producer processes of a host-checked target (the campaign's default: "
                   "min(8, cores - 2)); the warm-up run starts them (each task it submits starts one: give it "
                   "--warmup 128 * N examples or more), so that the timed runs find them warm")
    p.add_argument("--backend", choices=("cuda", "interpreter"), default="cuda",
                   help="interpreter: a smoke run on the CPU (its figures mean nothing; every path runs)")
    p.add_argument("--lanes", type=int, default=1, help="the steady state in N processes on the GPU at once, "
                   "as eaglefuzz fuzz --lanes N runs it (disjoint shares of the same cases)")
    p.add_argument("--lanes-for", action="append", default=[], metavar="NAME=N",
                   help="this target's lanes instead of --lanes (repeatable): a sweep of every target on one GPU "
                        "where four lanes of a large-table target do not fit (on 80 GB: "
                        "sample_recovered_tokens_kernel=2)")
    p.add_argument("--seconds-for", action="append", default=[], metavar="NAME=S",
                   help="this target's steady-state seconds instead of --seconds (repeatable): a target whose "
                        "batches are few and large, whose short steady state is mostly its lanes' first batches "
                        "(copy_and_expand_dflash_inputs_kernel: 9 batches in 3 s)")
    p.add_argument("--alone-rounds", type=int, default=3, metavar="N",
                   help="the kernel alone measured N times, back to back; its figure is their median (the JSON "
                        "line keeps each round: their spread is the figure's noise)")
    p.add_argument("--mps", action="store_true", help="the lanes as clients of a CUDA MPS daemon of this sweep's "
                   "own (eaglefuzz fuzz --lanes N --mps); the kernel alone is timed outside it")
    p.add_argument("--until", type=float, metavar="S", help="start no target once S seconds have passed")
    p.add_argument("--resume", action="store_true", help="skip the targets --json already holds")
    if sys.argv[1:2] == ["--lane-child"]:
        return _lane(sys.argv[2:])
    args = p.parse_args()
    if args.resume and args.json is None:
        p.error("--resume needs --json (the file of the targets already measured)")
    begun = time.monotonic()
    if args.quick:
        args.warmup = min(args.warmup, 40)
    args.seconds = args.seconds or (2.0 if args.quick else 20.0)
    opts = {"scale_cases": False} if args.quick else {}
    if args.workers is not None:
        opts["workers"] = args.workers
    sys.path.insert(0, str(ROOT))
    from eaglefuzz.harness.core.errors import UserError
    from eaglefuzz.harness.core.mps import CUDA_PROBE, private_mps
    from eaglefuzz.harness.sources.triton_backend import select_backend

    backend = select_backend(args.backend)
    stack = contextlib.ExitStack()
    try:
        mps_env = stack.enter_context(private_mps(probe=[sys.executable, "-c", CUDA_PROBE])) if args.mps else {}
    except UserError as exc:
        p.error(str(exc))
    with stack:
        return _sweep(p, args, backend, opts, begun, mps_env)


def _sweep(p, args, backend, opts: dict, begun: float, mps_env: dict[str, str]) -> int:  # noqa: ANN001
    """Every target's figures (see the module's text)."""
    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.engine import STAGES, device_fuzz_target
    from eaglefuzz.harness.sources import (
        Implementations,
        bundled,
        implementations_for,
        parse_source,
        vllm,
    )
    from eaglefuzz.harness.targetkit.fused import SLOTS, fused_noise_on, switched_on
    from eaglefuzz.harness.targets import TARGETS

    names = args.kernel or list(device_targets())
    unknown = sorted(set(names) - set(device_targets()))
    if unknown:
        p.error(f"--kernel: no device target named {', '.join(unknown)}")
    lanes_of = _per_target(p, "--lanes-for", "N must be a whole number of lanes, 1 or more", args.lanes_for,
                           dict.fromkeys(names, args.lanes), lambda v: int(v) if v.isdigit() and int(v) >= 1 else None)
    seconds_of = _per_target(p, "--seconds-for", "S must be a positive number of seconds", args.seconds_for,
                             dict.fromkeys(names, args.seconds), _positive_seconds)
    if args.resume and args.json.exists():
        done = {json.loads(line)["target"] for line in args.json.read_text().splitlines() if line.strip()}
        names = [n for n in names if n not in done]
    spec = {n: args.source if args.source != "bundled" or TARGETS[n].module == bundled.MODULE
            else f"vllm-release:{vllm.PINNED_RELEASE}" for n in names}
    loaded = {s: implementations_for(parse_source(s), [n for n in names if spec[n] == s]) for s in set(spec.values())}
    impls = Implementations({n: loaded[spec[n]][n] for n in names}, {n: loaded[spec[n]].origin[n] for n in names})
    rows = ["| target | examples/s | output tokens verified/s | the same cases first seen | kernel alone, tokens/s | "
            "ratio | JIT warm-up s | examples | cross-checked | findings |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    stage_rows = ["| target | " + " | ".join(STAGES) + " |", "| --- |" + " ---: |" * len(STAGES)]
    for at, name in enumerate(names):
        if args.until is not None and time.monotonic() - begun > args.until:
            rows.append(f"| not run (--until {args.until:g}): {', '.join(names[at:])} |")
            print(rows[-1], file=sys.stderr, flush=True)
            break
        t0 = time.monotonic()
        try:
            device_fuzz_target(name, impls, backend.device, seed=1, examples=args.warmup, shrink=False, **opts)
            jit = time.monotonic() - t0
            if lanes_of[name] > 1:
                _release(backend.device)  # the warm-up's cached memory, for the lanes
                s = in_lanes(name, spec[name], seconds_of[name], lanes_of[name], args.warmup, args.backend, mps_env)
            else:
                steady = partial(device_fuzz_target, name, impls, backend.device, seed=0, examples=None,
                                 time_budget=seconds_of[name], shrink=False, **opts)
                cold = steady()
                again = steady()  # its first cases compiled: how many it checks does not hang on the first's compiling
                before = _allocator(backend.device)
                s = steady(examples=max(again.examples, 1), time_budget=None, min_batches=1,
                           keep_batches=True)  # the cases seen, compiled
                s.allocator = _since(before, backend.device)
                s.cold_rate = cold.tokens / cold.seconds
                s.oom_retries += cold.oom_retries + again.oom_retries
                s.peak = [_peak(backend.device)]
            prof = device_fuzz_target(name, impls, backend.device, seed=0, examples=max(s.examples // lanes_of[name], 1), min_batches=1,
                                      time_budget=1.0 if args.quick else min(seconds_of[name], 10), shrink=False, profile=True,
                                      **opts)
            dt = device_targets()[name]
            rounds = [kernel_alone(dt, impls[name], backend.device,
                                   batches=-(-s.examples // dt.batch) if dt.batch else None,
                                   workers=args.workers, checked=s.batches) for _ in range(args.alone_rounds)]
            alone = None if rounds[0] is None else statistics.median(rounds)
        except Exception as exc:  # noqa: BLE001 - one target's failure is its row, the others still run
            rows.append(f"| {name} | failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''} |")
            print(rows[-1], file=sys.stderr, flush=True)
            del exc
            _release(backend.device)
            continue
        rate = s.tokens / s.seconds
        alone_cell, ratio = ("n/a (a torch function)", "n/a") if alone is None else (f"{alone / 1e6:,.0f} M", f"{rate / alone:.3f}")
        rows.append(f"| {name} | {s.examples / s.seconds:,.0f} | {rate / 1e6:,.1f} M | {s.cold_rate / 1e6:,.1f} M | "
                    f"{alone_cell} | {ratio} | {jit:.1f} | {s.examples:,} | {s.cross_checked} | {len(s.findings)} |")
        total = sum(prof.stages.values()) or 1.0
        stage_rows.append(f"| {name} | " + " | ".join(f"{100 * prof.stages[k] / total:.0f}%" for k in STAGES) + " |")
        print(rows[-1], file=sys.stderr, flush=True)
        if args.json:
            with args.json.open("a") as f:
                f.write(json.dumps({"target": name, "lanes": lanes_of[name], "examples": s.examples, "seconds": s.seconds, "tokens": s.tokens,
                                    "alone": alone, "alone_rounds": rounds, "alone_batches": len(s.batches), "allocator": s.allocator, "ratio": None if alone is None else rate / alone, "cold_rate": s.cold_rate, "jit": jit, "cross_checked": s.cross_checked,
                                    "findings": len(s.findings), "oom_retries": s.oom_retries, "peak_gib": s.peak,
                                    "features_missed": sorted(_missed(name, s)), "fused_noise": fused_noise_on(), "fused_slots": switched_on(SLOTS.switch, SLOTS.default), "mps": bool(mps_env) and lanes_of[name] > 1,
                                    "stages": {k: prof.stages[k] / total for k in STAGES}}) + "\n")
        del s, prof
        device_targets()[name].release_tables()  # the kernel alone's
        _release(backend.device)  # the next target's lanes find the GPU's memory free
    text = "\n".join(rows) + "\n\nShare of the time per stage (profiled run, the device waited for after every stage):\n\n" + "\n".join(stage_rows)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
