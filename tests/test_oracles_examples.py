"""Small examples worked out by hand from docs/CONTRACT.md, each checked against BOTH oracles.

Every output buffer starts filled with a sentinel (masks: the byte 0x5A, neither True nor
False), so an element the contract does not write must still hold its sentinel afterwards.
"""

from __future__ import annotations

import numpy as np
import pytest

from eaglefuzz.oracles import loops, vectorized

ORACLES = [pytest.param(vectorized, id="vectorized"), pytest.param(loops, id="loops")]

S_ID = -7777  # sentinel in id buffers
S_POS = -5555  # sentinel in position buffers
S_IDX = -9999  # sentinel in new-token-index / mapping / prepare_* outputs
S_MASK = 0x5A  # sentinel byte in bool masks
X = S_MASK  # shorthand in expected mask bytes


def i32(*v):
    return np.array(v, dtype=np.int32)


def i64(*v):
    return np.array(v, dtype=np.int64)


def sentinel(n, value, dtype=np.int32):
    return np.full(n, value, dtype=dtype)


def sentinel_mask(n):
    return np.full(n, S_MASK, dtype=np.uint8).view(np.bool_)


def run_copy_expand(
    oracle,
    *,
    tokens,
    positions,
    next_tokens,
    qsl,
    qel,
    P,
    shift,
    out_len,
    pad_id=0,
    par_id=99,
    total_input_tokens=None,
):
    """Run one oracle on sentinel-filled buffers; return them for checking."""
    R = len(qel)
    T = len(tokens) if total_input_tokens is None else total_input_tokens
    out = dict(
        out_input_ids=sentinel(out_len, S_ID),
        out_positions=sentinel(out_len, S_POS, positions.dtype),
        out_is_rejected_token_mask=sentinel_mask(out_len),
        out_is_masked_token_mask=sentinel_mask(out_len),
        out_new_token_indices=sentinel(R * P, S_IDX),
        out_hidden_state_mapping=sentinel(len(tokens), S_IDX),
    )
    ret = oracle.copy_and_expand_eagle_inputs(
        target_token_ids=tokens,
        target_positions=positions,
        next_token_ids=next_tokens,
        query_start_loc=qsl,
        query_end_loc=qel,
        padding_token_id=pad_id,
        parallel_drafting_token_id=par_id,
        total_input_tokens=T,
        num_padding_slots_per_request=P,
        shift_input_ids=shift,
        **out,
    )
    assert ret is None
    return out


def check_copy_expand(out, *, ids, pos, rej, msk, nti, mapping):
    np.testing.assert_array_equal(out["out_input_ids"], i32(*ids))
    np.testing.assert_array_equal(out["out_positions"], np.array(pos, out["out_positions"].dtype))
    np.testing.assert_array_equal(out["out_is_rejected_token_mask"].view(np.uint8), rej)
    np.testing.assert_array_equal(out["out_is_masked_token_mask"].view(np.uint8), msk)
    np.testing.assert_array_equal(out["out_new_token_indices"], i32(*nti))
    np.testing.assert_array_equal(out["out_hidden_state_mapping"], i32(*mapping))
    assert out["out_input_ids"].dtype == np.int32
    assert out["out_new_token_indices"].dtype == np.int32
    assert out["out_hidden_state_mapping"].dtype == np.int32


# --------------------------------------------------------------------------------------------
# 1. copy_and_expand_eagle_inputs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("oracle", ORACLES)
def test_copy_expand_shift_off_p1_with_rejected_token(oracle):
    # Draft-model mode: shift off, P = 1. T = 5, two requests:
    #   qsl = [0, 3, 5]; r0 has 1 rejected token -> qe0 = 3 - 1 - 1 = 1; r1 none -> qe1 = 4.
    # r0: nv = qe - qs + 1 = 2, out_start = qs + r*P = 0, total = nv + P + (nqs - qe - 1)
    #     = 2 + 1 + 1 = 4 (= qlen + P), p0 = pos[0] = 100.
    #     j0 valid tok[0]=10 pos 100 | j1 valid tok[1]=11 pos 101
    #     j2 == nv: bonus next[0]=50 pos 102, nti[0*1 + 0] = out slot 2
    #     j3 >= nv + P = 3: rejected, id pad 0, pos 0, rejected mask True
    # r1: nv = 4 - 3 + 1 = 2, out_start = 3 + 1*1 = 4, total = 2 + 1 + 0 = 3, p0 = 200.
    #     out4 tok[3]=13 pos 200 | out5 tok[4]=14 pos 201 | out6 bonus 60 pos 202, nti[1] = 6
    # Slots 0..6 = T + R*P are written; buffer slots 7, 8 keep the sentinel.
    # Non-shift mode: the hidden-state mapping is not touched at all.
    out = run_copy_expand(
        oracle,
        tokens=i32(10, 11, 12, 13, 14),
        positions=i64(100, 101, 102, 200, 201),
        next_tokens=i32(50, 60),
        qsl=i32(0, 3, 5),
        qel=i32(1, 4),
        P=1,
        shift=False,
        out_len=9,
    )
    check_copy_expand(
        out,
        ids=[10, 11, 50, 0, 13, 14, 60, S_ID, S_ID],
        pos=[100, 101, 102, 0, 200, 201, 202, S_POS, S_POS],
        rej=[0, 0, 0, 1, 0, 0, 0, X, X],
        msk=[0, 0, 0, 0, 0, 0, 0, X, X],
        nti=[2, 6],
        mapping=[S_IDX] * 5,
    )


