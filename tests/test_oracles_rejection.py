"""The rejection sampler's oracles (docs/CONTRACT.md §10-§13): examples worked out by hand from
the contract, each checked against BOTH oracles, and the two oracles cross-checked on random
inputs, bit for bit.

Every output buffer starts filled with a sentinel, so an element the contract does not write
must still hold it afterwards. Floats are compared through their bits (``.view(np.int32)``).
"""

from __future__ import annotations

import numpy as np
import pytest

from eaglefuzz.oracles import loops, vectorized

ORACLES = [pytest.param(vectorized, id="vectorized"), pytest.param(loops, id="loops")]
S = -7777  # sentinel in id buffers
F32 = np.float32


def i32(*v):
    return np.array(v, dtype=np.int32)


def i64(*v):
    return np.array(v, dtype=np.int64)


def f32(*v):
    return np.array(v, dtype=np.float32)


def f64(*v):
    return np.array(v, dtype=np.float64)


def up(x):
    """The next value of ``x``'s dtype towards +inf."""
    return np.nextafter(x, type(x)(np.inf))


def down(x):
    return np.nextafter(x, type(x)(-np.inf))


def rows(out, width):
    return out.reshape(-1, width).tolist()


# --------------------------------------------------------------------------------------------
# 10. rejection_greedy_sample_kernel
# --------------------------------------------------------------------------------------------


def greedy(oracle, *, cu, draft, argmax, bonus, L, is_greedy=None, uniform=None, rates=None, out_len=None):
    B = len(cu)
    out = np.full(out_len or B * (L + 1), S, dtype=np.int32)
    ret = oracle.rejection_greedy_sample(
        output_token_ids=out, cu_num_draft_tokens=i32(*cu), draft_token_ids=i32(*draft),
        target_argmax=np.asarray(argmax, dtype=np.int64), bonus_token_ids=np.asarray(bonus).reshape(-1, 1),
        is_greedy=is_greedy, max_spec_len=L, uniform_probs=uniform, synthetic_conditional_rates=rates,
    )  # fmt: skip
    assert ret is None
    return out


@pytest.mark.parametrize("oracle", ORACLES)
def test_greedy_first_mismatch_no_drafts_and_all_accepted(oracle):
    # cu = [3, 3, 4]: r0 drafts t0..t2, r1 none, r2 t3. L = 3, rows of 4 slots.
    # r0: t0 5 == 5, t1 7 == 7, t2 9 != 2 -> rejected at j = 2: slots 0..2 = argmaxes, slot 3 untouched.
    # r1: no drafts -> bonus 60 at slot 0, slots 1..3 untouched.
    # r2: t3 4 == 4 -> accepted, bonus 70 at slot d = 1.
    out = greedy(oracle, cu=[3, 3, 4], draft=[5, 7, 9, 4], argmax=[5, 7, 2, 4], bonus=[50, 60, 70], L=3)
    assert rows(out, 4) == [[5, 7, 2, S], [60, S, S, S], [4, 70, S, S]]


@pytest.mark.parametrize("oracle", ORACLES)
def test_greedy_minus_one_draft_is_rejected_and_argmax_written(oracle):
    # r0: t0 3 == 3 accepted, t1 -1 != 8 rejected -> slot 1 = 8, no bonus.
    out = greedy(oracle, cu=[2], draft=[3, -1], argmax=[3, 8], bonus=[50], L=2)
    assert rows(out, 3) == [[3, 8, S]]


@pytest.mark.parametrize("oracle", ORACLES)
def test_greedy_non_greedy_rows_untouched_and_wider_rows(oracle):
    # is_greedy = [F, T]: row 0 untouched entirely (although its draft would be accepted);
    # L = 4 > max d (= 1): rows of 5 slots, r1 accepted -> bonus at slot 1.
    out = greedy(oracle, cu=[1, 2], draft=[3, 6], argmax=[3, 6], bonus=[50, 60], L=4, is_greedy=np.array([False, True]))
    assert rows(out, 5) == [[S] * 5, [6, 60, S, S, S]]


@pytest.mark.parametrize("oracle", ORACLES)
def test_greedy_int64_argmax_and_bonus_truncated_to_int32(oracle):
    # argmax 2**32 + 7 -> int32 7 == draft 7: accepted; bonus 2**32 + 11 -> 11; argmax -2**32 + 3 -> 3.
    out = greedy(oracle, cu=[1, 2], draft=[7, 4], argmax=[2**32 + 7, -(2**32) + 3], bonus=i64(2**32 + 11, 0), L=1)
    assert rows(out, 2) == [[7, 11], [3, S]]


