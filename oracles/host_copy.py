"""Host values to the device without waiting for it.

A copy from pageable host memory to a GPU waits for every operation queued on the stream
before it starts (CUDA's rule for pageable transfers): each small per-case array a batched
oracle or draw sends over would stop the host until the device is idle, so that the host's
work and the device's never overlap. While the stream has work queued, :func:`host_to`
copies through a pinned staging buffer allocated once per process and device instead, so that
the copy is queued like any other operation; on an idle stream a pageable copy does not wait,
and it costs the host less (copies always staged, or pinned one by one through PyTorch's
caching host allocator, were measured slower for the targets with the largest draws).

The buffer is two halves used in turn: arrays are laid end to end in one half, and before
the other half is reused the host waits for the copies queued from it last time (one CUDA
event per switch), so that a queued copy always reads what was written for it.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

HALF = 32 << 20
"""Bytes of each half of a device's staging buffer."""

STAGED_LIMIT = 8 << 20
"""Bytes past which a host array is copied as it is (pageable): a large copy is bound by its
transfer, not by the wait."""

_ALIGN = 256


class _Staging:
    """One device's pinned staging buffer (two halves of :data:`HALF` bytes)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.buffer = torch.empty(2 * HALF, dtype=torch.uint8, pin_memory=True)
        self.side, self.used = 0, 0
        self.done: list[torch.cuda.Event | None] = [None, None]
        self.lock = threading.Lock()
        self._stream: torch.cuda.Stream | None = None
        self.switches = 0
        """Half switches so far."""

    def stream(self) -> torch.cuda.Stream:
        """The device's current stream (``torch.cuda.current_stream`` makes a new object each
        call, some 20 us: this one is kept while the raw stream stays the same)."""
        raw_of = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # Triton's own lookup; absent: no cache
        if self._stream is None or raw_of is None or self._stream.cuda_stream != raw_of(self.device.index):
            self._stream = torch.cuda.current_stream(self.device)
        return self._stream

    def to_device(self, t: torch.Tensor) -> torch.Tensor:
        nbytes = t.numel() * t.element_size()
        with self.lock:
            if self.used + nbytes > HALF:  # the other half, once the copies queued from it are done
                event = torch.cuda.Event()
                event.record(self.stream())
                self.done[self.side] = event
                self.side ^= 1
                self.used = 0
                self.switches += 1
                if self.done[self.side] is not None:
                    self.done[self.side].synchronize()
            at = self.side * HALF + self.used
            self.used += -(-nbytes // _ALIGN) * _ALIGN
            staged = self.buffer[at : at + nbytes].view(t.dtype).view(t.shape)
            staged.copy_(t)
            return staged.to(self.device, non_blocking=True)


_STAGING: dict[torch.device, _Staging] = {}
_MADE = threading.Lock()


def _staging(device: torch.device) -> _Staging:
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if device not in _STAGING:
        with _MADE:
            _STAGING.setdefault(device, _Staging(device))
    return _STAGING[device]


def host_to(x: Any, device: torch.device | str) -> torch.Tensor:
    """``torch.as_tensor(x, device=device)`` (the same values, dtype and shape; a tensor
    already on ``device`` as it is), queued without waiting for the device where ``x`` is on
    the host, ``device`` a GPU whose current stream has work queued, and ``x`` of
    :data:`STAGED_LIMIT` bytes or fewer (through the device's pinned staging buffer)."""
    t = torch.as_tensor(x)
    device = torch.device(device)
    if t.device.type != "cpu" or device.type != "cuda" or not t.numel() or t.numel() * t.element_size() > STAGED_LIMIT:
        return t.to(device)
    staging = _staging(device)
    if staging.stream().query():  # nothing queued: a pageable copy does not wait
        return t.to(device)
    return staging.to_device(t)
