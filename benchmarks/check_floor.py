"""What checking one production-scale case costs at the least, against the kernel alone on it
(issue 28 point 4; not a test). Needs a CUDA device with about 60 GiB free.

    python benchmarks/check_floor.py [--kernel NAME ...] [--version 0.33.0] [--reps 5] [--json FILE]

For each target with production-scale cases (tables past ``2**31`` elements), its first scale
case (seed 0, example 0: the case the scale lane draws first), on the device in the buffers the
scale lane checks it in. vLLM's release files; the two V1 kernels whose int32 offsets wrap there
(PR #48055, open) run as the fixed variant the issue names (the int64 promotion applied to the
release's text now), since the release faults. Times are CUDA events, the median of ``--reps``:

- **kernel**: the launch alone, again and again on the same buffers;
- **verifier**: the scale lane's whole check of the case (tables to the device, launch, guard
  bands, every input as given, every output against the torch oracle), one run after one that
  compiles the kernel, waited for;
- **oracle**: the part of it after the launch (the torch oracle, the comparison, the inputs'
  and guard bands' checks);
- the **floor**, what any check of the case must do besides the launch under the project's
  standards (every element the case holds checked: an output against its expected value, an
  input as given): one pass over each table (``torch.amax``: a single read of every element, at
  the device's bandwidth), and each output filled (its sentinel) and compared with a copy.
  Drawing the case, the oracle's arithmetic and the guard bands cost nothing in the floor.

**ceiling** = kernel / (kernel + floor): the most a verifier of that case can reach, its draws
and its oracle free; **now** = kernel / verifier.

    python benchmarks/check_floor.py --batches [N] [--k K] [--kernel NAME ...] [--reps 5] [--json FILE]

``--batches``: output tokens verified per second at production scale, the scale lane's against
the kernel alone's on the same cases (issue 28: the verifier at least half the kernel's). For each
target with production-scale batches (``scale_batches``; needs a CUDA device with 96 GiB free,
``SCALE_BATCH_BYTES``), scale examples 11, 19, ... (the engine's: ``SCALE_AT``, ``SCALE_EVERY``)
drawn in this process as the lane draws them (``scale_batch_of``, seed 0, ``--k`` cases each,
by default the lane's, ``scale_lane.scale_batch_size``; the tables of a scale epoch shared,
``SCALE_TABLE_EPOCH`` examples, so that four batches pay one table draw as a long run does):

- **kernel alone**: each batch drawn and laid out in ``BatchArenas`` untimed, its ``K``
  launches timed together (the median of ``--reps`` after a warm run; first, so that every
  specialization the batches need is compiled before the verifier runs);
- **verifier**: the lane's work on the ``N`` batches (default 4) after one warm batch (example 3),
  the wall clock: each batch drawn and checked (``check_batch``: the batched oracle, the guarded
  buffers, the launches, the comparison), the guarded tables kept for the next batch of the epoch;
  the stages' shares (draw, oracle, buffers, kernel, compare) from a second, profiled pass over
  the same batches, the device waited for at each stage's end;
- **tokens**: the output tokens the launched cases verify (``batch.tokens``); **ratio** =
  verifier's tokens/s / kernel's (the issue asks 0.5); **peak GiB**: the device memory peak
  (``torch.cuda.max_memory_allocated``). On a GPU each target runs in a process of its own, as
  the scale lane runs it: an earlier target's cached tables would leave a later one too little
  free memory to draw a batch. On the CPU, a smoke test (one process)::

    EAGLEFUZZ_FLAT_LIMIT=4096 python benchmarks/check_floor.py --batches 2 --backend interpreter
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXED = {"rejection_random_sample_kernel", "sample_recovered_tokens_kernel"}
"""The V1 kernels whose production-scale cases fault in the release (run as PR #48055's fix)."""
TABLE = 1 << 24
"""An input of this many elements or more is a table (one pass of the floor)."""


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def wall(fn: Any) -> float:
    """Milliseconds of one call of ``fn()``, the device waited for."""
    _sync()
    t0 = time.perf_counter()
    fn()
    _sync()
    return 1000 * (time.perf_counter() - t0)


def timed(fn: Any, reps: int) -> float:
    """Milliseconds of ``fn()`` on the device: one warm call, then the median of ``reps`` (CUDA
    events; on a machine without CUDA, the wall clock: a smoke test of the script)."""
    import torch

    fn()
    if not torch.cuda.is_available():
        return median(wall(fn) for _ in range(reps))
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end))
    return median(out)


def floor_ms(tables: list[Any], outs: list[Any], reps: int) -> tuple[float, float]:
    """The floor's two parts: one read of every table, and every output filled and compared."""
    import torch

    read = sum(timed(lambda t=t: torch.amax(t) if t.dtype.is_floating_point else t.max(), reps) for t in tables)
    out = 0.0
    for o in outs:
        copy = o.clone()
        out += timed(lambda o=o, c=copy: (o.fill_(0), torch.equal(o, c)), reps)
        del copy
    return read, out


