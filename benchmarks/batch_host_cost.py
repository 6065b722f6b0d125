"""The host's work per case of a device batch (not a test; no GPU needed), its arithmetic made
small: a batch of the target's own size (``batch``) drawn with ``max_requests = 1`` (steps of
1 to 4 rows; a target's other sizes as drawn), with torch on the CPU, one thread: the draw,
the batched oracle, the guarded buffers and every case's views, the features, per case.

By default the time, best of three batches. A torch call on tensors this small costs about
what launching it costs on a GPU, so the figures approximate the launching process's side of
a batch on a GPU; where a target's arrays stay large (a vocabulary, token tables) the CPU's
arithmetic dominates them. ``--ops``: the torch (aten) calls instead, the most of three
batches, counted with a ``TorchDispatchMode``: on a GPU each costs the launching process about
the same few microseconds whatever its size, so the count per case is what a device run's
host pays besides the kernel's own launch.

    PYTHONPATH=. python benchmarks/batch_host_cost.py [--ops] [NAME ...]    # default: every batched target
"""

from __future__ import annotations

import sys
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from eaglefuzz.harness.checking.device_mode import device_targets
from eaglefuzz.harness.targetkit.device_batch import BatchArenas

STAGES = ("draw", "oracle", "buffers", "features")


class Count(TorchDispatchMode):
    """The aten calls made while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.n += 1
        return func(*args, **(kwargs or {}))


class Clock:
    """The seconds spent while it is active (``n``, as :class:`Count` has it)."""

    def __enter__(self) -> Clock:
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.n = time.perf_counter() - self.t0


def main() -> int:
    torch.set_num_threads(1)
    ops = "--ops" in sys.argv[1:]
    measure, best, unit = (Count, max, "ops") if ops else (Clock, min, "us")
    names = [a for a in sys.argv[1:] if a != "--ops"] or sorted(n for n, t in device_targets().items() if t.batch)
    print(f"| target | cases a batch | draw {unit} | oracle {unit} | buffers and views {unit} | features {unit} | in all {unit} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        dt = device_targets()[name]
        k = dt.batch
        dt.draw_batch((1, 1), "cpu", k, 1)
        got: dict[str, list[float]] = {s: [] for s in STAGES}
        for rep in range(3):
            with measure() as m:
                b = dt.draw_batch((1, 2 + rep), "cpu", k, 1)
            got["draw"].append(m.n)
            with measure() as m:
                w = dt.oracle_batch(b)
            got["oracle"].append(m.n)
            with measure() as m:
                views = BatchArenas(b, w, "cpu").views
            got["buffers"].append(m.n)
            with measure() as m:
                dt.batch_features(b, w)
            got["features"].append(m.n)
            del views
        per = {s: best(got[s]) / k * (1 if ops else 1e6) for s in STAGES}
        print(f"| {name} | {k} | " + " | ".join(f"{per[s]:.1f}" for s in STAGES) + f" | {sum(per.values()):.1f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
