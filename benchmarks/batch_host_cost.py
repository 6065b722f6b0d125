"""The host's work per case of a device batch (not a test; no GPU needed), its arithmetic made
small: a batch of the target's own size (``batch``) drawn with ``max_requests = 1`` (steps of
1 to 4 rows; a target's other sizes as drawn), with torch on the CPU, one thread. A torch call
on tensors this small costs about what launching it costs on a GPU, so the figures approximate
the launching process's side of a batch on a GPU (the draw, the batched oracle, the guarded
buffers and every case's views, the features), per case, best of three batches.

    PYTHONPATH=. python benchmarks/batch_host_cost.py [NAME ...]    # default: every batched target
"""

from __future__ import annotations

import sys
import time

import torch

from eaglefuzz.harness.checking.device_mode import device_targets
from eaglefuzz.harness.targetkit.device_batch import BatchArenas

torch.set_num_threads(1)
names = sys.argv[1:] or sorted(n for n, t in device_targets().items() if t.batch)
print("| target | cases a batch | draw us | oracle us | buffers and views us | features us | in all us |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for name in names:
    dt = device_targets()[name]
    k = dt.batch
    dt.draw_batch((1, 1), "cpu", k, 1)
    best: dict[str, float] = {}
    for rep in range(3):
        t = [time.perf_counter()]
        b = dt.draw_batch((1, 2 + rep), "cpu", k, 1)
        t.append(time.perf_counter())
        w = dt.oracle_batch(b)
        t.append(time.perf_counter())
        views = BatchArenas(b, w, "cpu").views
        t.append(time.perf_counter())
        dt.batch_features(b, w)
        t.append(time.perf_counter())
        del views
        for stage, x in zip(("draw", "oracle", "buffers", "features"), [t[i + 1] - t[i] for i in range(4)], strict=True):
            best[stage] = min(best.get(stage, 1e9), x)
    cells = " | ".join(f"{1e6 * best[x] / k:.1f}" for x in ("draw", "oracle", "buffers", "features"))
    print(f"| {name} | {k} | {cells} | {1e6 * sum(best.values()) / k:.1f} |", flush=True)
