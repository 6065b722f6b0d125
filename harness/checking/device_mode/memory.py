"""A device batch that meets the GPU out of memory: drawn and checked again, the same cases.

Lanes (``eaglefuzz fuzz --lanes N``) share one GPU, each holding its batches' tables, buffers
and oracle working set; their peaks come and go. A batch whose draw or check asks for more than
is free at that moment is not a finding of the kernel: its memory is given back and the same
batch (the same seeds, so the same cases) is drawn and checked again, a little later. A batch
that still does not fit after :data:`OOM_TRIES` tries (a lane: for :data:`SHARED_WAIT_S`
seconds, since lane 1's production-scale case holds tens of GB for up to a minute) ends the run
with one line that says so (a usage error: the GPU is too small for this many lanes), never a
traceback or a lost batch.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TypeVar

import torch

from ...core.errors import UserError
from ...targetkit.scale import free_device_bytes

T = TypeVar("T")

OOM_TRIES = 4
"""Tries of a batch before the run stops (the first and three more, 0.25, 0.5, 0.75 s apart)."""
SHARED_WAIT_S = 90.0
"""A lane's (``shared``) tries go on, each wait twice the last from 0.25 s up to
:data:`SHARED_STEP_S`, until they have waited this long: lane 1's scale lane holds a
production-scale case's tables (tens of GB) for up to a minute, and another lane's batch waits
for them to go rather than end the run."""
SHARED_STEP_S = 16.0

pause: Callable[[float], None] = time.sleep
"""How :func:`fitting` waits between tries (this module's own name for it: a test replaces it
here, not ``time.sleep`` for every thread of the process)."""


def waits(shared: bool) -> list[float]:
    """The seconds waited before each try after the first: :data:`OOM_TRIES` tries alone,
    :data:`SHARED_WAIT_S` seconds of tries on a GPU that lanes share."""
    if not shared:
        return [0.25 * n for n in range(1, OOM_TRIES)]
    out: list[float] = []
    while sum(out) < SHARED_WAIT_S:
        out.append(min(0.25 * 2 ** len(out), SHARED_STEP_S))
    return out


def fitting(attempt: Callable[[], T], release: Callable[[], None], what: str, device: str,
            retried: Callable[[], None] | None = None, shared: bool = False) -> T:
    """``attempt()``; where it raises ``torch.OutOfMemoryError``, ``release()`` (the caller drops
    what it keeps: the shared tables' guarded buffers), the device's cached memory given back
    and ``attempt()`` again after a wait (``retried()`` called before each such try: the run
    counts them), the tries and waits of :func:`waits` (``shared``: a lane of a GPU that
    others share); after the last, a :class:`~...core.errors.UserError` naming ``what`` (the
    target and batch), the device's free memory now and the remedy."""
    pauses = waits(shared)
    for n in range(1, len(pauses) + 2):
        failed = False
        try:
            return attempt()
        except torch.OutOfMemoryError:
            failed = True  # handled outside the except clause: its traceback holds the batch's tensors
        if failed:
            release()
            gc.collect()
            if device != "cpu" and torch.cuda.is_available():
                torch.cuda.empty_cache()
            if n <= len(pauses):
                pause(pauses[n - 1])
                if retried is not None:
                    retried()
    total = torch.cuda.get_device_properties(device).total_memory if device != "cpu" and torch.cuda.is_available() else 0
    raise UserError(f"{what}: the device ran out of memory {len(pauses) + 1} times drawing and checking it "
                    f"over {sum(pauses):.0f} s "
                    f"({free_device_bytes(device) / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB now); "
                    "with --lanes N, run fewer lanes on this GPU, else leave the GPU to this run")