@pytest.mark.parametrize("oracle", ORACLES)
def test_copy_expand_shift_on_p3(oracle):
    # Parallel-drafting EAGLE: shift on, P = K = 3. T = 6, qsl = [0, 4, 6].
    #   r0 has 1 rejected -> qe0 = 4 - 1 - 1 = 2; r1 none -> qe1 = 5.
    # r0: nv = qe - qs = 2, reads tok[qs + 1 + j], out_start = qs + r*(P - 1) = 0,
    #     total = 2 + 3 + (4 - 2 - 1) = 6 (= qlen + P - 1), p0 = pos[0] = 100 (not shifted).
    #     out0 tok[1]=11 pos 100 | out1 tok[2]=12 pos 101
    #     out2 bonus 50 pos 102 nti[0]=2 | out3 par 99 pos 103 masked nti[1]=3
    #     out4 par 99 pos 104 masked nti[2]=4 | out5 (j=5 >= nv+P=5) rejected pad 0 pos 0
    #     mapping[qs + j] = out_start + j for j < qlen=4: mapping[0..3] = 0, 1, 2, 3
    # r1: qs=4, nqs=6, qe=5: nv = 1, out_start = 4 + 1*2 = 6, total = 1 + 3 + 0 = 4, p0 = 200.
    #     out6 tok[4+1+0]=15 pos 200 | out7 bonus 60 pos 201 nti[3]=7
    #     out8 par 99 pos 202 nti[4]=8 | out9 par 99 pos 203 nti[5]=9
    #     mapping[4] = 6, mapping[5] = 7
    # Slots 0..9 = T + R*(P-1) written; 10, 11 keep the sentinel.
    out = run_copy_expand(
        oracle,
        tokens=i32(10, 11, 12, 13, 14, 15),
        positions=i64(100, 101, 102, 103, 200, 201),
        next_tokens=i32(50, 60),
        qsl=i32(0, 4, 6),
        qel=i32(2, 5),
        P=3,
        shift=True,
        out_len=12,
    )
    check_copy_expand(
        out,
        ids=[11, 12, 50, 99, 99, 0, 15, 60, 99, 99, S_ID, S_ID],
        pos=[100, 101, 102, 103, 104, 0, 200, 201, 202, 203, S_POS, S_POS],
        rej=[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, X, X],
        msk=[0, 0, 0, 1, 1, 0, 0, 0, 1, 1, X, X],
        nti=[2, 3, 4, 7, 8, 9],
        mapping=[0, 1, 2, 3, 6, 7],
    )


@pytest.mark.parametrize("oracle", ORACLES)
def test_copy_expand_shift_on_one_token_request(oracle):
    # Shift on, P = 2, a one-token request (production domain): qsl = [0, 1], qe = 0.
    # nv = qe - qs = 0, out_start = 0, total = 0 + 2 + (1 - 0 - 1) = 2, p0 = pos[0] = 7.
    #   out0: j == nv -> bonus 50, pos p0 + 0 = 7 (the only input token's position), nti[0] = 0
    #   out1: parallel 99, pos 8, masked, nti[1] = 1
    #   mapping[0] = out_start + 0 = 0. Slot 2 keeps the sentinel.
    out = run_copy_expand(
        oracle,
        tokens=i32(10),
        positions=i64(7),
        next_tokens=i32(50),
        qsl=i32(0, 1),
        qel=i32(0),
        P=2,
        shift=True,
        out_len=3,
    )
    check_copy_expand(
        out,
        ids=[50, 99, S_ID],
        pos=[7, 8, S_POS],
        rej=[0, 0, X],
        msk=[0, 1, X],
        nti=[0, 1],
        mapping=[0],
    )