@pytest.mark.parametrize("oracle", ORACLES)
def test_greedy_every_row_without_drafts(oracle):
    # vLLM's step without any draft: L = max d = 0, rows of one slot, each the bonus.
    out = greedy(oracle, cu=[0, 0, 0], draft=[], argmax=[], bonus=[1, 2, 3], L=0)
    assert out.tolist() == [1, 2, 3]


@pytest.mark.parametrize("oracle", ORACLES)
def test_greedy_synthetic_rates_strict_and_exact(oracle):
    # rates (float32) [0.5, 0.25]; the draft is never compared with the argmax (9).
    # r0: u 0.25 < 0.5 accept -> 3; u 0.25 < 0.25 false -> reject -> argmax 9.
    # r1: u = float64 just below float32(0.1) -> accepted (exact comparison), then u = float64(0.1f)
    #     < 0.1f is false -> rejected, argmax 9.
    # r2: a -1 draft with u = 0 < 1 is still rejected (negative draft) -> argmax 9.
    r01 = F32(0.1)
    uniform = f64(0.25, 0.25, down(np.float64(r01)), np.float64(r01), 0.0)
    rates = f32(0.5, 0.25)
    rates2 = np.array([r01, r01], dtype=np.float32)
    out = greedy(oracle, cu=[2], draft=[3, 4], argmax=[9, 9], bonus=[50], L=2, uniform=uniform[:2], rates=rates)
    assert rows(out, 3) == [[3, 9, S]]
    out = greedy(oracle, cu=[2], draft=[3, 4], argmax=[9, 9], bonus=[50], L=2, uniform=uniform[2:4], rates=rates2)
    assert rows(out, 3) == [[3, 9, S]]
    out = greedy(oracle, cu=[1], draft=[-1], argmax=[9], bonus=[50], L=1, uniform=uniform[4:], rates=f32(1.0))
    assert rows(out, 2) == [[9, S]]


@pytest.mark.parametrize("oracle", ORACLES)
def test_greedy_synthetic_nan_rejects(oracle):
    out = greedy(oracle, cu=[1, 2], draft=[3, 4], argmax=[9, 8], bonus=[50, 60], L=1, uniform=f64(np.nan, 0.1), rates=f32(np.nan))
    assert rows(out, 2) == [[9, S], [8, S]]


@pytest.mark.parametrize("oracle", ORACLES)
def test_greedy_extended_long_last_row_spills_past_its_row(oracle):
    # §10.4 extended tier: r1 has d = 3 > L = 1 and is the last row: flat slots 2, 3, 4 and the
    # bonus at slot 2 + 3 = 5, in a buffer of 7 elements.
    out = greedy(oracle, cu=[1, 4], draft=[5, 1, 2, 3], argmax=[6, 1, 2, 3], bonus=[50, 60], L=1, out_len=7)
    assert out.tolist() == [6, S, 1, 2, 3, 60, S]


@pytest.mark.parametrize("oracle", ORACLES)
def test_greedy_write_outside_output_raises(oracle):
    with pytest.raises(IndexError):
        greedy(oracle, cu=[2], draft=[1, 2], argmax=[1, 2], bonus=[50], L=1, out_len=2)  # bonus at slot 2


# --------------------------------------------------------------------------------------------
# 11. rejection_random_sample_kernel
# --------------------------------------------------------------------------------------------


def random_sample(oracle, *, cu, draft, target, draft_probs, uniform, recovered, bonus, L, is_greedy=None, rates=None, V=None):
    B = len(cu)
    target = np.asarray(target, dtype=np.float32)
    out = np.full(B * (L + 1), S, dtype=np.int32)
    oracle.rejection_random_sample(
        output_token_ids=out, cu_num_draft_tokens=i32(*cu), draft_token_ids=i32(*draft),
        draft_probs=None if draft_probs is None else np.asarray(draft_probs, dtype=np.float32),
        target_probs=target, bonus_token_ids=i32(*bonus).reshape(-1, 1), recovered_token_ids=i32(*recovered),
        uniform_probs=uniform, is_greedy=np.zeros(B, np.bool_) if is_greedy is None else is_greedy,
        max_spec_len=L, vocab_size=target.shape[-1] if V is None else V, synthetic_conditional_rates=rates,
    )  # fmt: skip
    return out


