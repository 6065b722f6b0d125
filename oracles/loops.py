"""Numba oracles for the EAGLE helper kernels, written from docs/CONTRACT.md §1-§3.

Each kernel is a ``@numba.njit(cache=True)`` function written as plain nested loops over
requests and slots, plus a thin Python wrapper with the same keyword-only signature as the
matching function of ``vectorized``. The wrappers turn Python scalars into fixed-width NumPy
scalars; the loop bodies cast explicitly (Numba ignores NEP 50): int32 kernel values are
computed exactly in int64 and wrapped with ``np.int32(...)`` wherever the kernel would hold them
as int32, and every store has the destination buffer's dtype.

Each njit function runs twice: a checking pass (``do_write=False``) that reports the first read
or write outside an array as an error code, then -- if there is none -- the writing pass. An
error becomes an ``IndexError`` in the wrapper, with the outputs untouched.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = [
    "copy_and_expand_eagle_inputs",
    "eagle_prepare_inputs_padded",
    "eagle_prepare_next_token_padded",
]

_I32_MIN = -(2**31)
_I32_MAX = 2**31 - 1
_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1

# Error codes returned by the njit functions: (code, request, offending index).
_ERRORS = {
    1: "query_start_loc read",
    2: "out_input_ids write",
    3: "out_positions write",
    4: "out_is_rejected_token_mask write",
    5: "out_is_masked_token_mask write",
    6: "out_new_token_indices write",
    7: "out_hidden_state_mapping write",
    8: "target_token_ids read",
    9: "target_positions read (p0)",
    10: "next_token_ids read",
    11: "cu_num_draft_tokens read",
    12: "valid_sampled_tokens_count read",
    13: "token_indices_to_sample write",
    14: "num_rejected_tokens write",
    15: "discard_request_mask read",
    16: "sampled_token_ids read",
    17: "backup_next_token_ids read",
    18: "next_token_ids write",
    19: "valid_sampled_tokens_count write",
}


def _raise_if_error(err, kernel: str) -> None:
    code, r, idx = (int(v) for v in err)
    if code:
        raise IndexError(f"{kernel}: {_ERRORS[code]} out of bounds (request {r}, index {idx})")


def _i32_wrap(x) -> np.int32:
    """Python int -> the int32 value a store into an int32 buffer would keep (truncation)."""
    return np.int32(((int(x) - _I32_MIN) % 2**32) + _I32_MIN)


def _i32_exact(x, name: str) -> np.int32:
    v = int(x)
    if not _I32_MIN <= v <= _I32_MAX:
        raise OverflowError(f"{name}={v} does not fit in int32")
    return np.int32(v)


def _i64_clamped(x) -> np.int64:
    return np.int64(min(max(int(x), _I64_MIN), _I64_MAX))


# --------------------------------------------------------------------------------------------
# 1. copy_and_expand_eagle_inputs_kernel
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _copy_and_expand_loops(
    tok, pos64, next_tok, qsl, qel, pad_id, par_id, T, P, shift,
    out_ids, out_pos, out_rej, out_msk, out_nti, out_map, covered, do_write,
):  # fmt: skip
    R = qel.shape[0]
    s = np.int64(1) if shift else np.int64(0)
    if R > 0 and qsl.shape[0] < R + 1:
        return np.int64(1), np.int64(-1), np.int64(R)
    for r in range(R):
        qs = np.int64(qsl[r])
        nqs = np.int64(qsl[r + 1])
        qe = np.int64(qel[r])
        nv = np.int64(np.int32(qe - qs + 1 - s))
        out_start = np.int64(np.int32(qs + np.int64(r) * (np.int64(P) - s)))
        total = np.int64(np.int32(nv + np.int64(P) + (nqs - qe - 1)))
        nv_plus_p = np.int64(np.int32(nv + np.int64(P)))

        for j in range(min(total, covered)):  # empty when total <= 0; the grid's slots only
            o = np.int64(np.int32(out_start + j))
            if o < 0 or o >= out_ids.shape[0]:
                return np.int64(2), np.int64(r), o
            if o >= out_pos.shape[0]:
                return np.int64(3), np.int64(r), o
            if o >= out_rej.shape[0]:
                return np.int64(4), np.int64(r), o
            if o >= out_msk.shape[0]:
                return np.int64(5), np.int64(r), o

            if j >= nv_plus_p:  # rejected (takes precedence over everything)
                if do_write:
                    out_ids[o] = pad_id
                    out_pos[o] = 0
                    out_rej[o] = True
                    out_msk[o] = False
                continue

            if qs < 0 or qs >= pos64.shape[0]:
                return np.int64(9), np.int64(r), qs
            position = pos64[qs] + np.int64(j)  # int64 add wraps; the store truncates

            if j > nv:  # parallel drafting
                token = par_id
                masked = True
            elif j == nv:  # bonus
                if r >= next_tok.shape[0]:
                    return np.int64(10), np.int64(r), np.int64(r)
                token = np.int32(next_tok[r])
                masked = False
            else:  # valid
                i = np.int64(np.int32(qs + s + np.int64(j)))
                if i > np.int64(T) - 1:
                    i = np.int64(T) - 1
                if i < 0 or i >= tok.shape[0]:
                    return np.int64(8), np.int64(r), i
                token = np.int32(tok[i])
                masked = False

            if j >= nv:  # bonus or parallel: record the new token's output slot
                k = np.int64(np.int32(np.int64(r) * np.int64(P) + (np.int64(j) - nv)))
                if k < 0 or k >= out_nti.shape[0]:
                    return np.int64(6), np.int64(r), k
                if do_write:
                    out_nti[k] = np.int32(o)

            if do_write:
                out_ids[o] = token
                out_pos[o] = position
                out_rej[o] = False
                out_msk[o] = masked

        if shift:
            qlen = np.int64(np.int32(nqs - qs))
            for j in range(min(qlen, covered)):
                m = np.int64(np.int32(qs + np.int64(j)))
                if m < 0 or m >= out_map.shape[0]:
                    return np.int64(7), np.int64(r), m
                if do_write:
                    out_map[m] = np.int32(out_start + np.int64(j))
    return np.int64(0), np.int64(0), np.int64(0)


def copy_and_expand_eagle_inputs(
    *,
    target_token_ids,
    target_positions,
    next_token_ids,
    query_start_loc,
    query_end_loc,
    padding_token_id,
    parallel_drafting_token_id,
    total_input_tokens,
    num_padding_slots_per_request,
    shift_input_ids,
    out_input_ids,
    out_positions,
    out_is_rejected_token_mask,
    out_is_masked_token_mask,
    out_new_token_indices,
    out_hidden_state_mapping,
    slots_per_request=None,
) -> None:
    """docs/CONTRACT.md §1; same rules as ``vectorized.copy_and_expand_eagle_inputs``
    (``slots_per_request``: the grid covers slots ``j`` below it; ``None``: every slot)."""
    for a, name in ((target_positions, "target_positions"), (out_positions, "out_positions")):
        if not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"{name} must be integer, got {a.dtype}")
    # Same bits mod 2**64: p0 + j wraps in int64 and the store into out_positions truncates to
    # its width, which equals wrap-around arithmetic in the positions' own dtype.
    pos64 = target_positions.astype(np.int64, copy=False)
    args = (
        target_token_ids, pos64, next_token_ids, query_start_loc, query_end_loc,
        _i32_wrap(padding_token_id), _i32_wrap(parallel_drafting_token_id),
        _i32_exact(total_input_tokens, "total_input_tokens"),
        _i32_exact(num_padding_slots_per_request, "num_padding_slots_per_request"),
        np.bool_(bool(shift_input_ids)),
        out_input_ids, out_positions, out_is_rejected_token_mask, out_is_masked_token_mask,
        out_new_token_indices, out_hidden_state_mapping,
        np.int64(2**62 if slots_per_request is None else max(int(slots_per_request), 0)),
    )  # fmt: skip
    _raise_if_error(_copy_and_expand_loops(*args, False), "copy_and_expand_eagle_inputs")
    _copy_and_expand_loops(*args, True)


# --------------------------------------------------------------------------------------------
# 2. eagle_prepare_inputs_padded_kernel
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _prepare_inputs_loops(cu, valid, qsl, n, out_idx, out_rej, do_write):
    for r in range(n):
        if r >= cu.shape[0]:
            return np.int64(11), np.int64(r), np.int64(r)
        if r >= valid.shape[0]:
            return np.int64(12), np.int64(r), np.int64(r)
        if r + 1 >= qsl.shape[0]:
            return np.int64(1), np.int64(r), np.int64(r + 1)
        if r >= out_idx.shape[0]:
            return np.int64(13), np.int64(r), np.int64(r)
        if r >= out_rej.shape[0]:
            return np.int64(14), np.int64(r), np.int64(r)
        prev = np.int64(0)
        if r > 0:
            prev = np.int64(cu[r - 1])  # inclusive cumsum; cu[-1] taken as 0
        d = np.int32(np.int64(cu[r]) - prev)
        rejected = np.int32(0)
        if d > 0:
            rejected = np.int32(np.int64(d) + 1 - np.int64(valid[r]))
        if do_write:
            out_idx[r] = np.int32(np.int64(qsl[r + 1]) - 1 - np.int64(rejected))
            out_rej[r] = rejected
    return np.int64(0), np.int64(0), np.int64(0)


def eagle_prepare_inputs_padded(
    *,
    cu_num_draft_tokens,
    valid_sampled_tokens_count,
    query_start_loc,
    num_reqs,
    token_indices_to_sample,
    num_rejected_tokens,
) -> None:
    """docs/CONTRACT.md §2; same rules as ``vectorized.eagle_prepare_inputs_padded``."""
    args = (
        cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc,
        np.int64(int(num_reqs)), token_indices_to_sample, num_rejected_tokens,
    )  # fmt: skip
    _raise_if_error(_prepare_inputs_loops(*args, False), "eagle_prepare_inputs_padded")
    _prepare_inputs_loops(*args, True)


# --------------------------------------------------------------------------------------------
# 3. eagle_prepare_next_token_padded_kernel
# --------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _prepare_next_token_loops(
    sampled, discard, backup, vocab, ncols, n, out_next, out_count, do_write
):
    for r in range(n):
        if r >= discard.shape[0]:
            return np.int64(15), np.int64(r), np.int64(r)
        if r >= out_next.shape[0]:
            return np.int64(18), np.int64(r), np.int64(r)
        if r >= out_count.shape[0]:
            return np.int64(19), np.int64(r), np.int64(r)
        count = np.int32(0)
        last = np.int32(0)
        if not discard[r]:
            if ncols > 0 and (r >= sampled.shape[0] or ncols > sampled.shape[1]):
                return np.int64(16), np.int64(r), np.int64(ncols)
            for c in range(ncols):
                t = np.int32(sampled[r, c])
                if t != -1 and np.int64(t) < vocab:  # signed compare
                    count = np.int32(count + 1)
                    last = t
        if count == 0:  # discarded, or no valid column
            if r >= backup.shape[0]:
                return np.int64(17), np.int64(r), np.int64(r)
            last = np.int32(backup[r])
        if do_write:
            out_next[r] = last
            out_count[r] = count
    return np.int64(0), np.int64(0), np.int64(0)


def eagle_prepare_next_token_padded(
    *,
    sampled_token_ids,
    discard_request_mask,
    backup_next_token_ids,
    vocab_size,
    num_sampled_tokens_per_req,
    num_reqs,
    block_size_tokens,
    next_token_ids,
    valid_sampled_tokens_count,
) -> None:
    """docs/CONTRACT.md §3; same rules as ``vectorized.eagle_prepare_next_token_padded``."""
    ncols = max(0, min(int(num_sampled_tokens_per_req), int(block_size_tokens)))
    discard = np.asarray(discard_request_mask)
    if discard.dtype != np.bool_:
        discard = discard.astype(np.bool_)
    args = (
        sampled_token_ids, discard, backup_next_token_ids, _i64_clamped(vocab_size),
        np.int64(ncols), np.int64(int(num_reqs)), next_token_ids, valid_sampled_tokens_count,
    )  # fmt: skip
    _raise_if_error(_prepare_next_token_loops(*args, False), "eagle_prepare_next_token_padded")
    _prepare_next_token_loops(*args, True)


# --------------------------------------------------------------------------------------------
# 9. copy_and_expand_dflash_inputs_kernel
# --------------------------------------------------------------------------------------------

__all__ += ["copy_and_expand_dflash_inputs"]

# Error codes of _dflash_loops (its own table, so other sections' codes never collide).
_DFLASH_ERRORS = {
    1: "num_rejected_tokens read",
    2: "target_positions read (last accepted)",
    3: "next_token_ids read",
    4: "target_positions read (context)",
    5: "block_table read",
    6: "out_context_positions write",
    7: "out_context_slot_mapping write",
    8: "out_query_positions write",
    9: "out_query_slot_mapping write",
    10: "out_input_ids write",
    11: "out_token_indices write",
}


@numba.njit(cache=True)
def _trunc_div(p, d):
    """C (truncating) integer division of int64 ``p`` by ``d > 0``."""
    quot = (-p) // d if p < 0 else p // d
    return -quot if p < 0 else quot


@numba.njit(cache=True)
def _dflash_slot(table, r, W, bs, p):
    """(ok, slot) of position ``p`` in request ``r``: the clamped block number's entry."""
    block = _trunc_div(p, bs)
    if block > W - 1:
        block = W - 1
    i = np.int64(np.int32(r * W)) + block
    if i < 0 or i >= table.shape[0]:
        return False, i
    offset = p - _trunc_div(p, bs) * bs
    return True, np.int64(table[i]) * bs + offset


