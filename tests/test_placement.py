"""``copy_segments``, ``place_writes``, ``place_masked`` and ``check_segments``: the Triton launches (compiled on a GPU, under the
interpreter on the CPU) and torch's indexing each equal a plain loop over the segments or the
written elements, and touch nothing else."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch

from eaglefuzz.harness.targetkit import placement
from eaglefuzz.harness.targetkit.placement import (
    BLOCK,
    check_segments,
    copy_segments,
    place_masked,
    place_writes,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FILL = {torch.int32: -7, torch.int64: -(2**40), torch.uint8: 0xA5}


def layout(lengths: list[int], gap: int, rng: np.random.Generator) -> tuple[list[int], list[int], int]:
    """Sources laid end to end in shuffled order, destinations in another order, each after a
    gap of its own: segments that neither start nor end where their neighbours do."""
    src_order, dst_order = rng.permutation(len(lengths)), rng.permutation(len(lengths))
    starts, places = [0] * len(lengths), [0] * len(lengths)
    at = 0
    for k in src_order:
        starts[k], at = at, at + lengths[k]
    end = 0
    for k in dst_order:
        end += int(rng.integers(1, gap + 1))
        places[k], end = end, end + lengths[k]
    return starts, places, end + gap


@pytest.mark.parametrize("launch", [True, False], ids=["launch", "host"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8], ids=str)
def test_each_segment_lands_at_its_place_and_nothing_else_moves(launch, dtype, monkeypatch):
    monkeypatch.setattr(placement, "PROGRAMS", 4)  # segments longer than their programs' share: the loop runs
    rng = np.random.default_rng(7)
    lengths = [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 5, 17]
    starts, places, size = layout(lengths, 9, rng)
    src = torch.from_numpy(rng.integers(0, 100, sum(lengths)).astype(np.int64)).to(dtype).to(DEVICE)
    dst = torch.full((size,), FILL[dtype], dtype=dtype, device=DEVICE)
    want = dst.clone()
    for s, d, n in zip(starts, places, lengths, strict=True):
        want[d : d + n] = src[s : s + n]
    table = torch.tensor(starts + places + lengths, dtype=torch.int64, device=DEVICE)
    copy_segments(dst, src, table, max(lengths), launch=launch)
    assert torch.equal(dst, want)
    assert int((dst == FILL[dtype]).sum()) == size - sum(lengths)  # every gap untouched


def test_nothing_to_copy_and_mixed_dtypes():
    dst = torch.full((8,), -1, dtype=torch.int32, device=DEVICE)
    copy_segments(dst, torch.zeros(0, dtype=torch.int32, device=DEVICE), torch.zeros(0, dtype=torch.int64, device=DEVICE), 0)
    copy_segments(dst, torch.zeros(4, dtype=torch.int32, device=DEVICE),
                  torch.tensor([0, 0, 0], dtype=torch.int64, device=DEVICE), 0)
    assert torch.equal(dst, torch.full_like(dst, -1))
    one = torch.zeros(1, dtype=torch.int64, device=DEVICE)
    with pytest.raises(ValueError, match="2 indices, 1 values"):
        place_writes(dst, None, torch.tensor([0, 1], device=DEVICE), dst[:1], one[:0], one)
    with pytest.raises(TypeError, match="dst is torch.int32, src torch.int64"):
        copy_segments(dst, torch.zeros(4, dtype=torch.int64, device=DEVICE),
                      torch.tensor([0, 0, 4], dtype=torch.int64, device=DEVICE), 4)


@pytest.mark.parametrize("launch", [True, False], ids=["launch", "host"])
@pytest.mark.parametrize("flip", [True, False], ids=["prefilled", "expected-only"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8], ids=str)
@pytest.mark.parametrize("cases", [1, 2, 5, 33])
def test_each_written_element_lands_in_its_cases_place(launch, flip, dtype, cases):
    """Cases of ragged lengths (empty ones, several in a row, too) laid out with gaps of their own, a write to a
    random subset of every case's elements in shuffled order, both ends of each case included."""
    rng = np.random.default_rng(cases)
    lengths = rng.integers(0, 2 * BLOCK // cases + 3, cases)
    zero = int(rng.integers(cases))
    lengths[zero : zero + 2] = 0  # empty cases, two in a row where there are several: equal bounds
    ends = np.cumsum(lengths)
    places = np.cumsum(rng.integers(1, 12, cases) + lengths) - lengths  # each case after a gap
    size = int(places[-1] + lengths[-1] + 7)
    written = [i for k in range(cases) for i in range(int(ends[k] - lengths[k]), int(ends[k]))
               if rng.random() < 0.6 or i in (ends[k] - lengths[k], ends[k] - 1)]
    index = rng.permutation(np.asarray(written, dtype=np.int64))
    bits = rng.integers(0, 100, index.size)
    want_expected = np.full(size, FILL[dtype], dtype=np.int64)
    want_full = want_expected.copy()
    for i, v in zip(index, bits, strict=True):
        k = int(np.searchsorted(ends, i, side="right"))
        p = int(places[k] + i - (ends[k] - lengths[k]))
        want_expected[p] = v
        if flip:
            want_full[p] = v ^ 1
    expected = torch.full((size,), FILL[dtype], dtype=dtype, device=DEVICE)
    full = expected.clone()
    as_t = partial(torch.tensor, dtype=torch.int64, device=DEVICE)
    place_writes(expected, full if flip else None, as_t(index), as_t(bits).to(dtype), as_t(ends[:-1]),
                 as_t(places - (ends - lengths)), launch=launch)
    assert torch.equal(expected.long().cpu(), torch.from_numpy(want_expected).to(dtype).long())
    assert torch.equal(full.long().cpu(), torch.from_numpy(want_full).to(dtype).long())


@pytest.mark.parametrize("launch", [True, False], ids=["launch", "host"])
@pytest.mark.parametrize("flip", [True, False], ids=["prefilled", "expected-only"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8], ids=str)
def test_a_masked_write_lands_where_its_mask_is_set_and_nowhere_else(launch, flip, dtype, monkeypatch):
    """Segments of ragged lengths (empty ones, ones longer than their programs' share) in
    shuffled order, a mask set on a random subset of each, both ends of most included; every
    element under an unset mask, and every gap, keeps its fill."""
    monkeypatch.setattr(placement, "PROGRAMS", 4)
    rng = np.random.default_rng(11)
    lengths = [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 5, 17, 0]
    starts, places, size = layout(lengths, 9, rng)
    total = sum(lengths)
    mask = rng.random(total) < 0.5
    for s, n in zip(starts, lengths, strict=True):
        if n > 2:
            mask[s], mask[s + n - 1] = True, True
    bits = rng.integers(0, 100, total)
    want_expected = np.full(size, FILL[dtype], dtype=np.int64)
    want_full = want_expected.copy()
    for s, d, n in zip(starts, places, lengths, strict=True):
        for i in range(n):
            if mask[s + i]:
                want_expected[d + i] = bits[s + i]
                if flip:
                    want_full[d + i] = bits[s + i] ^ 1
    expected = torch.full((size,), FILL[dtype], dtype=dtype, device=DEVICE)
    full = expected.clone()
    table = torch.tensor(starts + places + lengths, dtype=torch.int64, device=DEVICE)
    place_masked(expected, full if flip else None, torch.from_numpy(mask).to(DEVICE),
                 torch.from_numpy(bits).to(dtype).to(DEVICE), table, max(lengths), launch=launch)
    assert torch.equal(expected.long().cpu(), torch.from_numpy(want_expected).to(dtype).long())
    assert torch.equal(full.long().cpu(), torch.from_numpy(want_full).to(dtype).long())
    with pytest.raises(ValueError, match="a mask of 3 elements, 2 values"):
        place_masked(expected, None, torch.ones(3, dtype=torch.bool, device=DEVICE), expected[:2], table, 1)


@pytest.mark.parametrize("launch", [True, False], ids=["launch", "host"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8], ids=str)
def test_a_prefill_alone_leaves_no_expected_write(launch, dtype):
    """``place_masked`` with no expected buffer writes the pre-fill (the value with its lowest
    bit flipped) where the mask is set, and nothing else."""
    mask = torch.tensor([True, False, True, True], device=DEVICE)
    bits = torch.tensor([4, 5, 6, 7], dtype=dtype, device=DEVICE)
    full = torch.full((9,), FILL[dtype], dtype=dtype, device=DEVICE)
    place_masked(None, full, mask, bits, torch.tensor([0, 1, 3, 5, 2, 2], dtype=torch.int64, device=DEVICE), 2,
                 launch=launch)
    want = [FILL[dtype]] * 9  # segment 0: elements 0, 1 at 3, 4; segment 1: elements 1, 2 at 5, 6
    want[3], want[6] = 4 ^ 1, 6 ^ 1
    assert full.long().cpu().tolist() == torch.tensor(want, dtype=dtype).long().tolist()


@pytest.mark.parametrize("launch", [True, False], ids=["launch", "host"])
@pytest.mark.parametrize("masked", [False, True], ids=["source", "masked"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8], ids=str)
def test_a_check_counts_each_element_not_as_its_segment_expects_and_nothing_else(launch, masked, dtype, monkeypatch):
    """Segments of ragged lengths (empty ones, ones longer than their programs' share) in shuffled
    order, with bands before them short and longer than a block, the last band after them: a
    buffer as they expect counts 0; every element changed in a band, in a segment (both ends, an
    element under an unset mask) counts once; an element outside the segments' spans never."""
    monkeypatch.setattr(placement, "PROGRAMS", 4)
    rng = np.random.default_rng(13)
    lengths = [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 5, 17, 0]
    starts, places, size = layout(lengths, 9, rng)
    places, size = [p + 2 * BLOCK for p in places], size + 2 * BLOCK  # the first band longer than a block
    sent, total = FILL[dtype], sum(lengths)
    src = rng.integers(0, 100, total)
    mask = rng.random(total) < 0.5 if masked else np.ones(total, dtype=bool)
    want = np.full(size + 5, sent, dtype=np.int64)
    for s, d, n in zip(starts, places, lengths, strict=True):
        for i in range(n):
            if mask[s + i]:
                want[d + i] = src[s + i]
    order = np.argsort(places, kind="stable")
    lo, hi = 3, size  # spans from 3 to size; 0-2 and the 5 elements after size are no segment's
    d = np.append(np.asarray(places)[order], hi)
    n = np.append(np.asarray(lengths)[order], 0)
    rows = [np.append(np.asarray(starts)[order], 0), d, n, np.concatenate([[lo], d[:-1] + n[:-1]])]
    table = torch.from_numpy(np.concatenate(rows)).to(DEVICE)
    longest = int((d + n - rows[3]).max())
    args = (torch.from_numpy(src).to(dtype).to(DEVICE), torch.from_numpy(mask).to(DEVICE) if masked else None, table,
            longest, sent)

    def count(buffer: np.ndarray) -> int:
        got = torch.zeros(1, dtype=torch.int64, device=DEVICE)
        check_segments(torch.from_numpy(buffer).to(dtype).to(DEVICE), *args, got, launch=launch)
        return int(got[0])

    assert count(want) == 0
    ends = [p + k for p, k in zip(places, lengths, strict=True) if k]
    unset = [places[k] + i for k in range(len(lengths)) for i in range(lengths[k]) if not mask[starts[k] + i]]
    inside = [places[k] for k in range(len(lengths)) if lengths[k]] + [e - 1 for e in ends]
    bands = [lo, lo + BLOCK + 1, hi - 1] + [p - 1 for p in places]
    planted = sorted(set(inside + bands + unset[:5]))
    changed = want.copy()
    changed[planted] ^= 1
    assert count(changed) == len(planted)
    outside = want.copy()
    outside[[0, 1, 2, size, size + 4]] ^= 1
    assert count(outside) == 0
    with pytest.raises(TypeError, match="full is torch.int64, src torch.int32"):
        check_segments(torch.zeros(4, dtype=torch.int64, device=DEVICE), torch.zeros(4, dtype=torch.int32, device=DEVICE),
                       None, table, longest, 0, torch.zeros(1, dtype=torch.int64, device=DEVICE))


COMPILE = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from eaglefuzz.harness.targetkit.placement import BLOCK, build

kernels, target = build(), GPUTarget("cuda", 90, 32)
for t in ("*i32", "*i64", "*u8"):
    segments = {"dst_ptr": t, "full_ptr": t, "mask_ptr": "*u8", "src_ptr": t, "table_ptr": "*i64", "count": "i32",
                "BLOCK": "constexpr", "MASKED": "constexpr", "FLIP": "constexpr", "EXPECT": "constexpr"}
    for masked, flip, expect in ((False, False, True), (True, False, True), (True, True, True), (True, True, False)):
        source = ASTSource(kernels["segments"], segments,
                           constexprs={"BLOCK": BLOCK, "MASKED": masked, "FLIP": flip, "EXPECT": expect})
        assert triton.compile(source, target=target).asm["cubin"]
    check = {"full_ptr": t, "mask_ptr": "*u8", "src_ptr": t, "table_ptr": "*i64", "out_ptr": "*i64", "count": "i32",
             "sentinel": "i64" if t == "*i64" else "i32", "BLOCK": "constexpr", "MASKED": "constexpr"}
    for masked in (False, True):
        source = ASTSource(kernels["check"], check, constexprs={"BLOCK": BLOCK, "MASKED": masked})
        assert triton.compile(source, target=target).asm["cubin"]
    writes = {"expected_ptr": t, "full_ptr": t, "index_ptr": "*i64", "bits_ptr": t, "bounds_ptr": "*i64",
              "shift_ptr": "*i64", "n": "i32", "cuts": "i32", "steps": "i32", "BLOCK": "constexpr", "FLIP": "constexpr"}
    for flip in (True, False):
        source = ASTSource(kernels["place_writes"], writes, constexprs={"BLOCK": BLOCK, "FLIP": flip})
        assert triton.compile(source, target=target).asm["cubin"]
print("compiled")
"""


def test_the_launches_compile_for_the_gpus_device_mode_runs_on():
    """The kernels compile for an H100/H200 (sm_90), each storage dtype, on any machine (no GPU
    needed: Triton's own ptxas): the CPU tests run them under the interpreter, which accepts code
    the compiler refuses. A process of its own, Triton imported there with the interpreter off."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import eaglefuzz

    env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": str(Path(eaglefuzz.__file__).resolve().parent.parent)}
    proc = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert proc.returncode == 0 and "compiled" in proc.stdout, proc.stderr[-3000:]
