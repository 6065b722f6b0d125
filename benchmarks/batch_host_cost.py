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

``--bytes``: the memory the torch calls move instead, a proxy of a GPU's busy time where its work
is memory-bound: 16 cases drawn at the target's production sizes (``max_requests`` as a device
run draws them), and per output element the batch verifies, the bytes of every tensor each
call takes and returns (whole tensors: a gather counts its whole source), the median of three
batches: the draw, the oracle and the features, the code a GPU runs (the buffers are not
counted: on the CPU they take torch's path, not the Triton launches a GPU runs,
``targetkit/placement.py``).

    PYTHONPATH=. python benchmarks/batch_host_cost.py [--ops | --bytes] [NAME ...]    # default: every batched target
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

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


SCATTERS = ("index_put", "index_add", "index_copy", "index_fill", "scatter")
"""aten calls that write some elements of their first argument in place: only the indices and
values count (not the tensor written into)."""


class Bytes(TorchDispatchMode):
    """The bytes of the tensors the aten calls made while it is active take and return (a view
    moves none; a scatter's target is not counted: :data:`SCATTERS`)."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        if all(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns):
            return out  # a view: nothing moves
        moved = (args[1:], kwargs or {}) if func.__name__.startswith(SCATTERS) else (args, kwargs or {}, out)
        for t in tree_flatten(moved)[0]:
            if isinstance(t, torch.Tensor):
                self.n += t.numel() * t.element_size()
        return out


class Clock:
    """The seconds spent while it is active (``n``, as :class:`Count` has it)."""

    def __enter__(self) -> Clock:
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.n = time.perf_counter() - self.t0


def main() -> int:
    torch.set_num_threads(1)
    flags = {"--ops", "--bytes"}
    ops, moved = "--ops" in sys.argv[1:], "--bytes" in sys.argv[1:]
    measure, best, unit = ((Count, max, "ops") if ops else (Bytes, statistics.median, "bytes per element") if moved
                           else (Clock, min, "us"))
    names = [a for a in sys.argv[1:] if a not in flags] or sorted(n for n, t in device_targets().items() if t.batch)
    print(f"| target | cases a batch | draw {unit} | oracle {unit} | buffers and views {unit} | features {unit} | in all {unit} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        dt = device_targets()[name]
        k, size = (16, {}) if moved else (dt.batch, {"max_requests": 1})
        dt.draw_batch((1, 1), "cpu", k, **size)
        got: dict[str, list[float]] = {s: [] for s in STAGES}
        elements = []
        for rep in range(3):
            with measure() as m:
                b = dt.draw_batch((1, 2 + rep), "cpu", k, **size)
            elements.append(sum(b.tokens(j) for j in range(len(b))))
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
        if moved:  # each batch's bytes per element it verifies
            got = {s: [x / e for x, e in zip(v, elements, strict=True)] for s, v in got.items()}
        per = {s: best(got[s]) * (1 if moved else 1 / k * (1 if ops else 1e6)) for s in STAGES}
        if moved:
            per["buffers"] = float("nan")
        print(f"| {name} | {k} | " + " | ".join("-" if per[s] != per[s] else f"{per[s]:.1f}" for s in STAGES)
              + f" | {sum(v for v in per.values() if v == v):.1f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