@numba.njit(cache=True)
def _dflash_loops(
    next_tok, pos, table, qsl, rej_arr, has_rej, mask_id, bs, Q, K, W, T,
    out_ids, out_cpos, out_qpos, out_cslot, out_qslot, out_tidx, do_write,
):  # fmt: skip
    R = qsl.shape[0] - 1
    for r in range(R):
        qs = np.int64(qsl[r])
        nqs = np.int64(qsl[r + 1])
        rej = np.int64(0)
        if has_rej:
            if r >= rej_arr.shape[0]:
                return np.int64(1), np.int64(r), np.int64(r)
            rej = np.int64(rej_arr[r])
        last = np.int64(np.int32(nqs - rej - 1))
        if last < 0 or last >= pos.shape[0]:
            return np.int64(2), np.int64(r), last
        if r >= next_tok.shape[0]:
            return np.int64(3), np.int64(r), np.int64(r)
        last_pos = np.int64(pos[last])

        # The context: positions copied (index clamped to T - 1), each with its slot.
        qlen = np.int64(np.int32(nqs - qs))
        for j in range(qlen):
            o = np.int64(np.int32(qs + j))
            i = o
            if i > T - 1:
                i = T - 1
            if i < 0 or i >= pos.shape[0]:
                return np.int64(4), np.int64(r), i
            p = np.int64(pos[i])
            ok, slot = _dflash_slot(table, np.int64(r), W, bs, p)
            if not ok:
                return np.int64(5), np.int64(r), slot
            if o < 0 or o >= out_cpos.shape[0]:
                return np.int64(6), np.int64(r), o
            if o >= out_cslot.shape[0]:
                return np.int64(7), np.int64(r), o
            if do_write:
                out_cpos[o] = p
                out_cslot[o] = slot

        # The query: Q slots after the last accepted position; bonus first, then mask tokens.
        for q in range(Q):
            o = np.int64(np.int32(np.int64(r) * Q + q))
            p = last_pos + np.int64(1 + q)  # int64, wraps at the limit
            ok, slot = _dflash_slot(table, np.int64(r), W, bs, p)
            if not ok:
                return np.int64(5), np.int64(r), slot
            if o < 0 or o >= out_qpos.shape[0]:
                return np.int64(8), np.int64(r), o
            if o >= out_qslot.shape[0]:
                return np.int64(9), np.int64(r), o
            if o >= out_ids.shape[0]:
                return np.int64(10), np.int64(r), o
            token = mask_id
            if q == 0:
                token = np.int32(next_tok[r])
            else:
                t = np.int64(np.int32(np.int64(r) * K + q - 1))
                if t < 0 or t >= out_tidx.shape[0]:
                    return np.int64(11), np.int64(r), t
                if do_write:
                    out_tidx[t] = np.int32(o)
            if do_write:
                out_qpos[o] = p
                out_qslot[o] = slot
                out_ids[o] = token
    return np.int64(0), np.int64(0), np.int64(0)


