"""Numba oracles for the EAGLE helper kernels and the rejection sampler's kernels, written from
docs/CONTRACT.md §1-§3 and §6-§13.

Each kernel is a Numba function written as plain nested loops over requests and slots (an
:func:`~.entry.entry`: its inputs passed read-only), plus a thin Python wrapper with the same
keyword-only signature as the matching function of ``vectorized``. The wrappers turn Python
scalars into fixed-width NumPy scalars; the loop bodies cast explicitly (Numba ignores NEP 50):
int32 kernel values are computed exactly in int64 and wrapped with ``np.int32(...)`` wherever
the kernel would hold them as int32 (the flat indices into the rejection sampler's tables and
noise excepted: exact, docs/CONTRACT.md §11.1, §13.1), and every store has the destination
buffer's dtype.

Each njit function runs twice: a checking pass (``do_write=False``) that reports the first read
or write outside an array as an error code, then -- if there is none -- the writing pass. An
error becomes an ``IndexError`` in the wrapper, with the outputs untouched.
"""

from __future__ import annotations

import numba
import numpy as np

from .entry import entry

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


@entry("out_ids", "out_map", "out_msk", "out_nti", "out_pos", "out_rej")
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


@entry("out_idx", "out_rej")
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


@entry("out_count", "out_next")
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


@entry("out_cpos", "out_cslot", "out_ids", "out_qpos", "out_qslot", "out_tidx")
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


@entry("out_pos", "out_slot", "seq")
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


@entry("out")
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


@entry("accepted", "computed", "new_accepted", "new_computed")
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


# --------------------------------------------------------------------------------------------
# 10.-13. the rejection sampler's kernels: shared helpers
# --------------------------------------------------------------------------------------------

_NAN_SCORE = 1399  # sample_recovered_tokens: a NaN score, outside the contract (ValueError)


def _flat_out(buf, what: str) -> np.ndarray:
    if not buf.flags.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous: the kernel takes no strides")
    return buf.reshape(-1)


def _flat(arr, dtype=None) -> np.ndarray:
    a = np.ascontiguousarray(arr).reshape(-1)
    return a if dtype is None else a.astype(dtype)


def _widened(arr, name: str) -> np.ndarray:
    """float32/float64 -> float64, exact: the kernels compare these exactly."""
    a = _flat(arr)
    if a.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be float32 or float64, got {a.dtype}")
    return a.astype(np.float64)


def _f32_table(arr, name: str) -> np.ndarray:
    a = _flat(arr)
    if a.dtype != np.float32:
        raise TypeError(f"{name} must be float32 (the kernel's dtype), got {a.dtype}")
    return a