def one_draft(oracle, p, q, u, *, no_draft=False):
    """One request, one draft (id 1 of a 2-token vocabulary) with target p and draft q: the
    output row is [1, 50] when accepted (then the bonus), [77, S] when rejected (recovered)."""
    target = np.array([[0.0, p]], dtype=np.float32)
    draft = None if no_draft else np.array([[0.0, q]], dtype=np.float32)
    uniform = np.array([u], dtype=np.asarray(u).dtype if isinstance(u, np.floating) else np.float64)
    out = random_sample(oracle, cu=[1], draft=[1], target=target, draft_probs=draft, uniform=uniform, recovered=[77], bonus=[50], L=1)
    assert out.tolist() in ([1, 50], [77, S]), out.tolist()
    return out.tolist() == [1, 50]


@pytest.mark.parametrize("oracle", ORACLES)
def test_random_boundary_uniform_equal_to_the_float32_quotient(oracle):
    # q32 = float32(0.3f / 0.7f) = 0.42857146... (rounded up from the exact 0.4285714528...).
    p, q = F32(0.3), F32(0.7)
    q32 = p / q
    assert q32.dtype == np.float32 and np.float64(q32) > np.float64(p) / np.float64(q)
    assert one_draft(oracle, p, q, np.float64(q32))  # u == quotient: accepted
    assert not one_draft(oracle, p, q, up(np.float64(q32)))  # one float64 ulp above: rejected
    assert one_draft(oracle, p, q, down(np.float64(q32)))
    # u between the exact quotient and its float32 rounding: the float32 quotient accepts it
    # (a float64 division would reject it).
    assert one_draft(oracle, p, q, up(np.float64(p) / np.float64(q)))
    # float32 uniforms compare in float32, the same boundary.
    assert one_draft(oracle, p, q, q32)
    assert not one_draft(oracle, p, q, up(q32))


@pytest.mark.parametrize("oracle", ORACLES)
def test_random_ieee_edge_cases(oracle):
    assert not one_draft(oracle, F32(1.0), F32(0.0), 0.0)  # q = 0 rejects, even for u = 0
    assert not one_draft(oracle, F32(1.0), F32(-0.0), 0.0)
    assert not one_draft(oracle, F32(1.0), F32(-0.5), -1.0)  # q < 0 rejects
    assert not one_draft(oracle, F32(1.0), F32(np.nan), 0.0)
    assert one_draft(oracle, F32(0.5), F32(1e-45), 0.999)  # 0.5 / subnormal = +inf
    assert not one_draft(oracle, F32(np.nan), F32(0.5), 0.0)  # NaN quotient rejects
    assert not one_draft(oracle, F32(0.5), F32(0.5), np.nan)  # NaN uniform rejects
    assert one_draft(oracle, F32(0.0), F32(0.5), 0.0)  # p = 0 accepts u = 0 only
    assert not one_draft(oracle, F32(0.0), F32(0.5), 5e-324)
    assert one_draft(oracle, F32(0.3), F32(0.3), up(np.float64(0.999)))  # p = q: exactly 1


@pytest.mark.parametrize("oracle", ORACLES)
def test_random_no_draft_probs_is_target_against_uniform(oracle):
    assert one_draft(oracle, F32(0.5), None, 0.5, no_draft=True)
    assert not one_draft(oracle, F32(0.5), None, up(0.5), no_draft=True)
    assert not one_draft(oracle, F32(0.0), None, 5e-324, no_draft=True)


@pytest.mark.parametrize("oracle", ORACLES)
def test_random_minus_one_draft_rejected_without_reading_the_tables(oracle):
    # t0's draft is -1: rejected, recovered 77 written; its table read would be element -1
    # (out of bounds), so an oracle that read it would raise.
    target = f32(0.9, 0.1)
    out = random_sample(oracle, cu=[1], draft=[-1], target=target[None], draft_probs=f32(0.5, 0.5)[None],
                        uniform=f64(0.0), recovered=[77], bonus=[50], L=1)  # fmt: skip
    assert out.tolist() == [77, S]