def copy_and_expand_dflash_inputs(
    *,
    next_token_ids,
    target_positions,
    block_table,
    block_table_stride,
    query_start_loc,
    num_rejected_tokens=None,
    parallel_drafting_token_id,
    block_size,
    num_query_per_req,
    num_speculative_tokens,
    total_input_tokens,
    out_input_ids,
    out_context_positions,
    out_query_positions,
    out_context_slot_mapping,
    out_query_slot_mapping,
    out_token_indices,
) -> None:
    """docs/CONTRACT.md §9; same rules as ``vectorized.copy_and_expand_dflash_inputs``."""
    bs = _i32_exact(block_size, "block_size")
    if bs <= 0:
        raise ZeroDivisionError(f"block_size={bs}: positions are divided by it")
    has_rej = num_rejected_tokens is not None
    rej = num_rejected_tokens if has_rej else np.zeros(0, dtype=np.int32)
    args = (
        next_token_ids, target_positions.astype(np.int64, copy=False),
        np.ascontiguousarray(block_table).reshape(-1), query_start_loc, rej, has_rej,
        _i32_wrap(parallel_drafting_token_id), np.int64(bs),
        np.int64(_i32_exact(num_query_per_req, "num_query_per_req")),
        np.int64(_i32_exact(num_speculative_tokens, "num_speculative_tokens")),
        np.int64(_i32_exact(block_table_stride, "block_table_stride")),
        np.int64(_i32_exact(total_input_tokens, "total_input_tokens")),
        out_input_ids, out_context_positions, out_query_positions,
        out_context_slot_mapping, out_query_slot_mapping, out_token_indices,
    )  # fmt: skip
    err = _dflash_loops(*args, False)
    code, r, idx = (int(v) for v in err)
    if code:
        raise IndexError(
            f"copy_and_expand_dflash_inputs: {_DFLASH_ERRORS[code]} out of bounds "
            f"(request {r}, index {idx})"
        )
    _dflash_loops(*args, True)


