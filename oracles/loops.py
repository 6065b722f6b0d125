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