@pytest.mark.parametrize("oracle", ORACLES)
def test_random_rows_greedy_untouched_mixed_counts(oracle):
    # Three requests: r0 greedy (untouched), r1 no drafts (bonus 61 at slot 0), r2 two drafts:
    # t0 id 0 p=0.6 q=0.3 -> ratio 2 >= 0.9 accept; t1 id 1 p=0.2 q=0.8 -> 0.25 < 0.5 reject -> 72.
    target = f32(0.6, 0.4, 0.8, 0.2).reshape(2, 2)
    draft = f32(0.3, 0.7, 0.2, 0.8).reshape(2, 2)
    out = random_sample(oracle, cu=[0, 0, 2], draft=[0, 1], target=target, draft_probs=draft, uniform=f64(0.9, 0.5),
                        recovered=[71, 72], bonus=[50, 61, 62], L=2, is_greedy=np.array([True, False, False]))  # fmt: skip
    assert rows(out, 3) == [[S, S, S], [61, S, S], [0, 72, S]]


@pytest.mark.parametrize("oracle", ORACLES)
def test_random_synthetic_mode(oracle):
    # accepted iff u < rates[j]; -1 rejected; the probability tables are not read (empty here).
    out = random_sample(oracle, cu=[2, 3], draft=[5, 6, -1], target=np.zeros((0, 8), np.float32), draft_probs=None,
                        uniform=f64(0.1, 0.5, 0.0), recovered=[71, 72, 73], bonus=[50, 60], L=2, rates=f32(0.2, 0.5), V=8)  # fmt: skip
    assert rows(out, 3) == [[5, 72, S], [73, S, S]]


# --------------------------------------------------------------------------------------------
# 12. expand_kernel
# --------------------------------------------------------------------------------------------


def expand(oracle, x, cu, frm, to, *, out_len=None, M=128):
    out_len = int(cu[-1]) if out_len is None else out_len
    sentinel = np.array([S]).astype(x.dtype) if x.dtype != np.float32 else f32(-7777.5)
    out = np.full(out_len, sentinel[0], dtype=x.dtype)
    oracle.expand(output=out, input=x, cu_num_tokens=i32(*cu), replace_from=frm, replace_to=to, MAX_NUM_TOKENS=M)
    return out


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.int32).tolist()


@pytest.mark.parametrize("oracle", ORACLES)
def test_expand_temperature_zero_becomes_one(oracle):
    # x = [0.0, 0.7, -0.0, nan], cu = [2, 3, 5, 6]: -0.0 equals 0 and is replaced; NaN stays NaN.
    out = expand(oracle, f32(0.0, 0.7, -0.0, np.nan), [2, 3, 5, 6], 0, 1)
    assert bits(out) == bits([1, 1, F32(0.7), 1, 1, np.nan])


@pytest.mark.parametrize("oracle", ORACLES)
def test_expand_negative_zero_replaced_by_positive_zero(oracle):
    out = expand(oracle, f32(-0.0, 0.5), [1, 2], 0, 0)
    assert bits(out) == bits([0.0, 0.5]) and bits(out)[0] == 0


@pytest.mark.parametrize("oracle", ORACLES)
def test_expand_int_values_empty_rows_and_tail(oracle):
    # top_k int32 [5, 0, 9]: 0 -> 0 (no change); r1 has no tokens; a 2-element tail stays untouched.
    out = expand(oracle, i32(5, 0, 9), [2, 2, 3], 0, 0, out_len=5)
    assert out.tolist() == [5, 5, 9, S, S]


@pytest.mark.parametrize("oracle", ORACLES)
def test_expand_rows_longer_than_max_num_tokens(oracle):
    # M = 2: a row of 3 tokens writes only its first 2.
    out = expand(oracle, i32(4, 8), [3, 4], 1, 1, M=2)
    assert out.tolist() == [4, 4, S, 8]


@pytest.mark.parametrize("oracle", ORACLES)
def test_expand_float32_rounding_and_int_truncation(oracle):
    # float32 data: replace_from 2**24 + 1 rounds to 2**24 and matches 16777216.0; replace_to
    # 2**24 + 1 is stored as 16777216.0. int32 data: replace_to 2**32 + 3 is stored as 3.
    out = expand(oracle, f32(16777216.0, 1.0), [1, 2], 2**24 + 1, 7)
    assert bits(out) == bits([7.0, 1.0])
    out = expand(oracle, f32(7.0), [1], 7, 2**24 + 1)
    assert bits(out) == bits([16777216.0])
    out = expand(oracle, i32(5, 6), [1, 2], 5, 2**32 + 3)
    assert out.tolist() == [3, 6]
    out = expand(oracle, i64(2**40, 6), [1, 2], 2**40, -(2**40))  # int64 data: exact
    assert out.tolist() == [-(2**40), 6]