# --------------------------------------------------------------------------------------------
# 6. eagle_step_slot_mapping_metadata_kernel
# --------------------------------------------------------------------------------------------

__all__ += ["eagle_step_slot_mapping_metadata"]
_ERRORS.update({
    601: "positions read",
    602: "seq_lens read",
    603: "out_clamped_positions write",
    604: "out_slot_mapping write",
    605: "block_table read",
})  # fmt: skip


@numba.njit(cache=True)
def _eagle_step_loops(
    pos, table, nb, seq, bs, M, pad_id, batch, grid, out_pos, out_slot, do_write
):  # fmt: skip
    width = np.int64(table.shape[1])
    flat = table.reshape(-1)
    for r in range(grid):
        if r >= out_slot.shape[0]:
            return np.int64(604), np.int64(r), np.int64(r)
        if r >= batch:  # a cudagraph padding program
            if do_write:
                out_slot[r] = pad_id
            continue
        if r >= pos.shape[0]:
            return np.int64(601), np.int64(r), np.int64(r)
        if r >= seq.shape[0]:
            return np.int64(602), np.int64(r), np.int64(r)
        if r >= out_pos.shape[0]:
            return np.int64(603), np.int64(r), np.int64(r)
        p = np.int64(pos[r]) + 1
        exceeds = p >= M
        clamped = np.int64(0) if exceeds else p
        c = clamped // bs
        if c > nb - 1:
            c = nb - 1
        i = np.int64(r) * width + c
        if i < 0 or i >= flat.shape[0]:
            return np.int64(605), np.int64(r), i
        block = np.int64(flat[i])
        if exceeds:
            slot = pad_id
            new_seq = np.int64(1)
        else:
            slot = np.int64(np.int32(block * bs)) + clamped % bs
            new_seq = np.int64(np.int32(np.int64(seq[r]) + 1))
            if new_seq > M:
                new_seq = M
        if do_write:
            out_pos[r] = clamped
            out_slot[r] = slot
            seq[r] = np.int32(new_seq)
    return np.int64(0), np.int64(0), np.int64(0)


