"""Small examples worked out by hand from docs/CONTRACT.md §6 to §8, checked against BOTH oracles.

Output buffers start filled with a sentinel, so an element the contract does not write must
still hold it afterwards; in-place inputs are checked as the contract leaves them.
"""

from __future__ import annotations

import numpy as np
import pytest

from eaglefuzz.oracles import loops, vectorized

ORACLES = [pytest.param(vectorized, id="vectorized"), pytest.param(loops, id="loops")]
S = -9999  # sentinel


def i32(*v):
    return np.array(v, dtype=np.int32)


def i64(*v):
    return np.array(v, dtype=np.int64)


# -- 6. eagle_step_slot_mapping_metadata_kernel ---------------------------------------------


def step(oracle, *, positions, table, nb, seq, bs, M, ib, out_len=None, aliased=False):
    B = len(positions)
    out_pos = positions if aliased else np.full(B, S, dtype=np.int64)
    out_slot = np.full(ib + 1 if out_len is None else out_len, S, dtype=np.int64)
    oracle.eagle_step_slot_mapping_metadata(
        positions=positions, block_table=table, n_blocks_per_req=nb, seq_lens=seq, block_size=bs,
        max_model_len=M, pad_id=-1, batch_size=B, input_batch_size=ib,
        out_clamped_positions=out_pos, out_slot_mapping=out_slot,
    )  # fmt: skip
    return out_pos, out_slot


@pytest.mark.parametrize("oracle", ORACLES)
def test_step_in_range_parked_and_padding(oracle):
    seq = i32(3, 10)
    table = i32(5, 6, 7, 8, 9, 10).reshape(2, 3)
    pos, slot = step(oracle, positions=i64(2, 9), table=table, nb=3, seq=seq, bs=4, M=10, ib=4)
    # r0: p = 3, column 0, slot 5*4 + 3; r1: p = 10 = M, parked; programs 2, 3 pad; 4 untouched
    assert pos.tolist() == [3, 0]
    assert slot.tolist() == [23, -1, -1, -1, S]
    assert seq.tolist() == [4, 1]


@pytest.mark.parametrize("oracle", ORACLES)
def test_step_column_clamp_and_row_stride(oracle):
    # width 4 (the row stride), n_blocks_per_req 2: p = 7 has column 3, clamped to 1
    table = i32(10, 11, 12, 13, 20, 21, 22, 23).reshape(2, 4)
    seq = i32(50, 1)
    pos, slot = step(oracle, positions=i64(6, 0), table=table, nb=2, seq=seq, bs=2, M=100, ib=2)
    assert pos.tolist() == [7, 1]
    assert slot.tolist() == [11 * 2 + 1, 20 * 2 + 1, S]
    assert seq.tolist() == [51, 2]


@pytest.mark.parametrize("oracle", ORACLES)
def test_step_seq_len_capped_and_far_past(oracle):
    seq = i32(7, 7)
    pos, slot = step(oracle, positions=i64(3, 2**40), table=i32(1, 2).reshape(2, 1), nb=1, seq=seq, bs=8, M=5, ib=2)
    assert pos.tolist() == [4, 0]
    assert slot.tolist() == [1 * 8 + 4, -1, S]
    assert seq.tolist() == [5, 1]  # min(7 + 1, 5); parked: 1


@pytest.mark.parametrize("oracle", ORACLES)
def test_step_aliased_positions(oracle):
    positions = i64(2, 9)
    seq = i32(3, 10)
    table = i32(5, 6, 7, 8, 9, 10).reshape(2, 3)
    pos, slot = step(oracle, positions=positions, table=table, nb=3, seq=seq, bs=4, M=10, ib=2, aliased=True)
    assert pos is positions and positions.tolist() == [3, 0]
    assert slot.tolist() == [23, -1, S]


@pytest.mark.parametrize("oracle", ORACLES)
def test_step_slot_is_an_int32_product(oracle):
    # outside the harness's domain: 2**30 * 16 wraps to 0 in int32 before the offset is added
    _, slot = step(oracle, positions=i64(0), table=i32(2**30).reshape(1, 1), nb=1, seq=i32(1), bs=16, M=64, ib=1)
    assert slot.tolist() == [1, S]


@pytest.mark.parametrize("oracle", ORACLES)
def test_step_short_slot_buffer_raises_before_writing(oracle):
    seq = i32(3)
    with pytest.raises(IndexError):
        step(oracle, positions=i64(2), table=i32(5).reshape(1, 1), nb=1, seq=seq, bs=4, M=10, ib=3, out_len=2)
    assert seq.tolist() == [3]
