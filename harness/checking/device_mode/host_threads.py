"""The launching process's torch threads during a device run: one.

On a GPU the host's share of a device run is many small torch operations, host copies (a
staged copy of a few MB is a CPU ``copy_``) and launches. A torch thread pool per process wakes
its threads for the larger of those and lets them spin between them; with ``--lanes N``, N
processes' pools spin on the same cores and slow every lane (an H100 with 16 cores, four lanes of
``rejection_greedy_sample_kernel``: 42.8 M output tokens verified per second with the pools,
91.1 M with one thread each; benchmarks/RESULTS.md). The producers of host-checked cases run on
one thread already (:mod:`.producers`). The CPU backend (the interpreter) keeps its threads.
"""

from __future__ import annotations

import torch


def one_thread(device: str) -> int | None:
    """On a GPU ``device``: torch's intra-op threads set to one; the count before (for
    :func:`restore`), or ``None`` where nothing changed (the CPU, or one thread already)."""
    if device == "cpu" or torch.get_num_threads() == 1:
        return None
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    return before


def restore(before: int | None) -> None:
    """Give back what :func:`one_thread` changed."""
    if before is not None:
        torch.set_num_threads(before)
