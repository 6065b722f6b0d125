"""Guarded device buffers: every array a kernel sees sits in the middle of a larger one.

Output buffers are pre-filled with a sentinel that the expected output never contains, so a
missing write shows as a sentinel where a value belongs and a stray write as a value where
the sentinel belongs. Guard bands on each side (:func:`guard_for`: at least ``GUARD`` elements
and at least the buffer's own length, since realistic overruns grow with the batch), holding
the same sentinel (outputs) or a poison value (inputs), turn out-of-bounds writes into findings
and out-of-bounds reads into wrong values, instead of heap corruption or silent garbage.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported where a buffer is made: a process that only reads cases never loads torch
    import torch

GUARD = 64
"""Fewest elements of guard band on each side of a buffer."""


def guard_for(n: int) -> int:
    """Guard band, in elements, on each side of a buffer of ``n`` elements; 0 when
    ``$EAGLEFUZZ_GUARD_BANDS`` is ``0`` (``replay --sanitize``: every array is then an allocation
    of its own exact size, so that compute-sanitizer sees an access past it, which a guard band
    would absorb)."""
    if os.environ.get("EAGLEFUZZ_GUARD_BANDS", "1") == "0":
        return 0
    return max(GUARD, int(n))

BOOL_SENTINEL = 0xA5
"""Byte that pre-fills bool buffers: neither False (0) nor True (1), so a missing write shows."""

_CANDIDATES = (-0x5A5A5A5B, 0x5A5A5A5A, -0x21524111, 0x3EADBEEF, -0x0BADF00D, 0x1337C0DE)
"""Sentinel candidates for integer buffers: odd values that generated cases rarely contain."""

_POISON = {
    np.dtype(np.int32): 0x4B4B4B4B,
    np.dtype(np.int64): 0x4B4B4B4B4B4B4B4B,
    np.dtype(np.float32): 0x4B4B4B4B,  # the bits of 13323083.0: a float no probability holds
    np.dtype(np.float64): 0x4B4B4B4B4B4B4B4B,
}
POISONS = frozenset(_POISON.values())
"""What the guard bands of inputs hold (of a float array: these bits): an output holding one
read outside an input."""

_BITS = {np.dtype(np.float32): np.dtype(np.int32), np.dtype(np.float64): np.dtype(np.int64)}
"""Float arrays are filled and compared through their bits, as integers of their width (so
``-0.0``, NaN and every payload compare exactly)."""


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    import torch

    return {
        np.dtype(np.bool_): torch.bool,
        np.dtype(np.int32): torch.int32,
        np.dtype(np.int64): torch.int64,
        np.dtype(np.uint8): torch.uint8,
        np.dtype(np.float32): torch.float32,
        np.dtype(np.float64): torch.float64,
    }[np.dtype(dtype)]


def sentinel_candidates(dtype: np.dtype) -> Iterable[int]:
    """Candidate fill values for an output buffer of ``dtype``, most preferred first."""
    if np.dtype(dtype) == np.bool_:
        return (BOOL_SENTINEL,)
    return _CANDIDATES


def pick_sentinel(dtype: np.dtype, written_values: np.ndarray) -> int:
    """The first candidate for ``dtype`` absent from ``written_values`` (what the oracle wrote)."""
    if np.dtype(dtype) == np.bool_:
        return BOOL_SENTINEL
    present = set(np.unique(written_values).tolist())
    for c in _CANDIDATES:
        if c not in present:
            return c
    raise AssertionError("every sentinel candidate is written; add candidates")  # pragma: no cover


def filled(dtype: np.dtype, shape: tuple[int, ...], fill: int) -> np.ndarray:
    """A host array of ``shape`` whose bytes hold ``fill`` (for bool: the raw byte)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        a = np.zeros(shape, dtype=np.bool_)
        a.view(np.uint8)[...] = fill
        return a
    if dtype in _BITS:
        return np.full(shape, fill, dtype=_BITS[dtype]).view(dtype)
    return np.full(shape, fill, dtype=dtype)


def raw(a: np.ndarray) -> np.ndarray:
    """The array as compared: bool arrays by their bytes, so the sentinel byte stays visible;
    float arrays by their bits."""
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    return a.view(_BITS[a.dtype]) if a.dtype in _BITS else a