@pytest.mark.parametrize("oracle", ORACLES)
def test_copy_expand_shift_off_p3_parallel_draft_model(oracle):
    # Parallel draft model: shift off, P = K = 3, one request qsl = [0, 3], 2 rejected -> qe = 0.
    # nv = 0 - 0 + 1 = 1, out_start = 0, total = 1 + 3 + (3 - 0 - 1) = 6 (= qlen + P), p0 = 40.
    #   out0 valid tok[0]=10 pos 40 | out1 bonus 50 pos 41 nti[0]=1
    #   out2 par 99 pos 42 nti[1]=2 | out3 par 99 pos 43 nti[2]=3
    #   out4, out5 (j >= nv + P = 4): rejected, pad id 5 (non-default), pos 0
    out = run_copy_expand(
        oracle,
        tokens=i32(10, 11, 12),
        positions=i64(40, 41, 42),
        next_tokens=i32(50),
        qsl=i32(0, 3),
        qel=i32(0),
        P=3,
        shift=False,
        out_len=6,
        pad_id=5,
    )
    check_copy_expand(
        out,
        ids=[10, 50, 99, 99, 5, 5],
        pos=[40, 41, 42, 43, 0, 0],
        rej=[0, 0, 0, 0, 1, 1],
        msk=[0, 0, 1, 1, 0, 0],
        nti=[1, 2, 3],
        mapping=[S_IDX] * 3,
    )


@pytest.mark.parametrize("oracle", ORACLES)
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_copy_expand_positions_wrap_in_their_dtype(oracle, dtype):
    # Shift off, P = 1, one request qsl = [0, 2], qe = 1: nv = 2, total = 3.
    # p0 = MAX - 1 of the positions dtype: positions MAX - 1, MAX, then MAX + 1 wraps to MIN.
    info = np.iinfo(dtype)
    out = run_copy_expand(
        oracle,
        tokens=i32(10, 11),
        positions=np.array([info.max - 1, info.max], dtype=dtype),
        next_tokens=i32(50),
        qsl=i32(0, 2),
        qel=i32(1),
        P=1,
        shift=False,
        out_len=3,
    )
    assert out["out_positions"].dtype == dtype
    check_copy_expand(
        out,
        ids=[10, 11, 50],
        pos=[info.max - 1, info.max, info.min],
        rej=[0, 0, 0],
        msk=[0, 0, 0],
        nti=[2],
        mapping=[S_IDX] * 2,
    )


@pytest.mark.parametrize("oracle", ORACLES)
def test_copy_expand_input_index_clamped(oracle):
    # Shift off, P = 1, qsl = [0, 3], qe = 2, but total_input_tokens = 2: the valid slot j = 2
    # reads index min(0 + 2, T - 1) = 1 -> tok[1] = 11. nv = 3, total = 3 + 1 + 0 = 4.
    out = run_copy_expand(
        oracle,
        tokens=i32(10, 11, 12),
        positions=i64(0, 1, 2),
        next_tokens=i32(50),
        qsl=i32(0, 3),
        qel=i32(2),
        P=1,
        shift=False,
        out_len=4,
        total_input_tokens=2,
    )
    check_copy_expand(
        out,
        ids=[10, 11, 11, 50],
        pos=[0, 1, 2, 3],
        rej=[0, 0, 0, 0],
        msk=[0, 0, 0, 0],
        nti=[3],
        mapping=[S_IDX] * 3,
    )


@pytest.mark.parametrize("oracle", ORACLES)
def test_copy_expand_p0_rejected_beats_bonus(oracle):
    # Outside the production domain: P = 0, shift off, qsl = [0, 3], qe = 1.
    # nv = 2, total = 2 + 0 + (3 - 1 - 1) = 3. Slot j = 2 is both bonus (j == nv) and rejected
    # (j >= nv + P = 2): rejected wins -> pad 0, pos 0, rejected True; no new-token index.
    out = run_copy_expand(
        oracle,
        tokens=i32(10, 11, 12),
        positions=i64(5, 6, 7),
        next_tokens=i32(50),
        qsl=i32(0, 3),
        qel=i32(1),
        P=0,
        shift=False,
        out_len=4,
    )
    check_copy_expand(
        out,
        ids=[10, 11, 0, S_ID],
        pos=[5, 6, 0, S_POS],
        rej=[0, 0, 1, X],
        msk=[0, 0, 0, X],
        nti=[],
        mapping=[S_IDX] * 3,
    )