def eagle_step_slot_mapping_metadata(
    *,
    positions,
    block_table,
    n_blocks_per_req,
    seq_lens,
    block_size,
    max_model_len,
    pad_id,
    batch_size,
    input_batch_size,
    out_clamped_positions,
    out_slot_mapping,
) -> None:
    """docs/CONTRACT.md §6; same rules as ``vectorized.eagle_step_slot_mapping_metadata``.

    One program after another, each reading its request's inputs before writing its outputs,
    as the kernel does (so ``out_clamped_positions`` may be ``positions`` itself).
    """
    if int(block_size) < 1:
        raise ValueError(f"block_size={int(block_size)} must be >= 1")
    table = np.ascontiguousarray(block_table)
    if table.ndim != 2:
        raise ValueError("block_table must be 2-D")
    args = (
        positions, table, np.int64(int(n_blocks_per_req)), seq_lens,
        np.int64(int(block_size)), np.int64(int(max_model_len)), np.int64(int(pad_id)),
        np.int64(int(batch_size)), np.int64(max(0, int(input_batch_size))),
        out_clamped_positions, out_slot_mapping,
    )  # fmt: skip
    _raise_if_error(_eagle_step_loops(*args, False), "eagle_step_slot_mapping_metadata")
    _eagle_step_loops(*args, True)