LARGE = 1 << 24
"""Buffers of at least this many elements (a production-scale table: billions) are built on
the device, never as a host copy with their guards, and an input of that size is compared
with what it was given on the device too (:meth:`Guarded.changes`)."""

CHUNK = 1 << 26
"""Elements one step of a large buffer's upload or comparison moves."""

MAX_CHANGES = 1 << 16
"""The most changed elements :meth:`Guarded.changes` lists."""


class Guarded:
    """A device buffer of ``g + n + g`` elements (``g = guard_for(n)``); ``view`` is the middle.

    ``fill`` pre-fills the whole buffer; ``content`` (if given) then fills the middle. A buffer
    of :data:`LARGE` elements or more is built on the device (``initial`` is then ``None``: its
    input is compared there, :meth:`changes`).
    """

    def __init__(
        self,
        dtype: np.dtype,
        shape: tuple[int, ...],
        device: str,
        fill: int,
        content: np.ndarray | None = None,
    ) -> None:
        import torch

        self.dtype = np.dtype(dtype)
        self.shape = tuple(shape)
        n = int(np.prod(shape, dtype=np.int64))
        self.guard = g = guard_for(n)
        self.fill, self.content = fill, None
        if n >= LARGE and self.dtype != np.bool_:
            bits = _BITS.get(self.dtype, self.dtype)
            self.initial = None
            self.full = torch.full((g + n + g,), fill if fill < 1 << (8 * bits.itemsize - 1) else fill - (1 << 8 * bits.itemsize),
                                   dtype=_torch_dtype(bits), device=device)
            if content is not None:
                self.content = np.ascontiguousarray(content, dtype=self.dtype).reshape(-1).view(bits)
                for i in range(0, n, CHUNK):
                    self.full[g + i : g + min(n, i + CHUNK)].copy_(torch.from_numpy(self.content[i : i + CHUNK]))
            self.full = self.full.view(_torch_dtype(self.dtype))
            self.view = self.full[g : g + n].view(self.shape)
            return
        host = filled(self.dtype, (g + n + g,), fill)
        if content is not None:
            host[g : g + n] = np.ascontiguousarray(content, dtype=self.dtype).reshape(-1)
        self.initial = host
        self.full = torch.from_numpy(host.copy()).to(device)
        self.view = self.full[g : g + n].view(self.shape)

    def read(self) -> np.ndarray:
        """The whole buffer, guards included, as a host array (bool as bool)."""
        return self.full.cpu().numpy()

    def changes(self) -> list[tuple[int, object, object]]:
        """For a buffer built with ``content``: every element (at most :data:`MAX_CHANGES`, in
        index order, guards included) that no longer holds what it was given, as ``(index
        relative to the buffer's start, expected, actual)``; compared on the device, a chunk of
        the content at a time, so that a buffer of billions is never copied back."""
        import torch

        g, n = self.guard, int(np.prod(self.shape, dtype=np.int64))
        if self.initial is not None:
            full = self.read()
            e, a = raw(self.initial), raw(full)
            return [(int(i) - g, e[i].item(), a[i].item()) for i in np.flatnonzero(e != a)[:MAX_CHANGES]]
        bits_t = _torch_dtype(_BITS.get(self.dtype, self.dtype))
        full = self.full.view(bits_t)
        fill = np.array([self.fill], dtype=np.int64).astype(_BITS.get(self.dtype, self.dtype))[0].item()
        out: list[tuple[int, object, object]] = []
        for lo, hi in ((0, g), (g + n, g + n + g)):
            bad = torch.nonzero(full[lo:hi] != fill).reshape(-1)[:MAX_CHANGES].cpu().numpy() + lo
            out += [(int(i) - g, fill, full[int(i)].item()) for i in bad]
        if self.content is not None:
            for i in range(0, n, CHUNK):
                part = torch.from_numpy(self.content[i : i + CHUNK]).to(full.device)
                bad = torch.nonzero(full[g + i : g + i + part.numel()] != part).reshape(-1)[:MAX_CHANGES].cpu().numpy()
                out += [(i + int(j), self.content[i + int(j)].item(), full[g + i + int(j)].item()) for j in bad]
                if len(out) >= MAX_CHANGES:
                    break
        return sorted(out)[:MAX_CHANGES]


def poison(dtype: np.dtype) -> int:
    """Fill value for the guard bands of input buffers."""
    dtype = np.dtype(dtype)
    return BOOL_SENTINEL if dtype == np.bool_ else _POISON[dtype]
