"""A device batch's cases drawn again, in a fresh process, after its launches left the device
unusable.

A batch's inputs are not copied to the host before its launches: at a few hundred megabytes a
batch (token tables, logits) the copy cost more than the check (on an H200 three quarters of
``target_dependent_ar_prepare_prefill_inputs_kernel``'s). The draw is a function of the run's
seed and the batch's index (:func:`~.engine.batch_of`: the same batch whoever asks), so when a
sticky CUDA error ends the process's use of the device, a fresh process draws the batch again
on the same device and hands back, as host cases, those launched before the fault: the
suspects the supervisor runs one at a time (:func:`~...run.supervisor.locate_fault`). The
campaign's side is :func:`~.engine.redrawn`.

    python -m eaglefuzz.harness.checking.device_mode.redraw REQUEST OUT    # the fresh process
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    """The fresh process: draw, copy the suspects to the host, write them to ``argv[1]``."""
    from . import device_targets
    from .engine import _case, batch_of

    r = json.loads(argv[0])
    dt = device_targets()[r["name"]]
    batch = batch_of(dt, r["seed"], r["i"], r["k"], r["device"], r["max_requests"])
    cases = []
    for j in range(r["launched"]):
        dc = batch.case(j)
        cases.append(_case(dt, dc, {n: t.cpu() for n, t in dc.inputs.items()}))
    Path(argv[1]).write_bytes(pickle.dumps(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