# --------------------------------------------------------------------------------------------
# 7. compute_new_slot_mapping
# --------------------------------------------------------------------------------------------

__all__ += ["compute_new_slot_mapping"]
_ERRORS.update({701: "block_table read"})


@numba.njit(cache=True)
def _new_slot_mapping_loops(qsl, table, pos, rejected, bs, N, M, out):
    R = table.shape[0]
    nb = np.int64(table.shape[1])
    flat = table.reshape(-1)
    t = 0
    for r in range(R):
        count = np.int64(qsl[r + 1]) - np.int64(qsl[r]) + N
        for _ in range(count):
            p = np.int64(pos[t])
            q = p if p < M - 1 else M - 1
            i = np.int64(r) * nb + q // bs
            if i < 0 or i >= flat.shape[0]:
                return np.int64(701), np.int64(r), i
            if rejected[t] or p >= M:
                out[t] = -1
            else:
                out[t] = np.int64(np.int32(np.int64(flat[i]) * bs)) + q % bs
            t += 1
    return np.int64(0), np.int64(0), np.int64(0)


def compute_new_slot_mapping(
    *,
    query_start_loc,
    block_table,
    new_positions,
    is_rejected_token_mask,
    block_size,
    num_new_tokens,
    max_model_len,
) -> np.ndarray:
    """docs/CONTRACT.md §7; same rules as ``vectorized.compute_new_slot_mapping``: one
    request after another, one token after another."""
    table = np.ascontiguousarray(block_table)
    if table.ndim != 2:
        raise ValueError("block_table must be 2-D")
    if int(block_size) < 1:
        raise ValueError(f"block_size={int(block_size)} must be >= 1")
    qsl = np.asarray(query_start_loc, dtype=np.int64)
    if len(qsl) != table.shape[0] + 1:
        raise ValueError(f"query_start_loc has {len(qsl)} entries for {table.shape[0]} block-table rows")
    pos = np.asarray(new_positions, dtype=np.int64)
    rejected = np.asarray(is_rejected_token_mask).astype(np.bool_)
    N = int(num_new_tokens)
    total = sum(int(qsl[r + 1] - qsl[r]) + N for r in range(table.shape[0]))
    if any(int(qsl[r + 1] - qsl[r]) + N < 0 for r in range(table.shape[0])) or total != len(pos) or len(rejected) != len(pos):
        raise ValueError("new_positions and the mask need sum(qlen + num_new_tokens) entries")
    out = np.zeros(len(pos), dtype=np.int64)
    err = _new_slot_mapping_loops(
        qsl, table, pos, rejected, np.int64(int(block_size)), np.int64(N), np.int64(int(max_model_len)), out
    )
    _raise_if_error(err, "compute_new_slot_mapping")
    return out