# --------------------------------------------------------------------------------------------
# 13. sample_recovered_tokens_kernel
# --------------------------------------------------------------------------------------------


def recovered(oracle, target, *, draft_probs=None, draft_ids=None, inv_q=None, cu=None, L=None, BS=8192, V=None, out_len=None):
    target = np.asarray(target, dtype=np.float32)
    n, width = target.shape
    cu = [n] if cu is None else cu
    inv_q = np.ones((len(cu), width), np.float32) if inv_q is None else np.asarray(inv_q).reshape(len(cu), -1)
    out = np.full(n if out_len is None else out_len, S, dtype=np.int32)
    oracle.sample_recovered_tokens(
        output_token_ids=out, cu_num_draft_tokens=i32(*cu),
        draft_token_ids=i32(*([-1] * n if draft_ids is None else draft_ids)),  # -1 removes nothing
        draft_probs=None if draft_probs is None else np.asarray(draft_probs, np.float32).reshape(n, -1),
        target_probs=target, inv_q=inv_q, vocab_size=width if V is None else V,
        max_spec_len=max(np.diff([0, *cu]).max(), 0) if L is None else L, BLOCK_SIZE=BS,
    )  # fmt: skip
    return out


@pytest.mark.parametrize("oracle", ORACLES)
def test_recovered_all_zero_rows_give_token_zero(oracle):
    # NO_DRAFT_PROBS, all the target's mass on the draft token 2: every score 0 -> 0.
    assert recovered(oracle, [[0.0, 0.0, 1.0, 0.0]], draft_ids=[2]).tolist() == [0]
    # draft >= target everywhere: residual all 0 -> 0, whatever target[0] is (0 here).
    assert recovered(oracle, [[0.0, 0.5, 0.5]], draft_probs=[[0.0, 0.6, 0.5]]).tolist() == [0]


@pytest.mark.parametrize("oracle", ORACLES)
def test_recovered_draft_token_removed_without_draft_probs(oracle):
    # target [0.1, 0.6, 0.3] with draft id 1 removed: max at 2. A -1 draft removes nothing.
    assert recovered(oracle, [[0.1, 0.6, 0.3]], draft_ids=[1]).tolist() == [2]
    assert recovered(oracle, [[0.1, 0.6, 0.3]], draft_ids=[-1]).tolist() == [1]


@pytest.mark.parametrize("oracle", ORACLES)
def test_recovered_residual_and_nan_draft(oracle):
    # residual max(t - d, 0) = [0, 0.05 (0.25 - 0.2), 0.1 (0.5 - 0.4), 0] and a NaN draft at 3 -> 0.
    t = [[0.05, 0.25, 0.5, 0.2]]
    d = [[0.3, 0.2, 0.4, np.nan]]
    assert recovered(oracle, t, draft_probs=d).tolist() == [2]


@pytest.mark.parametrize("oracle", ORACLES)
def test_recovered_tiles_later_maximum_and_tie_across_tiles(oracle):
    # BLOCK_SIZE 2: tiles [0,1], [2,3], [4]. Scores [0.1, 0.2, 0.3, 0.9, 0.1]: the later tile wins (3).
    assert recovered(oracle, [[0.1, 0.2, 0.3, 0.9, 0.1]], BS=2).tolist() == [3]
    # [0.1, 0.5, 0.5, 0.5, 0.2]: the maximum ties across tiles 0 and 1: the earlier tile's first (1).
    assert recovered(oracle, [[0.1, 0.5, 0.5, 0.5, 0.2]], BS=2).tolist() == [1]
    # tie within a tile: the first index; the maximum in the last partial tile (index 4).
    assert recovered(oracle, [[0.5, 0.5, 0.1, 0.1, 0.6]], BS=4).tolist() == [4]
    assert recovered(oracle, [[0.7, 0.5, 0.7, 0.1]], BS=8192).tolist() == [0]


