"""A device batch's arrays placed in its guarded buffers, each element moved once.

A device batch's inputs are drawn as one concatenated tensor per name, and the oracle's writes
come as flat indices into the concatenation of the cases' outputs; the guarded buffers hold
each case's array at an offset of its own (:class:`~.device_batch.BatchArenas`). Done with torch
operations, each element's buffer position is computed (a search for its case, a gather of its
shift, an add) and then scattered to: some ten times the bytes of the arrays themselves.
:func:`copy_segments` moves each input segment once, as a memory copy does, and
:func:`place_writes` finds each written element's case, writes its expected value and its
pre-filled one, in one pass; :func:`place_masked` places a write given as a mask over the
concatenation (a value for every element), segment by segment as the copy does, through the
same kernel. On the CPU (where a launch would run under Triton's interpreter) torch does the
same: gathers and scatters, and ``torch.where`` over each masked segment.
"""

from __future__ import annotations

import torch

BLOCK = 1024
"""Elements one program instance handles per step."""

PROGRAMS = 16384
"""About how many program instances a segment copy runs at most (a segment longer than its
share is copied by a loop in each)."""

_kernels: dict[str, object] = {}


def build() -> dict[str, object]:
    """The Triton kernels (:mod:`.placement_kernels`, imported here: ``@triton.jit`` reads
    ``TRITON_INTERPRET`` as that module is imported, compiled or interpreted as the backend
    chose; a CPU-only run of eaglefuzz never imports it)."""
    from . import placement_kernels

    return {"segments": placement_kernels.segments_kernel, "place_writes": placement_kernels.place_writes_kernel,
            "check": placement_kernels.check_kernel}


def _compiled(name: str):  # noqa: ANN202
    """The Triton kernel ``name``, made the first time a launch asks for it (a CPU-only run of
    eaglefuzz never imports Triton for them)."""
    if not _kernels:
        _kernels.update(build())
    return _kernels[name]