@pytest.mark.parametrize("oracle", ORACLES)
def test_copy_expand_out_of_bounds_write_raises(oracle):
    # T + R*P = 3 + 1 = 4 output slots needed, buffer has 3: IndexError, nothing written.
    with pytest.raises(IndexError):
        run_copy_expand(
            oracle,
            tokens=i32(10, 11, 12),
            positions=i64(0, 1, 2),
            next_tokens=i32(50),
            qsl=i32(0, 3),
            qel=i32(2),
            P=1,
            shift=False,
            out_len=3,
        )


# --------------------------------------------------------------------------------------------
# 2. eagle_prepare_inputs_padded
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("oracle", ORACLES)
def test_prepare_inputs_d0_and_d_positive(oracle):
    # cu (inclusive) = [2, 2, 5] -> d = [2, 0, 3]; valid = [2, 0, 4]; qsl = [0, 3, 4, 8].
    #   r0: d=2 > 0: rejected = 2 + 1 - 2 = 1; index = qsl[1] - 1 - 1 = 1
    #   r1: d=0 (prefill): rejected = 0;        index = qsl[2] - 1 - 0 = 3
    #   r2: d=3 > 0: rejected = 3 + 1 - 4 = 0; index = qsl[3] - 1 - 0 = 7
    # num_reqs = 3, buffers longer (padded launch): elements 3, 4 untouched; junk in inputs
    # past num_reqs is ignored.
    tis, nrej = sentinel(5, S_IDX), sentinel(5, S_IDX)
    oracle.eagle_prepare_inputs_padded(
        cu_num_draft_tokens=i32(2, 2, 5, 1000, -1000),
        valid_sampled_tokens_count=i32(2, 0, 4, 77, 77),
        query_start_loc=i32(0, 3, 4, 8, 9, 9),
        num_reqs=3,
        token_indices_to_sample=tis,
        num_rejected_tokens=nrej,
    )
    np.testing.assert_array_equal(tis, i32(1, 3, 7, S_IDX, S_IDX))
    np.testing.assert_array_equal(nrej, i32(1, 0, 0, S_IDX, S_IDX))


@pytest.mark.parametrize("oracle", ORACLES)
def test_prepare_inputs_discarded_with_drafts(oracle):
    # Outside the domain: r0 discarded (valid = 0) but d = 2: rejected = 2 + 1 - 0 = 3,
    # index = qsl[1] - 1 - 3 = -1 (no clamping).
    tis, nrej = sentinel(1, S_IDX), sentinel(1, S_IDX)
    oracle.eagle_prepare_inputs_padded(
        cu_num_draft_tokens=i32(2),
        valid_sampled_tokens_count=i32(0),
        query_start_loc=i32(0, 3),
        num_reqs=1,
        token_indices_to_sample=tis,
        num_rejected_tokens=nrej,
    )
    np.testing.assert_array_equal(tis, i32(-1))
    np.testing.assert_array_equal(nrej, i32(3))


@pytest.mark.parametrize("oracle", ORACLES)
def test_prepare_inputs_int32_wraparound(oracle):
    # d = cu[0] = 2**31 - 1 > 0, valid = -1 -> rejected = d + 1 - (-1) = 2**31 + 1 wraps to
    # -2**31 + 1; index = qsl[1] - 1 - rejected = 0 - 1 + 2**31 - 1 = 2**31 - 2.
    tis, nrej = sentinel(1, S_IDX), sentinel(1, S_IDX)
    oracle.eagle_prepare_inputs_padded(
        cu_num_draft_tokens=i32(2**31 - 1),
        valid_sampled_tokens_count=i32(-1),
        query_start_loc=i32(0, 0),
        num_reqs=1,
        token_indices_to_sample=tis,
        num_rejected_tokens=nrej,
    )
    np.testing.assert_array_equal(nrej, i32(-(2**31) + 1))
    np.testing.assert_array_equal(tis, i32(2**31 - 2))


# --------------------------------------------------------------------------------------------
# 3. eagle_prepare_next_token_padded
# --------------------------------------------------------------------------------------------


def run_next_token(oracle, *, sampled, discard, backup, vocab, S, num_reqs, block, out_len):
    nxt, cnt = sentinel(out_len, S_IDX), sentinel(out_len, S_IDX)
    ret = oracle.eagle_prepare_next_token_padded(
        sampled_token_ids=sampled,
        discard_request_mask=discard,
        backup_next_token_ids=backup,
        vocab_size=vocab,
        num_sampled_tokens_per_req=S,
        num_reqs=num_reqs,
        block_size_tokens=block,
        next_token_ids=nxt,
        valid_sampled_tokens_count=cnt,
    )
    assert ret is None
    assert nxt.dtype == np.int32 and cnt.dtype == np.int32
    return nxt, cnt