@pytest.mark.parametrize("oracle", ORACLES)
def test_recovered_inv_q_row_per_request_and_untouched_tokens(oracle):
    # Two requests: r0 tokens t0, t1 share inv_q's row 0 = [1, 2] -> 1 each; r1's t2 takes row
    # 1 = [3, 1] -> 0 (rows are per request, not per token).
    target = [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]
    inv_q = f32(1.0, 2.0, 3.0, 1.0)
    assert recovered(oracle, target, inv_q=inv_q, cu=[2, 3], L=2).tolist() == [1, 1, 0]
    # L = 1 < d_0 = 2 (the extended tier): t1 has no program and stays untouched.
    assert recovered(oracle, target, inv_q=inv_q, cu=[2, 3], L=1).tolist() == [1, S, 0]


@pytest.mark.parametrize("oracle", ORACLES)
def test_recovered_float32_products_and_fp64_gumbel(oracle):
    # float32: 1.0 * (1 + 2**-22) and (1 + 2**-23) * (1 + 2**-23) both round to 1 + 2**-22:
    # a tie -> 0 (the exact products differ by 2**-46 in favour of index 1).
    e22, e23 = 1 + 2.0**-22, 1 + 2.0**-23
    target = [[1.0, e23]]
    assert recovered(oracle, target, inv_q=f32(e22, e23)).tolist() == [0]
    # USE_FP64_GUMBEL: the products are exact in float64 -> 1.
    assert recovered(oracle, target, inv_q=f64(e22, e23)).tolist() == [1]
    # float64 noise that rounds to one float32 value still orders in float64.
    assert recovered(oracle, [[0.5, 0.5]], inv_q=f64(1 + 2.0**-30, 1 + 2.0**-29)).tolist() == [1]


@pytest.mark.parametrize("oracle", ORACLES)
def test_recovered_subnormal_inf_negative_and_all_minus_inf(oracle):
    assert recovered(oracle, [[0.0, 1e-45, 0.0]]).tolist() == [1]  # a subnormal beats 0
    assert recovered(oracle, [[0.5, 0.5, 0.5]], inv_q=f32(1.0, np.inf, np.inf)).tolist() == [1]  # inf ties: first
    assert recovered(oracle, [[0.5, 0.25]], inv_q=f32(-1.0, -1.0)).tolist() == [1]  # -0.25 > -0.5
    assert recovered(oracle, [[0.5, 0.5]], inv_q=f32(-np.inf, -np.inf)).tolist() == [0]  # all -inf -> 0


@pytest.mark.parametrize("oracle", ORACLES)
def test_recovered_vocab_zero_writes_minus_one(oracle):
    assert recovered(oracle, np.zeros((2, 0)), V=0).tolist() == [-1, -1]


@pytest.mark.parametrize("oracle", ORACLES)
def test_recovered_nan_score_is_outside_the_contract(oracle):
    with pytest.raises(ValueError, match="NaN score"):
        recovered(oracle, [[0.0, 0.5]], inv_q=f32(np.inf, 1.0))  # 0 * inf


# --------------------------------------------------------------------------------------------
# The two oracles agree on random inputs, bit for bit
# --------------------------------------------------------------------------------------------

SPECIAL = f32(0.0, -0.0, 1.0, 0.5, 0.25, 1e-45, 1e-40, 1.1754944e-38, np.inf, -1.0, np.nan, 3.0, 0.1)


def _ragged(rng):
    B = int(rng.integers(1, 9))
    d = rng.integers(0, int(rng.integers(0, 7)) + 1, size=B)
    if rng.random() < 0.1:
        d[:] = 0
    L = int(d.max()) + (int(rng.integers(1, 3)) if rng.random() < 0.25 else 0)
    return B, d, np.cumsum(d).astype(np.int32), L


def _draft_ids(rng, d, V):
    ids = rng.integers(0, V, size=int(d.sum())).astype(np.int32)
    start = 0
    for n in d:  # a -1 suffix in some requests, as vLLM pads them
        if n and rng.random() < 0.25:
            ids[start + n - int(rng.integers(1, n + 1)) : start + n] = -1
        start += n
    return ids


def _probs(rng, shape, special):
    x = rng.random(shape, dtype=np.float32)
    if special:
        mask = rng.random(shape) < 0.4
        x[mask] = rng.choice(SPECIAL, size=int(mask.sum()))
    return x


def _near(rng, base, dtype):
    """``base`` in ``dtype``, or one of its two neighbours."""
    b = np.asarray(base).astype(dtype)
    bump = rng.integers(-1, 2, size=b.shape)
    return np.where(bump > 0, np.nextafter(b, dtype(np.inf)), np.where(bump < 0, np.nextafter(b, dtype(-np.inf)), b)).astype(dtype)