def measure(name: str, impl: Any, device: str, reps: int) -> dict[str, Any]:
    """The row of ``name``: the sizes of its first scale case and the times above."""
    import numpy as np
    import torch

    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.scale_lane import _run_on_device, scale_case
    from eaglefuzz.harness.targetkit.device import Arenas
    from eaglefuzz.harness.targetkit.scale_device import ScaleRun

    dt = device_targets()[name]
    case = scale_case(name, 0, 0)
    shapes = {n: list(a.shape) for n, a in case.arrays.items() if a.size >= TABLE}
    row: dict[str, Any] = {"target": name, "tables": shapes,
                           "table_elements": int(sum(int(np.prod(s)) for s in shapes.values()))}
    with np.errstate(all="ignore"):
        if dt.checked_on == "record":
            dt.scale_check(impl, case, device, False)  # Triton compiles the kernel's specializations
            row["verifier_ms"] = wall(lambda: dt.scale_check(impl, case, device, False))
            run = ScaleRun(case, device, dt.tables, dt.record.output_specs(case), dt.in_place, dt.small)
            row["kernel_ms"] = timed(lambda: dt.record.launch(impl, run.views, case), reps)
            run.close()
            run = ScaleRun(case, device, dt.tables, dt.record.output_specs(case), dt.in_place, dt.small)
            dt.record.launch(impl, run.views, case)
            row["oracle_ms"] = wall(lambda: (run.untouched(), int(dt.expect(case, run))))
            tables = [t.view for t in run.tables.values()]
            outs = [o.view for o in run.outs.values()]
            row["read_ms"], row["outputs_ms"] = floor_ms(tables, outs, reps)
            run.close()
        else:
            _run_on_device(dt, impl, case, device)  # Triton compiles the kernel's specializations
            row["verifier_ms"] = wall(lambda: _run_on_device(dt, impl, case, device))
            dc = dt.from_case(case, device)
            arenas = Arenas(dc, dt.oracle(dc), device)
            row["kernel_ms"] = timed(lambda: dt.launch(impl, arenas.views, dc), reps)
            del arenas
            row["oracle_ms"] = wall(lambda: Arenas(dc, dt.oracle(dc), device).mismatch().item())
            arenas = Arenas(dc, dt.oracle(dc), device)
            tables = [v for n, v in arenas.views.items() if n not in dc.outputs and v.numel() >= TABLE]
            outs = [arenas.views[n] for n in dc.outputs]
            row["read_ms"], row["outputs_ms"] = floor_ms(tables, outs, reps)
            del arenas, dc
    torch.cuda.empty_cache()
    k, floor = row["kernel_ms"], row["read_ms"] + row["outputs_ms"]
    row["ceiling"] = k / (k + floor)
    row["now"] = k / row["verifier_ms"]
    return row


STAGES = ("draw", "oracle", "buffers", "kernel", "compare")
"""The verifier's stages in ``--batches``: the draw, then ``check_batch``'s."""


@dataclass
class Lane:
    """What the scale lane keeps between batches: the guarded tables of the last batch that left
    them intact (``check_batch``'s ``bigs``), and their scale epoch."""

    bigs: dict = field(default_factory=dict)
    epoch: int | None = None

    def draw(self, dt: Any, example: int, k: int, device: str) -> Any:
        """Scale example ``example``'s batch of ``k`` cases (seed 0), as the lane draws it: the
        last epoch's guarded tables let go first."""
        from eaglefuzz.harness.checking.device_mode import engine, scale_lane

        epoch = engine.scale_epoch(example)
        if epoch != self.epoch:
            self.bigs.clear()
            self.epoch = epoch
        return scale_lane.scale_batch_of(dt, 0, example, epoch, k, device)


def scale_examples(n: int) -> list[int]:
    """The engine's first ``n`` scale examples (3, 11, 19, ...)."""
    from eaglefuzz.harness.checking.device_mode.engine import SCALE_AT, SCALE_EVERY

    return [SCALE_AT + SCALE_EVERY * i for i in range(n)]


def launch_all(dt: Any, impl: Any, batch: Any, views: list[dict]) -> None:
    """``impl`` launched once per case of ``batch`` on its ``views``."""
    for j in range(len(batch)):
        dt.launch(impl, views[j], batch.launch_case(j))