@pytest.mark.parametrize("oracle", ORACLES)
def test_next_token_rows(oracle):
    # vocab = 100, S = 4, BLOCK_SIZE_TOKENS = 4, stride 6 (columns 4, 5 are junk: 1, 2 are
    # valid ids that must be ignored). num_reqs = 5; mask/backup over-allocated to 7.
    #   r0 [5, 7, -1, -1]     valid 5, 7           -> count 2, next 7
    #   r1 discarded          (row is ignored)     -> count 0, next backup[1] = 71
    #   r2 [100, -1, -1, -1]  100 == vocab invalid -> count 0, next backup[2] = 72
    #   r3 [3, -5, 100, -1]   3 and -5 valid (negative != -1 is valid), 100 not
    #                                              -> count 2, next -5 (last valid column)
    #   r4 [-1, -1, -1, -1]   all -1               -> count 0, next backup[4] = 74
    # Output element 5 (>= num_reqs) keeps the sentinel.
    sampled = i32(
        5, 7, -1, -1, 1, 2,
        8, 9, 10, -1, 1, 2,
        100, -1, -1, -1, 1, 2,
        3, -5, 100, -1, 1, 2,
        -1, -1, -1, -1, 1, 2,
        4, 4, 4, 4, 1, 2,
    ).reshape(6, 6)  # fmt: skip
    discard = np.array([0, 1, 0, 0, 0, 1, 1], dtype=np.bool_)
    backup = i32(70, 71, 72, 73, 74, 75, 76)
    nxt, cnt = run_next_token(
        oracle, sampled=sampled, discard=discard, backup=backup,
        vocab=100, S=4, num_reqs=5, block=4, out_len=6,
    )  # fmt: skip
    np.testing.assert_array_equal(nxt, i32(7, 71, 72, -5, 74, S_IDX))
    np.testing.assert_array_equal(cnt, i32(2, 0, 0, 2, 0, S_IDX))


@pytest.mark.parametrize("oracle", ORACLES)
def test_next_token_block_smaller_than_S(oracle):
    # S = 4 but BLOCK_SIZE_TOKENS = 2: only columns 0, 1 are read.
    #   r0 [5, -1 | 8, 9]   -> count 1, next 5 (8, 9 ignored)
    #   r1 [-1, -1 | 8, 9]  -> count 0, next backup[1] = 61
    sampled = i32(5, -1, 8, 9, -1, -1, 8, 9).reshape(2, 4)
    nxt, cnt = run_next_token(
        oracle, sampled=sampled, discard=np.zeros(2, np.bool_), backup=i32(60, 61),
        vocab=100, S=4, num_reqs=2, block=2, out_len=2,
    )  # fmt: skip
    np.testing.assert_array_equal(nxt, i32(5, 61))
    np.testing.assert_array_equal(cnt, i32(1, 0))


@pytest.mark.parametrize("oracle", ORACLES)
def test_next_token_s0_uses_backup(oracle):
    # S = 0: no column is read -> count 0, next = backup.
    sampled = np.zeros((1, 1), dtype=np.int32)
    nxt, cnt = run_next_token(
        oracle, sampled=sampled, discard=np.zeros(1, np.bool_), backup=i32(42),
        vocab=100, S=0, num_reqs=1, block=1, out_len=1,
    )  # fmt: skip
    np.testing.assert_array_equal(nxt, i32(42))
    np.testing.assert_array_equal(cnt, i32(0))


def test_every_example_above_runs_on_both_oracles():
    """Each hand-worked example of this module is parametrized over both oracle modules (one
    checked alone could drift unseen), and the two modules offer the same functions."""
    import inspect
    import sys

    module = sys.modules[__name__]
    examples = [f for n, f in inspect.getmembers(module, inspect.isfunction)
                if n.startswith("test_") and f is not test_every_example_above_runs_on_both_oracles]
    assert len(examples) >= 10
    for f in examples:
        marks = [m for m in getattr(f, "pytestmark", []) if m.name == "parametrize" and m.args[0] == "oracle"]
        oracles = [p.values[0] for m in marks for p in m.args[1]]
        assert oracles == [vectorized, loops], f"{f.__name__} is not run on both oracles: {oracles}"
    assert set(vectorized.__all__) == set(loops.__all__)

