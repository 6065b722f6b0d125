"""The Triton kernels of :mod:`.placement`: a device batch's inputs copied segment by segment,
the oracle's writes placed, and the batch checked against its sources. Imported by
:func:`.placement.build` on the first launch (this module imports Triton)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def segment(table_ptr, count, BLOCK: tl.constexpr):  # noqa: N803
    # this program's segment k (its source, destination and length: the table's rows), its
    # share j of the segment and the stride between its shares
    k = tl.program_id(0)
    src = tl.load(table_ptr + k)
    dst = tl.load(table_ptr + count + k)
    n = tl.load(table_ptr + 2 * count + k)
    return k, tl.program_id(1).to(tl.int64), tl.num_programs(1) * BLOCK, src, dst, n


@triton.jit
def segments_kernel(dst_ptr, full_ptr, mask_ptr, src_ptr, table_ptr, count,  # noqa: N803
                    BLOCK: tl.constexpr, MASKED: tl.constexpr, FLIP: tl.constexpr, EXPECT: tl.constexpr):
    _, j, step, src, dst, n = segment(table_ptr, count, BLOCK)
    for i in range(j * BLOCK, n, step):
        at = i + tl.arange(0, BLOCK).to(tl.int64)
        keep = at < n
        if MASKED:  # only where the mask is set
            keep = keep & (tl.load(mask_ptr + src + at, mask=keep, other=0) != 0)
        bits = tl.load(src_ptr + src + at, mask=keep)
        if EXPECT:
            tl.store(dst_ptr + dst + at, bits, mask=keep)
        if FLIP:
            tl.store(full_ptr + dst + at, bits ^ 1, mask=keep)


@triton.jit
def place_writes_kernel(expected_ptr, full_ptr, index_ptr, bits_ptr, bounds_ptr, shift_ptr, n, cuts, steps,
                        BLOCK: tl.constexpr, FLIP: tl.constexpr):  # noqa: N803
    at = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    keep = at < n
    index = tl.load(index_ptr + at, mask=keep, other=0).to(tl.int64)
    lo = tl.zeros([BLOCK], dtype=tl.int64)  # the case: how many cuts lie at or below the index
    hi = tl.zeros([BLOCK], dtype=tl.int64) + cuts
    for _ in range(steps):
        open_ = lo < hi
        mid = (lo + hi) // 2
        cut = tl.load(bounds_ptr + mid, mask=keep & open_, other=0)
        right = open_ & (cut <= index)
        lo = tl.where(right, mid + 1, lo)
        hi = tl.where(open_ & (cut > index), mid, hi)
    place = index + tl.load(shift_ptr + lo, mask=keep, other=0)
    bits = tl.load(bits_ptr + at, mask=keep)
    tl.store(expected_ptr + place, bits, mask=keep)
    if FLIP:
        tl.store(full_ptr + place, bits ^ 1, mask=keep)


@triton.jit
def check_kernel(full_ptr, mask_ptr, src_ptr, table_ptr, out_ptr, count, sentinel,  # noqa: N803
                 BLOCK: tl.constexpr, MASKED: tl.constexpr):
    k, j, step, src, dst, n = segment(table_ptr, count, BLOCK)
    band = tl.load(table_ptr + 3 * count + k) - dst  # <= 0: the segment's band starts there
    bad = tl.zeros([BLOCK], dtype=tl.int32)
    for i in range(band + j * BLOCK, n, step):
        at = i + tl.arange(0, BLOCK).to(tl.int64)
        live = at < n
        inside = live & (at >= 0)
        if MASKED:  # an element the mask leaves unset holds the sentinel
            inside = inside & (tl.load(mask_ptr + src + at, mask=inside, other=0) != 0)
        want = tl.load(src_ptr + src + at, mask=inside, other=sentinel)
        got = tl.load(full_ptr + dst + at, mask=live, other=sentinel)
        bad += (got != want).to(tl.int32)
    tl.atomic_add(out_ptr, tl.sum(bad, axis=0).to(tl.int64))
