"""A device batch that meets the GPU out of memory: drawn and checked again, the same cases.

Lanes (``eaglefuzz fuzz --lanes N``) share one GPU, each holding its batches' tables, buffers
and oracle working set; their peaks come and go. A batch whose draw or check asks for more than
is free at that moment is not a finding of the kernel: its memory is given back and the same
batch (the same seeds, so the same cases) is drawn and checked again, a little later. A batch
that still does not fit after :data:`OOM_TRIES` tries ends the run with one line that says so
(a usage error: the GPU is too small for this many lanes), never a traceback or a lost batch.
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


def fitting(attempt: Callable[[], T], release: Callable[[], None], what: str, device: str,
            retried: Callable[[], None] | None = None) -> T:
    """``attempt()``; where it raises ``torch.OutOfMemoryError``, ``release()`` (the caller drops
    what it keeps: the shared tables' guarded buffers), the device's cached memory given back
    and ``attempt()`` again (``retried()`` called before each such try: the run counts them),
    up to :data:`OOM_TRIES` tries in all; after the last, a
    :class:`~...core.errors.UserError` naming ``what`` (the target and batch), the device's free
    memory now and the remedy."""
    for n in range(1, OOM_TRIES + 1):
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
            if n < OOM_TRIES:
                time.sleep(0.25 * n)
                if retried is not None:
                    retried()
    total = torch.cuda.get_device_properties(device).total_memory if device != "cpu" and torch.cuda.is_available() else 0
    raise UserError(f"{what}: the device ran out of memory {OOM_TRIES} times drawing and checking it "
                    f"({free_device_bytes(device) / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB now); "
                    "with --lanes N, run fewer lanes on this GPU, else leave the GPU to this run")
