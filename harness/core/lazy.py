"""Arrays of gigabytes that cost what they hold: a production-scale case's tables are zeros but
for a few live rows, made as anonymous memory whose pages exist only once written
(:func:`lazy_full`), and :func:`written_runs` says which elements lie on made pages, so that a
copy to the device, a reproducer or a corpus file looks at those alone (every other element is
0). NumPy only."""

from __future__ import annotations

import mmap

import numpy as np


class _LazyPages(mmap.mmap):
    """The anonymous private memory of :func:`lazy_full`: a page never written reads 0."""

    made: list[tuple[int, int]] | None = None
    """The byte ranges of the pages made when :func:`seal` sealed it (``None``: not sealed)."""


def lazy_full(shape: tuple[int, ...], dtype: type, fill: float = 0) -> np.ndarray:
    """``np.full(shape, fill, dtype)`` whose pages are made only when written (``fill`` 0) or
    once (else): anonymous memory with huge pages off, so that a few entries scattered over a
    10 GiB table touch a few 4 KiB pages, not every 2 MiB huge page (gigabytes, tens of seconds).
    :func:`written_runs` tells which elements such an array's written pages hold."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    try:
        buf = _LazyPages(-1, max(n, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        buf.madvise(mmap.MADV_NOHUGEPAGE)
    except (AttributeError, OSError, ValueError):  # not Linux: an ordinary array
        return np.full(shape, fill, dtype=dtype)
    out = np.frombuffer(buf, dtype=dtype, count=int(np.prod(shape))).reshape(shape)
    if fill:
        out[...] = fill
    return out


def _pages_of(a: np.ndarray) -> _LazyPages | None:
    base: object = a
    while isinstance(base, np.ndarray):
        base = base.base
    buf = getattr(base, "obj", base)
    return buf if isinstance(buf, _LazyPages) else None


def _made_now(addr: int, nbytes: int) -> list[tuple[int, int]] | None:
    """The byte ranges of ``[addr, addr + nbytes)`` on pages made now (present or swapped, as
    ``/proc/self/pagemap`` says: Linux), clipped to it; ``None`` where the system does not tell."""
    page = mmap.PAGESIZE
    first, last = addr // page, (addr + nbytes - 1) // page
    try:
        with open("/proc/self/pagemap", "rb") as f:
            f.seek(first * 8)
            raw = f.read((last - first + 1) * 8)
    except OSError:
        return None
    entries = np.frombuffer(raw, dtype=np.uint64)
    if entries.size != last - first + 1:
        return None
    made = (entries >> np.uint64(62)) != 0  # bit 63 present, bit 62 swapped
    edges = np.flatnonzero(np.diff(np.concatenate([[0], made.astype(np.int8), [0]])))
    return [(max((first + s) * page, addr), min((first + t) * page, addr + nbytes))
            for s, t in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True)]


def seal(a: np.ndarray) -> None:
    """No more writes into ``a`` (an array of :func:`lazy_full`; any other is left as it is):
    it becomes read-only, and the pages made so far are recorded, so that :func:`written_runs`
    is not misled by later reads (a read of a page never made maps the system's page of zeros,
    which Linux then counts as made)."""
    buf = _pages_of(a)
    if buf is None or not a.flags.c_contiguous or a.size == 0:
        return
    a.flags.writeable = False
    if buf.made is None:
        addr = int(np.frombuffer(buf, dtype=np.uint8, count=1).__array_interface__["data"][0])
        buf.made = _made_now(addr, len(buf))


def written_runs(a: np.ndarray) -> list[tuple[int, int]] | None:
    """The flat element ranges ``[start, end)`` of ``a`` (an array of :func:`lazy_full`, or a
    C-contiguous view of one) that lie on pages made (written, or read; when it was sealed
    (:func:`seal`), those made then): every element outside them is 0, since a page of
    anonymous memory never made reads 0. ``None``: ``a`` is no such array, or the system does
    not tell which pages are made; any element may then hold anything."""
    buf = _pages_of(a)
    if buf is None or not a.flags.c_contiguous or a.size == 0:
        return None
    addr = int(a.__array_interface__["data"][0])
    if buf.made is not None:
        made: list[tuple[int, int]] | None = [(max(lo, addr), min(hi, addr + a.nbytes)) for lo, hi in buf.made
                                              if hi > addr and lo < addr + a.nbytes]
    else:
        made = _made_now(addr, a.nbytes)
    if made is None:
        return None
    return [((lo - addr) // a.itemsize, -(-(hi - addr) // a.itemsize)) for lo, hi in made]


def zero_sparse(a: np.ndarray) -> tuple[np.ndarray, int] | None:
    """For an array of :func:`lazy_full` most of whose elements lie on pages never made: the
    flat indices of its elements whose bits are not all 0, and the index of one whose bits are,
    found by looking at the made pages alone (what ``np.flatnonzero(bits != 0)`` and
    ``np.argmax(bits == 0)`` give on the whole array, without reading gigabytes of zeros);
    ``None`` for any other array."""
    runs = written_runs(a)
    if runs is None or 2 * sum(hi - lo for lo, hi in runs) >= a.size:
        return None
    flat = a.reshape(-1)
    bits = flat.view(np.uint8) if flat.dtype == np.bool_ else flat.view(np.dtype(f"u{flat.itemsize}"))
    parts = [lo + np.flatnonzero(bits[lo:hi]) for lo, hi in runs]
    where = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    zero, at = 0, 0
    for lo, hi in runs:  # the first index whose bits are 0: before a run, or a zero within it
        if at < lo:
            break
        inside = np.flatnonzero(bits[lo:hi] == 0)
        if inside.size:
            zero = lo + int(inside[0])
            break
        at = zero = hi
    else:
        zero = at
    return where.astype(np.int64), zero
