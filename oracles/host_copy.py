"""Host values to the device without waiting for it.

A copy from pageable host memory to a GPU waits for every operation queued on the stream
before it starts (CUDA's rule for pageable transfers): each small per-case array a batched
oracle or draw sends over would stop the host until the device is idle, so that the host's
work and the device's never overlap. Through pinned memory (PyTorch's caching host
allocator, which keeps a block until its copy is done) the copy is queued like any other
operation.
"""

from __future__ import annotations

from typing import Any

import torch

PINNED_LIMIT = 16 << 20
"""Bytes past which a host array is copied as it is (pinning a large array costs more than the
wait it saves, and pinned memory is scarce)."""


def host_to(x: Any, device: torch.device | str) -> torch.Tensor:
    """``torch.as_tensor(x, device=device)`` (the same values and dtype; a tensor already on
    ``device`` as it is), queued without waiting for the device where ``x`` is on the host
    and ``device`` a GPU (an array of :data:`PINNED_LIMIT` bytes or fewer)."""
    t = torch.as_tensor(x)
    if t.device.type != "cpu" or torch.device(device).type != "cuda" or t.numel() * t.element_size() > PINNED_LIMIT:
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)
