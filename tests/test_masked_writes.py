"""A write given as a mask over the concatenation (``device.written_parts``) lays out the same
buffers as the same write given as flat indices: in a batch (``BatchArenas``, segment by
segment), in one case alone (``Arenas``) and in an input updated in place; a mask whose value
count differs is refused; and a batch whose masked output the kernel leaves unwritten differs."""

from __future__ import annotations

import pytest
import torch

from eaglefuzz.harness.checking.device_mode import device_targets
from eaglefuzz.harness.targetkit.device import Arenas, indexed
from eaglefuzz.harness.targetkit.device_batch import BatchArenas, DeviceBatch

MASKED = "target_dependent_ar_prepare_prefill_inputs_kernel"
"""A target whose batched oracle writes its tokens as masks."""


def _as_indices(writes: dict) -> dict:
    return {n: indexed(w)[:2] for n, w in writes.items()}


def _expected(a: BatchArenas | Arenas) -> dict:
    return a.expected_buffers() if isinstance(a, BatchArenas) else a.expected


def _same_buffers(a: BatchArenas | Arenas, b: BatchArenas | Arenas) -> None:
    assert a.full.keys() == b.full.keys()
    for s in a.full:
        assert torch.equal(a.full[s], b.full[s]), s
        assert torch.equal(_expected(a)[s], _expected(b)[s]), s


def test_a_batch_laid_out_from_masks_equals_it_from_flat_indices():
    dt = device_targets()[MASKED]
    batch = dt.draw_batch((3, 5), "cpu", 6)
    writes = dt.oracle_batch(batch)
    masked = [n for n, w in writes.items() if w[0].dtype == torch.bool]
    assert masked  # the condition this test is about
    for n in masked:
        assert 0 < int(writes[n][0].sum()) < writes[n][0].numel()  # some elements written, some left alone
    _same_buffers(BatchArenas(batch, writes, "cpu"), BatchArenas(batch, _as_indices(writes), "cpu"))


def test_one_case_alone_from_masks_equals_it_from_flat_indices():
    dt = device_targets()[MASKED]
    dc = dt.draw_batch((3, 6), "cpu", 1).case(0)
    writes = dt.oracle(dc)
    assert any(w[0].dtype == torch.bool for w in writes.values())
    _same_buffers(Arenas(dc, writes, "cpu"), Arenas(dc, _as_indices(writes), "cpu"))


def _two_cases(inplace: bool) -> DeviceBatch:
    """Two cases of an int32 output ``y`` (or an input ``x`` updated in place) of 3 and 2 elements."""
    if inplace:
        cat, lengths, outputs = {"x": torch.arange(5, dtype=torch.int32)}, {"x": [3, 2]}, {}
    else:
        cat, lengths, outputs = {"i": torch.zeros(2, dtype=torch.int32)}, {"i": [1, 1]}, {"y": (torch.int32, [3, 2])}
    shapes = {n: [(v,) for v in lengths[n]] for n in cat}
    return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, [{}, {}], inout=("x",) if inplace else ())


@pytest.mark.parametrize("inplace", [False, True], ids=["output", "updated-in-place"])
def test_a_hand_made_mask_lands_where_it_is_set(inplace):
    name = "x" if inplace else "y"
    mask = torch.tensor([True, False, True, False, True])
    value = torch.tensor([10, 11, 12, 13, 14], dtype=torch.int32)
    batch = _two_cases(inplace)
    arenas = BatchArenas(batch, {name: (mask, value)}, "cpu")
    _same_buffers(arenas, BatchArenas(batch, {name: (mask.nonzero().reshape(-1), value[mask])}, "cpu"))
    views = [arenas.views[k][name] for k in range(2)]
    expected = [torch.tensor([10, 1, 12], dtype=torch.int32), torch.tensor([3, 14], dtype=torch.int32)]
    if not inplace:  # an output's unwritten element holds the sentinel: write it as the buffer holds it
        expected = [torch.where(m, e, v) for m, e, v in zip(mask.split([3, 2]), expected, views, strict=True)]
    assert int(arenas.mismatch()) == 3  # written elements pre-filled, not yet as expected
    for v, e in zip(views, expected, strict=True):
        v.copy_(e)
    assert int(arenas.mismatch()) == 0
    views[1][1] = 15  # a written element otherwise
    assert int(arenas.mismatch()) == 1
    views[1][1] = 14
    views[0][1] = views[0][1] + 1  # an element the mask leaves alone
    assert int(arenas.mismatch()) == 1


def test_a_mask_with_a_value_count_of_its_own_is_refused():
    with pytest.raises(ValueError, match="a write's mask of 5 elements, 4 values"):
        indexed((torch.ones(5, dtype=torch.bool), torch.zeros(4, dtype=torch.int32)))
