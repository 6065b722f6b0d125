"""What settling a verification batch's windows costs, re-keying one call an attempt or at once
(not a test).

    python benchmarks/settle_cost.py NAME [NAME ...] [--batches N] [--device cpu|cuda] [--json FILE]

Per target whose device draw settles the rejection sampler's chain (``_rejection_kernel``,
``_resample_kernel``, ``_insert_resampled_kernel``): ``--batches`` batches (seed 0, batch ``i``
as the campaign draws it, at the GPU's sizes), each drawn twice, with
``verify_chain._settle``'s re-keyings one call an attempt and all at once
(``EAGLEFUZZ_SETTLE_AT_ONCE``). Per mode the torch operations the draws dispatched (a
``TorchDispatchMode`` counts them: on a GPU each is a launch or more) and their seconds; per
batch, the decisions one call an attempt makes (1: no window; 9: re-keyed to the limit, then
placeholders). The two draws of each batch must be equal, every array bit for bit: a batch
that differs is listed, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _same(x, y) -> bool:  # noqa: ANN001
    import torch

    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.dtype.is_floating_point:
        bits = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16}[x.dtype]
        return torch.equal(x.contiguous().view(bits), y.contiguous().view(bits))
    return torch.equal(x, y)


def measure(name: str, batches: int, device: str) -> dict:
    """``name``'s ``batches`` batches drawn in both modes: operations, seconds, calls, differences."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.engine import batch_of
    from eaglefuzz.harness.targetkit import verify_chain as vc

    dt = device_targets()[name]
    ops: collections.Counter = collections.Counter()

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            ops[0] += 1
            return func(*args, **(kwargs or {}))

    real_settle = vc._settle
    calls = collections.Counter()

    def counted(b, st, decide):  # noqa: ANN001, ANN202 - one call an attempt, its decisions counted
        return real_settle(b, st, lambda *a: (calls.update([0]), decide(*a))[1], at_once=False)

    per = {"at_once": {"ops": 0, "seconds": 0.0}, "one_call_an_attempt": {"ops": 0, "seconds": 0.0}}
    attempts, differ = [], []
    try:
        for at_once in (False, True):  # untimed: CUDA's start and the compiled noise's first calls
            vc._settle = functools.partial(real_settle, at_once=at_once)
            batch_of(dt, 0, 0, dt.batch, device, None)
        for i in range(batches):
            drawn = {}
            for mode, at_once in (("one_call_an_attempt", False), ("at_once", True)):
                vc._settle = functools.partial(real_settle, at_once=True) if at_once else counted
                ops.clear()
                calls.clear()
                t = time.perf_counter()
                with Count():
                    drawn[mode] = batch_of(dt, 0, i, dt.batch, device, None)
                if device != "cpu":
                    torch.cuda.synchronize()
                per[mode]["seconds"] += time.perf_counter() - t
                per[mode]["ops"] += ops[0]
                if not at_once:
                    attempts.append(calls[0])
            a, b = drawn["at_once"], drawn["one_call_an_attempt"]
            if a.cat.keys() != b.cat.keys() or any(not _same(a.cat[n], b.cat[n]) for n in a.cat):
                differ.append(i)
    finally:
        vc._settle = real_settle
    for m in per.values():
        m["seconds"] = round(m["seconds"], 3)
    return {"target": name, "batches": batches, "device": device, "decisions_per_batch": attempts,
            "re_keyed_to_the_limit": sum(c == vc.ATTEMPTS + 1 for c in attempts), **per, "differ": differ}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--batches", type=int, default=16, help="batches per target (16)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--json", type=Path, help="also append one JSON line per target here")
    args = p.parse_args()
    bad = False
    for name in args.names:
        row = measure(name, args.batches, args.device)
        bad |= bool(row["differ"])
        print(json.dumps(row), flush=True)
        if args.json:
            with args.json.open("a") as f:
                f.write(json.dumps(row) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