def positions(index: torch.Tensor, bounds: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Buffer positions of elements at concatenated coordinates ``index``: ``index + shift[k]``,
    ``k`` the number of ``bounds`` (where each case but the first starts) at or below it."""
    return index + shift[torch.searchsorted(bounds, index, right=True)]


def _elements(starts: torch.Tensor, places: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every element of the segments ``(s_k, d_k, n_k)`` (host int64 tensors): its index in the
    source and its index in the destination, segment after segment."""
    within = torch.arange(int(lengths.sum())) - torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
    return torch.repeat_interleave(starts, lengths) + within, torch.repeat_interleave(places, lengths) + within


def copy_segments(dst: torch.Tensor, src: torch.Tensor, table: torch.Tensor, longest: int,
                  launch: bool | None = None) -> None:
    """For every segment ``k``: ``dst[d_k : d_k + n_k] = src[s_k : s_k + n_k]``.

    ``dst`` and ``src``: flat tensors of one dtype on one device (segments of ``dst`` must not
    overlap one another or ``src``); ``table``: int64 ``[3 * K]`` on that device, the sources
    ``s``, then the destinations ``d``, then the lengths ``n`` (each >= 0, every segment within
    its tensor); ``longest``: the largest ``n_k`` (a bound: it sizes the launch).
    ``launch``: whether it is the Triton kernel's launch (by default on a GPU; on the CPU it
    then runs under Triton's interpreter), else a gather and a scatter indexed on the host
    (``table`` read back)."""
    if dst.dtype != src.dtype:
        raise TypeError(f"copy_segments: dst is {dst.dtype}, src {src.dtype}")
    count = table.numel() // 3
    if count == 0 or longest <= 0:
        return
    if not (dst.is_cuda if launch is None else launch):
        taken, placed = _elements(*table.view(3, count).cpu())
        dst[placed.to(dst.device)] = src[taken.to(src.device)]
        return
    per_segment = max(1, min(-(-longest // BLOCK), PROGRAMS // count))
    _compiled("segments")[(count, per_segment)](dst, dst, src, src, table, count, BLOCK=BLOCK, MASKED=False,
                                                 FLIP=False, EXPECT=True)


def place_masked(expected: torch.Tensor | None, full: torch.Tensor | None, mask: torch.Tensor, bits: torch.Tensor,
                 table: torch.Tensor, longest: int, launch: bool | None = None) -> None:
    """The written elements of a dense write, segment by segment: for every segment ``k`` and
    ``i < n_k`` where ``mask[s_k + i]``, ``expected[d_k + i] = bits[s_k + i]`` where
    ``expected`` is given and ``full[d_k + i] = bits[s_k + i] ^ 1`` (the pre-fill) where
    ``full`` is given.

    ``mask``: flat bool (or uint8, nonzero: written) over the concatenation of the cases'
    arrays, ``bits`` one value each (flat, contiguous; a count that differs is a
    ``ValueError``); ``table`` and ``longest``: as :func:`copy_segments`'s (the concatenation
    the source, the buffer the destination). ``launch``: as :func:`copy_segments`'s (else
    torch's ``where`` on each segment, the table read back)."""
    if bits.numel() != mask.numel():
        raise ValueError(f"place_masked: a mask of {mask.numel()} elements, {bits.numel()} values (one value per element)")
    count = table.numel() // 3
    buffer = expected if expected is not None else full
    if count == 0 or longest <= 0 or buffer is None:
        return
    if not (buffer.is_cuda if launch is None else launch):
        flat, values = mask.reshape(-1), bits.reshape(-1)
        for src, dst, n in table.view(3, count).T.tolist():  # each segment's elements, where set
            written = flat[src : src + n] != 0
            if expected is not None:
                expected[dst : dst + n] = torch.where(written, values[src : src + n], expected[dst : dst + n])
            if full is not None:
                full[dst : dst + n] = torch.where(written, values[src : src + n] ^ 1, full[dst : dst + n])
        return
    per_segment = max(1, min(-(-longest // BLOCK), PROGRAMS // count))
    _compiled("segments")[(count, per_segment)](
        buffer, buffer if full is None else full, mask.view(torch.uint8) if mask.dtype == torch.bool else mask,
        bits, table, count, BLOCK=BLOCK, MASKED=True, FLIP=full is not None, EXPECT=expected is not None)


def check_segments(full: torch.Tensor, src: torch.Tensor, mask: torch.Tensor | None, table: torch.Tensor,
                   longest: int, sentinel: int, count: torch.Tensor, launch: bool | None = None) -> None:
    """Adds to ``count`` (int64, one element, on ``full``'s device) the elements of ``full``
    that segments own and that are not as they expect, with no expected buffer: segment ``k``
    owns ``full[b_k : d_k + n_k]``, where ``full[b_k : d_k]`` (its band) holds ``sentinel``
    and ``full[d_k + i]`` holds ``src[s_k + i]`` (with ``mask``: where ``mask[s_k + i]`` is set;
    ``sentinel`` where it is not).

    ``full``, ``src``: flat tensors of one storage dtype; ``mask``: flat bool or uint8 over
    ``src`` (nonzero: set), or ``None``; ``table``: int64 ``[4 * K]``, the sources ``s``, the
    destinations ``d``, the lengths ``n`` and the bands' starts ``b`` (``b_k <= d_k``; the
    segments' spans ``[b_k, d_k + n_k)`` tile one range of ``full``); ``longest``: the largest
    ``d_k + n_k - b_k`` (a bound: it sizes the launch). ``launch``: as :func:`copy_segments`'s
    (else torch builds the range's expected elements and compares them, the table read back)."""
    if full.dtype != src.dtype:
        raise TypeError(f"check_segments: full is {full.dtype}, src {src.dtype}")
    segments = table.numel() // 4
    if segments == 0 or longest <= 0:
        return
    if not (full.is_cuda if launch is None else launch):
        starts, places, lengths, bands = table.view(4, segments).cpu()
        lo, hi = int(bands.min()), int((places + lengths).max())
        want = torch.full((hi - lo,), sentinel, dtype=full.dtype, device=full.device)
        take, at = _elements(starts, places - lo, lengths)
        take, at = take.to(src.device), at.to(full.device)
        if mask is not None:  # the elements the mask sets
            set_ = mask.reshape(-1)[take] != 0
            take, at = take[set_], at[set_.to(at.device)]
        want[at] = src[take].to(full.device)
        count += (full[lo:hi] != want).sum()
        return
    per_segment = max(1, min(-(-longest // BLOCK), PROGRAMS // segments))
    flags = src if mask is None else mask.view(torch.uint8) if mask.dtype == torch.bool else mask
    _compiled("check")[(segments, per_segment)](full, flags, src, table, count, segments, sentinel, BLOCK=BLOCK,
                                                MASKED=mask is not None)


def place_writes(expected: torch.Tensor, full: torch.Tensor | None, index: torch.Tensor, bits: torch.Tensor,
                 bounds: torch.Tensor, shift: torch.Tensor, launch: bool | None = None) -> None:
    """Each written element at its buffer position: ``expected[p] = bits[i]`` and, where
    ``full`` is given, ``full[p] = bits[i] ^ 1`` (the pre-fill a kernel that skips the element
    leaves as a difference), for ``p = index[i] + shift[k]``, ``k`` the number of ``bounds``
    that are ``<= index[i]`` (``torch.searchsorted(bounds, index, right=True)``).

    ``expected``, ``full``: flat buffers of ``bits``'s dtype; ``index``: flat integer positions
    in the concatenation of the cases' arrays, ``bits`` one value each (flat, contiguous; a
    count that differs is a ``ValueError``); ``bounds``: sorted int64, where each case but the
    first starts there; ``shift``: int64, one per case (``len(bounds) + 1``). ``launch``: as
    :func:`copy_segments`'s (else torch's search, gather and scatters)."""
    if bits.numel() != index.numel():
        raise ValueError(f"place_writes: {index.numel()} indices, {bits.numel()} values (one value per index)")
    if index.numel() == 0:
        return
    if not (expected.is_cuda if launch is None else launch):
        place = positions(index, bounds, shift)
        expected[place] = bits
        if full is not None:
            full[place] = bits ^ 1
        return
    cuts = bounds.numel()
    _compiled("place_writes")[(-(-index.numel() // BLOCK),)](
        expected, expected if full is None else full, index, bits, bounds, shift, index.numel(), cuts,
        max(cuts, 1).bit_length(), BLOCK=BLOCK, FLIP=full is not None)