def _greedy_case(rng):
    B, d, cu, L = _ragged(rng)
    n = int(cu[-1])
    draft = _draft_ids(rng, d, 40)
    argmax = np.where(rng.random(n) < 0.7, np.maximum(draft, 0), rng.integers(0, 40, size=n)).astype(np.int64)
    if rng.random() < 0.1:
        argmax += 2**32 * rng.integers(-1, 2, size=n)
    kw = dict(
        output_token_ids=np.full((B, L + 1), S, np.int32), cu_num_draft_tokens=cu, draft_token_ids=draft,
        target_argmax=argmax, bonus_token_ids=rng.integers(0, 40, size=(B, 1)).astype(np.int32),
        is_greedy=None if rng.random() < 0.4 else rng.random(B) < 0.6, max_spec_len=L,
    )  # fmt: skip
    if rng.random() < 0.4:
        rates = rng.random(max(L, 1), dtype=np.float32)
        j = np.concatenate([np.arange(k) for k in d])
        udt = np.float64 if rng.random() < 0.7 else np.float32
        kw.update(synthetic_conditional_rates=rates, uniform_probs=_near(rng, rates[np.minimum(j, rates.size - 1)], udt))
    return "rejection_greedy_sample", kw, "output_token_ids"


def _random_case(rng):
    B, d, cu, L = _ragged(rng)
    n, V = int(cu[-1]), int(rng.choice([1, 3, 8, 40]))
    draft = _draft_ids(rng, d, V)
    special = rng.random() < 0.5
    target = _probs(rng, (n, V), special)
    draft_probs = None if rng.random() < 0.3 else _probs(rng, (n, V), special)
    udt = np.float64 if rng.random() < 0.75 else np.float32
    uniform = rng.random(n).astype(udt)
    if rng.random() < 0.6:  # next to the quotient p / q at the draft token
        did = np.clip(draft, 0, V - 1)
        p = target[np.arange(n), did]
        q = F32(1) if draft_probs is None else draft_probs[np.arange(n), did]
        with np.errstate(all="ignore"):
            uniform = _near(rng, p / q, udt)
    kw = dict(
        output_token_ids=np.full((B, L + 1), S, np.int32), cu_num_draft_tokens=cu, draft_token_ids=draft,
        draft_probs=draft_probs, target_probs=target, bonus_token_ids=rng.integers(0, V, size=(B, 1)).astype(np.int32),
        recovered_token_ids=rng.integers(0, V, size=n).astype(np.int32), uniform_probs=uniform,
        is_greedy=rng.random(B) < 0.3, max_spec_len=L, vocab_size=V,
    )  # fmt: skip
    if rng.random() < 0.15:
        kw["synthetic_conditional_rates"] = rng.random(max(L, 1), dtype=np.float32)
    return "rejection_random_sample", kw, "output_token_ids"


def _expand_case(rng):
    B, d, cu, L = _ragged(rng)
    dtype = rng.choice([np.float32, np.int32, np.int64])
    pool = {np.float32: SPECIAL, np.int32: i32(0, 1, -1, 5, 2**31 - 1, -(2**31)), np.int64: i64(0, 1, -1, 2**40, -(2**62))}
    x = rng.choice(pool[dtype], size=B).astype(dtype)
    values = [0, 1, 5, -1, 2**24 + 1, 2**31 - 1, -(2**31), 2**32 + 3, 2**40]
    out = np.full(int(cu[-1]) + int(rng.integers(0, 3)), S, dtype=dtype)
    kw = dict(output=out, input=x, cu_num_tokens=cu, replace_from=int(rng.choice(values)), replace_to=int(rng.choice(values)),
              MAX_NUM_TOKENS=int(rng.choice([128, 1, 2, 4])))  # fmt: skip
    return "expand", kw, "output"