def kernel_alone_s(dt: Any, impl: Any, examples: list[int], k: int, device: str, reps: int) -> float:
    """Seconds of the launches alone of ``examples``' batches: each drawn and laid out untimed,
    its launches timed together (:func:`timed`: a warm run, which compiles what the batch needs)."""
    from eaglefuzz.harness.targetkit.device_batch import BatchArenas

    lane, total = Lane(), 0.0
    for i in examples:
        batch = lane.draw(dt, i, k, device)
        arenas = BatchArenas(batch, dt.oracle_batch(batch), device)
        total += timed(functools.partial(launch_all, dt, impl, batch, arenas.views), reps) / 1000
        del batch, arenas
    return total


def verifier(dt: Any, impl: Any, examples: list[int], k: int, device: str, profile: bool = False) -> dict[str, Any]:
    """The scale lane's work on ``examples``' batches after a warm one (:func:`scale_examples`'s
    first): its seconds, each stage's (with ``profile``, the device waited for at each stage's
    end, which keeps the host from running ahead: the stages' shares, not the rate), the cases
    launched, the tokens they verify and the most table elements a batch shares. A batch with
    a difference or a failure raises: the figures are of a clean check."""
    from eaglefuzz.harness.checking.device_mode.batch_run import check_batch

    stages = dict.fromkeys(STAGES, 0.0)

    def clock(stage: str, t0: float) -> float:
        if profile:
            _sync()
        t1 = time.perf_counter()
        stages[stage] += t1 - t0
        return t1

    lane = Lane()
    check_batch(dt, impl, lane.draw(dt, scale_examples(1)[0], k, device), device, lane.bigs)  # Triton, torch warm
    out: dict[str, Any] = {"cases": 0, "tokens": 0, "table_elements": 0}
    _sync()
    t0 = time.perf_counter()
    for i in examples:
        t = time.perf_counter()
        batch = lane.draw(dt, i, k, device)
        clock("draw", t)
        run = check_batch(dt, impl, batch, device, lane.bigs, clock)
        if run.failed is not None or run.bad:
            raise RuntimeError(f"scale batch {i}: {run.bad} element(s) not as expected, "
                               f"{run.failed.crash if run.failed else 'no crash'}")
        out["cases"] += run.launched
        out["tokens"] += sum(batch.tokens(j) for j in range(run.launched))
        out["table_elements"] = max(out["table_elements"], sum(x.numel() for x in batch.shared.values()))
        del batch, run
    _sync()
    return out | {"verifier_s": time.perf_counter() - t0, "stages_s": stages}


def measure_batches(name: str, impl: Any, device: str, n: int, k: int | None, reps: int) -> dict[str, Any]:
    """The ``--batches`` row of ``name``: ``n`` scale batches of ``k`` cases (default: the lane's)
    checked by the verifier and launched alone, and the figures the module's docstring names."""
    import torch

    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.scale_lane import scale_batch_size
    from eaglefuzz.harness.targetkit.scale import batches_fit

    if not batches_fit(device):
        raise RuntimeError(f"{device} holds no production-scale batch (96 GiB free, or a lowered flat limit on the CPU)")
    dt = device_targets()[name]
    k = k or scale_batch_size(dt, device)
    examples = scale_examples(n + 1)[1:]
    cuda = device != "cpu"
    held = torch.cuda.memory_allocated() if cuda else 0  # an earlier target's cached tables: not this one's
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    row: dict[str, Any] = {"target": name, "batches": n, "k": k, "examples": examples,
                           "kernel_s": kernel_alone_s(dt, impl, examples, k, device, reps)}
    row |= verifier(dt, impl, examples, k, device)
    profiled = verifier(dt, impl, examples, k, device, profile=True)
    row["verifier_tokens_per_s"] = row["tokens"] / row["verifier_s"]
    row["kernel_tokens_per_s"] = row["tokens"] / row["kernel_s"]
    row["ratio"] = row["kernel_s"] / row["verifier_s"]
    row["stages_s"] = profiled["stages_s"]
    row["shares"] = {s: t / profiled["verifier_s"] for s, t in profiled["stages_s"].items()}
    row["peak_gib"] = (torch.cuda.max_memory_allocated() - held) / 2**30 if cuda else None
    if cuda:
        torch.cuda.empty_cache()
    return row