_NO_F64 = np.zeros(0, dtype=np.float64)
_NO_F32 = np.zeros(0, dtype=np.float32)
_NO_BOOL = np.zeros(0, dtype=np.bool_)
_NO_I64 = np.zeros(0, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# 10. rejection_greedy_sample_kernel
# --------------------------------------------------------------------------------------------

__all__ += ["rejection_greedy_sample"]
_ERRORS.update({
    1001: "is_greedy read",
    1002: "draft_token_ids read",
    1003: "target_argmax read",
    1004: "uniform_probs read",
    1005: "synthetic_conditional_rates read",
    1006: "bonus_token_ids read",
    1007: "output_token_ids write",
})  # fmt: skip


@entry("out")
def _greedy_loops(out, cu, draft, argmax, bonus, greedy, has_greedy, stride, synthetic, u, rates, do_write):
    B = cu.shape[0]
    for r in range(B):
        if has_greedy:
            if r >= greedy.shape[0]:
                return np.int64(1001), np.int64(r), np.int64(r)
            if not greedy[r]:
                continue
        s = np.int64(0) if r == 0 else np.int64(np.int32(cu[r - 1]))
        d = np.int64(np.int32(np.int64(np.int32(cu[r])) - s))
        rejected = False
        for j in range(d):
            t = np.int64(np.int32(s + j))
            if t < 0 or t >= draft.shape[0]:
                return np.int64(1002), np.int64(r), t
            if t >= argmax.shape[0]:
                return np.int64(1003), np.int64(r), t
            did = np.int64(draft[t])
            a = np.int64(np.int32(argmax[t]))
            if synthetic:
                if t >= u.shape[0]:
                    return np.int64(1004), np.int64(r), t
                if j >= rates.shape[0]:
                    return np.int64(1005), np.int64(r), np.int64(j)
                accepted = u[t] < rates[j] and did >= 0
                tok = did if accepted else a
            else:
                accepted = did == a
                tok = a
            o = np.int64(np.int32(np.int64(r) * stride + j))
            if o < 0 or o >= out.shape[0]:
                return np.int64(1007), np.int64(r), o
            if do_write:
                out[o] = np.int32(tok)
            if not accepted:
                rejected = True
                break
        if not rejected:
            if r >= bonus.shape[0]:
                return np.int64(1006), np.int64(r), np.int64(r)
            o = np.int64(np.int32(np.int64(r) * stride + d))
            if o < 0 or o >= out.shape[0]:
                return np.int64(1007), np.int64(r), o
            if do_write:
                out[o] = np.int32(bonus[r])
    return np.int64(0), np.int64(0), np.int64(0)


def rejection_greedy_sample(
    *,
    output_token_ids,
    cu_num_draft_tokens,
    draft_token_ids,
    target_argmax,
    bonus_token_ids,
    is_greedy,
    max_spec_len,
    uniform_probs=None,
    synthetic_conditional_rates=None,
) -> None:
    """docs/CONTRACT.md §10; same rules as ``vectorized.rejection_greedy_sample``: one request
    after another, one draft after another until the first rejection."""
    out = _flat_out(output_token_ids, "output_token_ids")
    stride = np.int64(_i32_exact(int(_i32_exact(max_spec_len, "max_spec_len")) + 1, "max_spec_len + 1"))
    synthetic = synthetic_conditional_rates is not None
    if synthetic and uniform_probs is None:
        raise ValueError("SYNTHETIC_MODE needs uniform_probs")
    args = (
        out, _flat(cu_num_draft_tokens, np.int64), _flat(draft_token_ids, np.int64),
        _flat(target_argmax, np.int64), _flat(bonus_token_ids, np.int64),
        _NO_BOOL if is_greedy is None else _flat(is_greedy, np.bool_), is_greedy is not None,
        stride, synthetic,
        _widened(uniform_probs, "uniform_probs") if synthetic else _NO_F64,
        _widened(synthetic_conditional_rates, "synthetic_conditional_rates") if synthetic else _NO_F64,
    )  # fmt: skip
    _raise_if_error(_greedy_loops(*args, False), "rejection_greedy_sample")
    _greedy_loops(*args, True)


# --------------------------------------------------------------------------------------------
# 11. rejection_random_sample_kernel
# --------------------------------------------------------------------------------------------

__all__ += ["rejection_random_sample"]
_ERRORS.update({
    1101: "is_greedy read",
    1102: "draft_token_ids read",
    1103: "uniform_probs read",
    1104: "synthetic_conditional_rates read",
    1105: "target_probs read",
    1106: "draft_probs read",
    1107: "recovered_token_ids read",
    1108: "bonus_token_ids read",
    1109: "output_token_ids write",
})  # fmt: skip


@entry("out")
def _random_loops(
    out, cu, draft, target, draftp, no_draft, bonus, recovered, u, greedy, stride, V,
    synthetic, rates, do_write,
):  # fmt: skip
    B = cu.shape[0]
    zero = np.float32(0.0)
    for r in range(B):
        if r >= greedy.shape[0]:
            return np.int64(1101), np.int64(r), np.int64(r)
        if greedy[r]:
            continue
        s = np.int64(0) if r == 0 else np.int64(np.int32(cu[r - 1]))
        d = np.int64(np.int32(np.int64(np.int32(cu[r])) - s))
        rejected = False
        for j in range(d):
            t = np.int64(np.int32(s + j))
            if t < 0 or t >= draft.shape[0]:
                return np.int64(1102), np.int64(r), t
            if t >= u.shape[0]:
                return np.int64(1103), np.int64(r), t
            did = np.int64(draft[t])
            accepted = False
            if did < 0:
                accepted = False
            elif synthetic:
                if j >= rates.shape[0]:
                    return np.int64(1104), np.int64(r), np.int64(j)
                accepted = u[t] < rates[j]
            else:
                k = t * V + did  # exact: the flat index never wraps (docs/CONTRACT.md §11.1)
                if k < 0 or k >= target.shape[0]:
                    return np.int64(1105), np.int64(r), k
                p = target[k]
                if no_draft:
                    accepted = np.float64(p) >= u[t]
                else:
                    if k >= draftp.shape[0]:
                        return np.int64(1106), np.int64(r), k
                    q = draftp[k]
                    if q > zero:
                        quotient = p / q  # float32 / float32: the correctly rounded float32
                        accepted = np.float64(quotient) >= u[t]
            if accepted:
                tok = did
            else:
                if t >= recovered.shape[0]:
                    return np.int64(1107), np.int64(r), t
                tok = np.int64(recovered[t])
            o = np.int64(np.int32(np.int64(r) * stride + j))
            if o < 0 or o >= out.shape[0]:
                return np.int64(1109), np.int64(r), o
            if do_write:
                out[o] = np.int32(tok)
            if not accepted:
                rejected = True
                break
        if not rejected:
            if r >= bonus.shape[0]:
                return np.int64(1108), np.int64(r), np.int64(r)
            o = np.int64(np.int32(np.int64(r) * stride + d))
            if o < 0 or o >= out.shape[0]:
                return np.int64(1109), np.int64(r), o
            if do_write:
                out[o] = np.int32(bonus[r])
    return np.int64(0), np.int64(0), np.int64(0)


def rejection_random_sample(
    *,
    output_token_ids,
    cu_num_draft_tokens,
    draft_token_ids,
    draft_probs,
    target_probs,
    bonus_token_ids,
    recovered_token_ids,
    uniform_probs,
    is_greedy,
    max_spec_len,
    vocab_size,
    synthetic_conditional_rates=None,
) -> None:
    """docs/CONTRACT.md §11; same rules as ``vectorized.rejection_random_sample``: one request
    after another, one draft after another until the first rejection."""
    out = _flat_out(output_token_ids, "output_token_ids")
    stride = np.int64(_i32_exact(int(_i32_exact(max_spec_len, "max_spec_len")) + 1, "max_spec_len + 1"))
    V = np.int64(_i32_exact(vocab_size, "vocab_size"))
    if is_greedy is None:
        raise ValueError("is_greedy is required: the kernel loads it unconditionally")
    synthetic = synthetic_conditional_rates is not None
    args = (
        out, _flat(cu_num_draft_tokens, np.int64), _flat(draft_token_ids, np.int64),
        _NO_F32 if synthetic else _f32_table(target_probs, "target_probs"),
        _NO_F32 if synthetic or draft_probs is None else _f32_table(draft_probs, "draft_probs"),
        draft_probs is None, _flat(bonus_token_ids, np.int64), _flat(recovered_token_ids, np.int64),
        _widened(uniform_probs, "uniform_probs"), _flat(is_greedy, np.bool_), stride, V, synthetic,
        _widened(synthetic_conditional_rates, "synthetic_conditional_rates") if synthetic else _NO_F64,
    )  # fmt: skip
    _raise_if_error(_random_loops(*args, False), "rejection_random_sample")
    _random_loops(*args, True)


# --------------------------------------------------------------------------------------------
# 12. expand_kernel
# --------------------------------------------------------------------------------------------

__all__ += ["expand"]
_ERRORS.update({1201: "cu_num_tokens read", 1202: "output write"})


@entry("out")
def _expand_float_loops(out, x, cu, frm, to, M, do_write):
    frm32 = np.float32(frm)  # int64 -> float32, round to nearest even
    to32 = np.float32(to)
    for r in range(x.shape[0]):
        if r >= cu.shape[0]:
            return np.int64(1201), np.int64(r), np.int64(r)
        s = np.int64(0) if r == 0 else np.int64(np.int32(cu[r - 1]))
        n = np.int64(np.int32(np.int64(np.int32(cu[r])) - s))
        val = to32 if x[r] == frm32 else x[r]
        for k in range(min(n, M)):
            o = np.int64(np.int32(s + k))
            if o < 0 or o >= out.shape[0]:
                return np.int64(1202), np.int64(r), o
            if do_write:
                out[o] = val
    return np.int64(0), np.int64(0), np.int64(0)


@entry("out")
def _expand_int_loops(out, x, cu, frm, to, M, do_write):
    for r in range(x.shape[0]):
        if r >= cu.shape[0]:
            return np.int64(1201), np.int64(r), np.int64(r)
        s = np.int64(0) if r == 0 else np.int64(np.int32(cu[r - 1]))
        n = np.int64(np.int32(np.int64(np.int32(cu[r])) - s))
        val = to if np.int64(x[r]) == frm else np.int64(x[r])
        for k in range(min(n, M)):
            o = np.int64(np.int32(s + k))
            if o < 0 or o >= out.shape[0]:
                return np.int64(1202), np.int64(r), o
            if do_write:
                out[o] = val  # truncated to the output's width on store
    return np.int64(0), np.int64(0), np.int64(0)


def expand(*, output, input, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=128) -> None:
    """docs/CONTRACT.md §12; same rules as ``vectorized.expand``: one request after another."""
    out = _flat_out(output, "output")
    x = _flat(input)
    if x.dtype not in (np.float32, np.int32, np.int64) or out.dtype != x.dtype:
        raise TypeError(f"expand: input and output must share a dtype of float32/int32/int64 ({x.dtype}, {out.dtype})")
    M = int(MAX_NUM_TOKENS)
    if M < 1 or M & (M - 1):
        raise ValueError(f"MAX_NUM_TOKENS={M} must be a power of two (tl.arange)")
    frm, to = int(replace_from), int(replace_to)
    for name, v in (("replace_from", frm), ("replace_to", to)):
        if not _I64_MIN <= v <= _I64_MAX:
            raise OverflowError(f"{name}={v} is outside int64 (Triton would pass it as uint64)")
    loops = _expand_float_loops if x.dtype == np.float32 else _expand_int_loops
    args = (out, x, _flat(cu_num_tokens, np.int64), np.int64(frm), np.int64(to), np.int64(M))
    _raise_if_error(loops(*args, False), "expand")
    loops(*args, True)


# --------------------------------------------------------------------------------------------
# 13. sample_recovered_tokens_kernel
# --------------------------------------------------------------------------------------------

__all__ += ["sample_recovered_tokens"]
_ERRORS.update({
    1301: "output_token_ids write",
    1302: "draft_token_ids read",
    1303: "inv_q read",
    1304: "target_probs read",
    1305: "draft_probs read",
})  # fmt: skip


@entry("out")
def _recovered_loops(out, cu, draft_ids, no_draft, target, draftp, iq, V, L, BS, do_write):
    zero = np.float32(0.0)
    for r in range(cu.shape[0]):
        s = np.int64(0) if r == 0 else np.int64(np.int32(cu[r - 1]))
        d = np.int64(np.int32(np.int64(np.int32(cu[r])) - s))
        for j in range(min(d, L)):  # program (r, j); positions j >= L have no program
            t = np.int64(np.int32(s + j))
            if t < 0 or t >= out.shape[0]:
                return np.int64(1301), np.int64(r), t
            did = np.int64(0)
            if no_draft:
                if t >= draft_ids.shape[0]:
                    return np.int64(1302), np.int64(r), t
                did = np.int64(draft_ids[t])
            best = -np.inf
            rid = np.int64(0)
            v0 = np.int64(0)
            while v0 < V:  # one tile of BS lanes; lanes past V score -inf
                tile_max = -np.inf
                tile_id = np.int64(0)
                for lane in range(BS):
                    v = v0 + lane
                    score = -np.inf
                    if v < V:
                        k = t * V + v  # exact flat indices (docs/CONTRACT.md §13.1)
                        kq = np.int64(r) * V + v
                        if kq < 0 or kq >= iq.shape[0]:
                            return np.int64(1303), np.int64(r), kq
                        if no_draft and v == did:
                            p = zero
                        else:
                            if k < 0 or k >= target.shape[0]:
                                return np.int64(1304), np.int64(r), k
                            if no_draft:
                                p = target[k]
                            else:
                                if k >= draftp.shape[0]:
                                    return np.int64(1305), np.int64(r), k
                                diff = target[k] - draftp[k]  # float32
                                p = diff if diff > zero else zero  # fmax(diff, 0): NaN -> 0
                        product = p * iq[kq]  # float32 * float32, or float32 * float64 in float64
                        if np.isnan(product):
                            return np.int64(_NAN_SCORE), np.int64(r), np.int64(v)
                        score = np.float64(product)  # exact; compared only
                    if lane == 0 or score > tile_max:  # the first lane of the tile's maximum
                        tile_max = score
                        tile_id = np.int64(lane)
                if tile_max > best:  # strictly greater: an equal later tile keeps the earlier
                    best = tile_max
                    rid = v0 + tile_id
                v0 += BS
            if do_write:
                out[t] = np.int32(min(rid, V - 1))
    return np.int64(0), np.int64(0), np.int64(0)


def sample_recovered_tokens(
    *,
    output_token_ids,
    cu_num_draft_tokens,
    draft_token_ids,
    draft_probs,
    target_probs,
    inv_q,
    vocab_size,
    max_spec_len,
    BLOCK_SIZE=8192,
) -> None:
    """docs/CONTRACT.md §13, tile by tile as the kernel runs: for each token, tiles of
    ``BLOCK_SIZE`` vocabulary entries, each tile's first maximum replacing the running one only
    when strictly greater. A NaN score raises ``ValueError`` (outside the contract)."""
    out = _flat_out(output_token_ids, "output_token_ids")
    L = np.int64(_i32_exact(max_spec_len, "max_spec_len"))
    V = np.int64(_i32_exact(vocab_size, "vocab_size"))
    bs = int(BLOCK_SIZE)
    if bs < 1 or bs & (bs - 1):
        raise ValueError(f"BLOCK_SIZE={bs} must be a power of two (tl.arange)")
    iq = _flat(inv_q)
    if iq.dtype not in (np.float32, np.float64):
        raise TypeError(f"inv_q must be float32 or float64 (USE_FP64_GUMBEL), got {iq.dtype}")
    no_draft = draft_probs is None
    args = (
        out, _flat(cu_num_draft_tokens, np.int64),
        _flat(draft_token_ids, np.int64) if no_draft else _NO_I64, no_draft,
        _f32_table(target_probs, "target_probs"),
        _NO_F32 if no_draft else _f32_table(draft_probs, "draft_probs"),
        iq, V, L, np.int64(bs),
    )  # fmt: skip
    err = _recovered_loops(*args, False)
    if int(err[0]) == _NAN_SCORE:
        raise ValueError(
            f"sample_recovered_tokens: a NaN score (request {int(err[1])}, token {int(err[2])}) "
            "is outside the contract (docs/CONTRACT.md §13.4)"
        )
    _raise_if_error(err, "sample_recovered_tokens")
    _recovered_loops(*args, True)