def _recovered_case(rng, V=None):
    B, d, cu, L = _ragged(rng)
    n = int(cu[-1])
    V = int(rng.choice([1, 2, 7, 16, 33, 300])) if V is None else V
    kind = rng.choice(["plain", "ties", "zeros", "special"])
    if kind == "ties":
        target = rng.choice(f32(0.0, 0.25, 0.5), size=(n, V))
    elif kind == "zeros":
        target = np.zeros((n, V), np.float32)
    else:
        target = _probs(rng, (n, V), kind == "special")
        target[np.isnan(target)] = 0.5
    draft_probs = None if rng.random() < 0.4 else (target.copy() if rng.random() < 0.2 else _probs(rng, (n, V), kind == "special"))
    inv_q = (1.0 / rng.exponential(size=(B, V))).astype(np.float64 if rng.random() < 0.3 else np.float32)
    if kind == "ties":
        inv_q[:] = 1
    kw = dict(
        output_token_ids=np.full(n, S, np.int32), cu_num_draft_tokens=cu, draft_token_ids=_draft_ids(rng, d, V),
        draft_probs=draft_probs, target_probs=target, inv_q=inv_q, vocab_size=V,
        max_spec_len=L if rng.random() < 0.9 else max(L - 1, 0), BLOCK_SIZE=int(rng.choice([1, 2, 4, 8, 16, 8192])),
    )  # fmt: skip
    return "sample_recovered_tokens", kw, "output_token_ids"


def _run(fn, kw, out_key):
    """Both oracles on copies of one case: (outputs or the exception type) of each."""
    results = []
    for oracle in (vectorized, loops):
        args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        try:
            getattr(oracle, fn)(**args)
            results.append(args[out_key])
        except (IndexError, ValueError) as exc:
            results.append(type(exc))
    return results


def _bits(a):
    return a.view(np.int32) if a.dtype == np.float32 else a


def _same(a, b) -> bool:
    """The same outcome: the same exception type, or outputs of one dtype with the same bits."""
    if isinstance(a, type) or isinstance(b, type):
        return a is b
    return a.dtype == b.dtype and np.array_equal(_bits(a), _bits(b))


@pytest.mark.parametrize("make", [_greedy_case, _random_case, _expand_case, _recovered_case])
def test_oracles_agree_on_random_cases(make):
    rng = np.random.default_rng(20230 + [_greedy_case, _random_case, _expand_case, _recovered_case].index(make))
    seen = {"cases": 0, "raised": 0, "written": 0}
    for _ in range(300):
        fn, kw, out_key = make(rng)
        before = kw[out_key].copy()
        a, b = _run(fn, kw, out_key)
        assert _same(a, b), (fn, kw)
        seen["cases"] += 1
        if isinstance(a, type):
            seen["raised"] += 1
        elif not np.array_equal(a.view(np.uint8), before.view(np.uint8)):
            seen["written"] += 1
    # The cases exercise the oracles: most write something, few are refused (NaN scores).
    assert seen["written"] >= 200 and seen["raised"] <= 30, seen


@pytest.mark.parametrize("oracle", ORACLES)
@pytest.mark.parametrize("udt", [np.float64, np.float32])
def test_near_boundary_uniforms_decide_both_ways(oracle, udt):
    """400 one-draft requests with u next to the float32 quotient: accepted exactly when
    ``u <= float32(p / q)`` (§11.1), and both outcomes occur."""
    rng = np.random.default_rng(3)
    n = 400
    p, q = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32) + F32(0.01)
    quotient = p / q
    u = _near(rng, quotient, udt)
    out = np.full((n, 2), S, np.int32)
    oracle.rejection_random_sample(
        output_token_ids=out, cu_num_draft_tokens=np.arange(1, n + 1, dtype=np.int32),
        draft_token_ids=np.zeros(n, np.int32), draft_probs=q[:, None], target_probs=p[:, None],
        bonus_token_ids=np.full((n, 1), 50, np.int32), recovered_token_ids=np.full(n, 77, np.int32),
        uniform_probs=u, is_greedy=np.zeros(n, np.bool_), max_spec_len=1, vocab_size=1,
    )  # fmt: skip
    accepted = quotient.astype(np.float64) >= u.astype(np.float64)
    np.testing.assert_array_equal(out, np.where(accepted[:, None], [[0, 50]], [[77, S]]))
    assert 100 <= accepted.sum() <= 300


def test_oracles_agree_on_a_large_vocabulary():
    """Several 8192-token tiles (V = 20000) and the default BLOCK_SIZE."""
    rng = np.random.default_rng(11)
    for _ in range(3):
        fn, kw, out_key = _recovered_case(rng, V=20000)
        kw["BLOCK_SIZE"] = 8192
        a, b = _run(fn, kw, out_key)
        assert _same(a, b)