FLOOR_HEADER = ["| target | tables (elements) | kernel ms | verifier ms | oracle ms | floor: read ms | "
                "floor: outputs ms | ceiling | now |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
BATCH_HEADER = ["| target | cases (batches x k) | tokens | tables (elements) | verifier s | verifier tokens/s | "
                "kernel alone s | kernel tokens/s | ratio | draw | oracle | buffers | kernel | compare | peak GiB |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]


def floor_line(r: dict[str, Any]) -> str:
    """:func:`measure`'s row in the table."""
    return (f"| {r['target']} | {r['table_elements']:,} | {r['kernel_ms']:.3f} | {r['verifier_ms']:.0f} | "
            f"{r['oracle_ms']:.0f} | {r['read_ms']:.3f} | {r['outputs_ms']:.3f} | {r['ceiling']:.3f} | {r['now']:.4f} |")


def batch_line(r: dict[str, Any]) -> str:
    """:func:`measure_batches`'s row in the table (the stages as shares of the verifier's time)."""
    shares = " | ".join(f"{100 * r['shares'][s]:.0f}%" for s in STAGES)
    peak = "-" if r["peak_gib"] is None else f"{r['peak_gib']:.1f}"
    return (f"| {r['target']} | {r['cases']} ({r['batches']} x {r['k']}) | {r['tokens']:,} | {r['table_elements']:,} | "
            f"{r['verifier_s']:.3f} | {r['verifier_tokens_per_s']:,.0f} | {r['kernel_s']:.4f} | "
            f"{r['kernel_tokens_per_s']:,.0f} | {r['ratio']:.4f} | {shares} | {peak} |")


def _each_apart(names: list[str], header: list[str]) -> int:
    """``--batches`` on a GPU: each target in a process of its own, as the scale lane runs it (a
    lane is a process per target), so that an earlier target's cached tables, or its fault,
    leave the next one the device whole; the rows printed as one table."""
    import subprocess

    argv, rest = [], iter(sys.argv[1:])
    for a in rest:  # the same options, the targets apart
        if a == "--kernel":
            for b in rest:
                if b.startswith("--"):
                    argv.append(b)
                    break
        else:
            argv.append(a)
    rows = list(header)
    for name in names:
        got = subprocess.run([sys.executable, __file__, *argv, "--kernel", name], capture_output=True, text=True)
        sys.stderr.write(got.stderr)
        mine = [ln for ln in got.stdout.splitlines() if ln.startswith(f"| {name} |")]
        rows += mine or [f"| {name} | failed: exit {got.returncode}, {(got.stderr.strip().splitlines() or [''])[-1][:160]} |"]
    print("\n".join(rows))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", nargs="+", metavar="NAME", help="these targets only (default: every scale target)")
    p.add_argument("--version", default="0.33.0", help="the vLLM release whose files run")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--backend", default="cuda", help="cuda (the figures), or interpreter with a small "
                   "$EAGLEFUZZ_FLAT_LIMIT (a smoke test of the script on a CPU)")
    p.add_argument("--batches", type=int, nargs="?", const=4, metavar="N", help="tokens verified per second on N "
                   "production-scale batches (default 4), the verifier's against the kernel alone's")
    p.add_argument("--k", type=int, help="with --batches: cases per batch (default: the scale lane's)")
    p.add_argument("--json", type=Path, help="also write each row as a JSON line here")
    args = p.parse_args()
    if args.batches is not None and args.batches < 1:
        p.error("--batches N: N is at least 1")
    sys.path.insert(0, str(ROOT))
    from eaglefuzz.harness.checking.audit import audit_of
    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.sources import implementations_for, parse_source
    from eaglefuzz.harness.sources.triton_backend import select_backend
    from eaglefuzz.harness.targetkit.bugs import Mutant
    from tests.seeded_bugs import mutants

    device = select_backend(args.backend).device
    targets = device_targets()
    if args.batches is None:
        names = args.kernel or [n for n, dt in targets.items() if getattr(dt, "scale", False)]
        run, header, line = functools.partial(measure, device=device, reps=args.reps), FLOOR_HEADER, floor_line
    else:
        names = args.kernel or [n for n, dt in targets.items() if dt.scale_batches]
        if any(not targets[n].scale_batches for n in names if n in targets):
            p.error("--batches: " + ", ".join(n for n in names if n in targets and not targets[n].scale_batches)
                    + " draw(s) no production-scale batches")
        run = functools.partial(measure_batches, device=device, n=args.batches, k=args.k, reps=args.reps)
        header, line = BATCH_HEADER, batch_line
    if args.batches is not None and device != "cpu" and len(names) > 1:
        return _each_apart(names, header)
    release = f"vllm-release:{args.version}"
    fixed_dir = Path(tempfile.mkdtemp(prefix="eaglefuzz-floor-"))
    rows = list(header)
    for name in names:
        spec = release
        if name in FIXED:
            path = mutants.write(Mutant(f"{name}_pr48055", name, "vLLM PR #48055: int64 row offsets",
                                        audit_of(name).fixes["PR #48055"], release), fixed_dir)
            spec = f"file:{path}"
        try:
            r = run(name, implementations_for(parse_source(spec), [name])[name])
        except Exception as exc:  # noqa: BLE001 - one target's failure is its row, the others still run
            rows.append(f"| {name} | failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''} |")
            print(rows[-1], file=sys.stderr, flush=True)
            continue
        r["source"] = "PR #48055 fix of " + release if name in FIXED else release
        rows.append(line(r))
        print(rows[-1], file=sys.stderr, flush=True)
        if args.json:
            with args.json.open("a") as f:
                f.write(json.dumps(r) + "\n")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
