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
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", nargs="+", metavar="NAME", help="these targets only (default: every scale target)")
    p.add_argument("--version", default="0.33.0", help="the vLLM release whose files run")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--backend", default="cuda", help="cuda (the figures), or interpreter with a small "
                   "$EAGLEFUZZ_FLAT_LIMIT (a smoke test of the script on a CPU)")
    p.add_argument("--json", type=Path, help="also write each row as a JSON line here")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from eaglefuzz.harness.checking.audit import audit_of
    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.sources import implementations_for, parse_source
    from eaglefuzz.harness.sources.triton_backend import select_backend
    from eaglefuzz.harness.targetkit.bugs import Mutant
    from tests.seeded_bugs import mutants

    device = select_backend(args.backend).device
    names = args.kernel or [n for n, dt in device_targets().items() if getattr(dt, "scale", False)]
    release = f"vllm-release:{args.version}"
    fixed_dir = Path(tempfile.mkdtemp(prefix="eaglefuzz-floor-"))
    rows = ["| target | tables (elements) | kernel ms | verifier ms | oracle ms | floor: read ms | floor: outputs ms | "
            "ceiling | now |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in names:
        spec = release
        if name in FIXED:
            path = mutants.write(Mutant(f"{name}_pr48055", name, "vLLM PR #48055: int64 row offsets",
                                        audit_of(name).fixes["PR #48055"], release), fixed_dir)
            spec = f"file:{path}"
        try:
            r = measure(name, implementations_for(parse_source(spec), [name])[name], device, args.reps)
        except Exception as exc:  # noqa: BLE001 - one target's failure is its row, the others still run
            rows.append(f"| {name} | failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''} |")
            print(rows[-1], file=sys.stderr, flush=True)
            continue
        r["source"] = "PR #48055 fix of " + release if name in FIXED else release
        rows.append(f"| {name} | {r['table_elements']:,} | {r['kernel_ms']:.3f} | {r['verifier_ms']:.0f} | "
                    f"{r['oracle_ms']:.0f} | {r['read_ms']:.3f} | {r['outputs_ms']:.3f} | {r['ceiling']:.3f} | {r['now']:.4f} |")
        print(rows[-1], file=sys.stderr, flush=True)
        if args.json:
            with args.json.open("a") as f:
                f.write(json.dumps(r) + "\n")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
