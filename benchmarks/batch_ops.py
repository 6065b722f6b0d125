"""Torch operations per case of a device batch (not a test; no GPU needed): the aten calls of
a batch's draw, batched oracle, guarded buffers and views, and features, counted with a
``TorchDispatchMode``, a batch of the target's own size drawn on the CPU, the most of three
batches. On a GPU each such call costs the launching process about the same few
microseconds whatever its size, so the count per case is what a device run's host side pays
besides the kernel's own launch (benchmarks/RESULTS.md).

    PYTHONPATH=. python benchmarks/batch_ops.py [NAME ...]    # default: every batched target
"""

from __future__ import annotations

import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from eaglefuzz.harness.checking.device_mode import device_targets
from eaglefuzz.harness.targetkit.device_batch import BatchArenas


class Count(TorchDispatchMode):
    """The aten calls made while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.n += 1
        return func(*args, **(kwargs or {}))


def main() -> int:
    torch.set_num_threads(1)
    names = sys.argv[1:] or sorted(n for n, t in device_targets().items() if t.batch)
    print("| target | cases a batch | draw | oracle | buffers and views | features | ops a case |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        dt = device_targets()[name]
        k = dt.batch
        dt.draw_batch((1, 1), "cpu", k, 1)
        most = [0, 0, 0, 0]
        for rep in range(3):
            counts = []
            with Count() as c:
                b = dt.draw_batch((1, 2 + rep), "cpu", k, 1)
            counts.append(c.n)
            with Count() as c:
                w = dt.oracle_batch(b)
            counts.append(c.n)
            with Count() as c:
                BatchArenas(b, w, "cpu")
            counts.append(c.n)
            with Count() as c:
                dt.batch_features(b, w)
            counts.append(c.n)
            most = [max(x, y) for x, y in zip(most, counts, strict=True)]
        print(f"| {name} | {k} | " + " | ".join(map(str, most)) + f" | {sum(most) / k:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