# --------------------------------------------------------------------------------------------
# 8. update_num_computed_tokens_for_batch_change
# --------------------------------------------------------------------------------------------

__all__ += ["update_num_computed_tokens_for_batch_change"]
_ERRORS.update({
    801: "valid_sampled_token_count read",
    802: "num_computed_tokens read",
    803: "prev_num_draft_tokens read",
    804: "cpu_num_computed_tokens read",
    805: "num_computed_tokens write",
    806: "num_accepted_tokens read/write",
})  # fmt: skip


@numba.njit(cache=True)
def _batch_change_loops(computed, accepted, prev, valid, drafts, cpu, new_computed, new_accepted):
    n = prev.shape[0]
    for i in range(n):  # pass 1: every read, from the values before the call
        g = prev[i] if prev[i] > 0 else np.int64(0)
        if g >= valid.shape[0]:
            return np.int64(801), np.int64(i), g
        if g >= computed.shape[0]:
            return np.int64(802), np.int64(i), g
        if g >= drafts.shape[0]:
            return np.int64(803), np.int64(i), g
        if i >= cpu.shape[0]:
            return np.int64(804), np.int64(i), np.int64(i)
        if i >= computed.shape[0]:
            return np.int64(805), np.int64(i), np.int64(i)
        if i >= accepted.shape[0]:
            return np.int64(806), np.int64(i), np.int64(i)
        if prev[i] >= 0 and drafts[g] > 0:
            new_computed[i] = np.int32(np.int64(computed[g]) + np.int64(valid[g]))
            new_accepted[i] = np.int32(valid[g])
        else:
            new_computed[i] = np.int32(cpu[i])
            new_accepted[i] = np.int32(accepted[i])
    for i in range(n):  # pass 2: the writes
        computed[i] = new_computed[i]
        accepted[i] = new_accepted[i]
    return np.int64(0), np.int64(0), np.int64(0)


def update_num_computed_tokens_for_batch_change(
    *,
    num_computed_tokens,
    num_accepted_tokens,
    prev_positions,
    valid_sampled_token_count,
    prev_num_draft_tokens,
    cpu_num_computed_tokens,
) -> None:
    """docs/CONTRACT.md §8; same rules as the vectorised oracle: one request after another
    computes its new values from the buffers as they were, then every row is written."""
    prev = np.asarray(prev_positions, dtype=np.int64)
    n = len(prev)
    new_computed = np.zeros(n, dtype=np.int32)
    new_accepted = np.zeros(n, dtype=np.int32)
    err = _batch_change_loops(
        num_computed_tokens, num_accepted_tokens, prev, valid_sampled_token_count,
        prev_num_draft_tokens, cpu_num_computed_tokens, new_computed, new_accepted,
    )  # fmt: skip
    _raise_if_error(err, "update_num_computed_tokens_for_batch_change")
