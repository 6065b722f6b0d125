"""NumPy oracles for the EAGLE helper kernels and the rejection sampler's kernels, written from
docs/CONTRACT.md §1-§3 and §6-§13.

One function per kernel, vectorised over requests and slots (``np.repeat`` / ``cumsum`` /
fancy indexing; no Python loop over either). Every function writes in place into the output
arrays it is given and returns ``None``; elements the contract leaves unwritten keep their value.

Integer semantics follow the GPU: index arithmetic is exact in int64 here and then wrapped to
int32 (two's complement) wherever the kernel would hold an int32 value that is compared,
clamped, used as an index or stored; positions wrap in their own integer width. The flat indices
into the rejection sampler's ``[num_tokens, V]`` tables and ``[B, V]`` noise are the exception:
the contract makes them exact (docs/CONTRACT.md §11.1, §13.1), since production steps pass
``2**31`` elements.

Every read and write is bounds-checked *before* anything is written: an access outside an array
raises ``IndexError`` (in-contract inputs never cause one), and the outputs are then untouched.
When two requests write the same element (possible only outside the contract), the later
request -- in (request, slot) order -- wins, like sequential program instances.
"""

from __future__ import annotations

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


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _wrap32(x):
    """Two's-complement int32 wrap of exact int64 values, returned as int64 for further math."""
    return np.asarray(x, dtype=np.int64).astype(np.int32).astype(np.int64)


def _scalar_wrap32(x) -> int:
    """Python int -> the int32 value a store into an int32 buffer would keep (truncation)."""
    return ((int(x) - _I32_MIN) % 2**32) + _I32_MIN


def _scalar_int32(x, name: str) -> int:
    """A count/size scalar the kernel holds as int32; refuse values it could not hold."""
    v = int(x)
    if not _I32_MIN <= v <= _I32_MAX:
        raise OverflowError(f"{name}={v} does not fit in int32")
    return v


def _check_len(arr, needed: int, what: str) -> None:
    """Reading/writing elements [0, needed) of a 1-D buffer requires len >= needed."""
    if needed > 0 and len(arr) < needed:
        raise IndexError(f"{what}: needs {needed} elements, buffer has {len(arr)}")


def _check_index(idx, n: int, what: str) -> None:
    """Every element of ``idx`` must lie in [0, n)."""
    idx = np.asarray(idx)
    bad = (idx < 0) | (idx >= n)
    if bad.any():
        raise IndexError(f"{what}: index {int(idx[bad][0])} outside [0, {n})")


def _check_ranges(start, count, n: int, what: str) -> None:
    """Each non-empty range [start, start + count) must lie in [0, n).

    With int32 start and 0 < count < 2**31 this is exactly "every int32-wrapped index
    start + j (j < count) is in bounds": a range that would overflow int32 wraps negative.
    """
    bad = (count > 0) & ((start < 0) | (start + count > n))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise IndexError(
            f"{what}: request {k} touches [{int(start[k])}, {int(start[k] + count[k])}), "
            f"outside [0, {n})"
        )


def _scatter(buf, idx, vals) -> None:
    """buf[idx] = vals where, for repeated indices, the LAST occurrence wins (deterministic)."""
    if idx.size == 0:
        return
    vals = np.asarray(vals).astype(buf.dtype)
    if _distinct(idx, buf.size):  # no index repeated: the order of the writes decides nothing
        buf[idx] = vals
        return
    uniq, first_in_reversed = np.unique(idx[::-1], return_index=True)
    buf[uniq] = vals[::-1][first_in_reversed]


def _distinct(idx, n: int) -> bool:
    """Whether the indices ``idx`` (into ``n`` elements) are all in ``[0, n)`` and none is
    repeated (counted in one pass over ``n`` flags, not sorted)."""
    if idx.size > n or int(idx.min()) < 0 or int(idx.max()) >= n:
        return False
    seen = np.zeros(n, dtype=np.bool_)
    seen[idx] = True
    return int(np.count_nonzero(seen)) == idx.size


def _segments(counts):
    """For per-request slot counts, (request of each slot, local slot index j), both int64."""
    counts = np.asarray(counts, dtype=np.int64)
    owner = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    seg_start = np.cumsum(counts) - counts
    j = np.arange(int(counts.sum()), dtype=np.int64) - seg_start[owner]
    return owner, j


# --------------------------------------------------------------------------------------------
# 1. copy_and_expand_eagle_inputs_kernel
# --------------------------------------------------------------------------------------------


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
    """docs/CONTRACT.md §1 (and §1.4's extended tier).

    Per request r (``qs, nqs = query_start_loc[r], query_start_loc[r+1]``, ``qe =
    query_end_loc[r]``, ``P`` padding slots, ``s = shift``)::

        nv        = qe - qs + 1 - s          valid slots
        out_start = qs + r*(P - s)
        total     = nv + P + (nqs - qe - 1)  slots j in [0, total) are written

    Slot ``j`` writes output element ``out_start + j``; regions, with precedence
    rejected > parallel > bonus > valid::

        rejected  j >= nv + P   id padding_token_id, position 0, rejected=True,  masked=False
        parallel  nv < j        id parallel_drafting_token_id,   rejected=False, masked=True
        bonus     j == nv       id next_token_ids[r],            rejected=False, masked=False
        valid     j < nv        id target_token_ids[min(qs + s + j, T - 1)], both masks False

    Non-rejected positions are ``p0 + j`` with ``p0 = target_positions[qs]`` (never shifted),
    computed with wrap-around in the positions' integer width. Bonus and parallel slots also
    write ``out_new_token_indices[r*P + (j - nv)] = out_start + j``. In shift mode only,
    ``out_hidden_state_mapping[qs + j] = out_start + j`` for ``0 <= j < nqs - qs``.
    Nothing else is written.

    ``slots_per_request`` (``num_blocks * BLOCK_SIZE_TOKENS``): the grid covers only slots
    ``j`` below it, for the slot outputs and the mapping alike; ``None``: every slot.
    """
    if not np.issubdtype(target_positions.dtype, np.integer):
        raise TypeError(f"target_positions must be integer, got {target_positions.dtype}")
    P = _scalar_int32(num_padding_slots_per_request, "num_padding_slots_per_request")
    T = _scalar_int32(total_input_tokens, "total_input_tokens")
    s = 1 if bool(shift_input_ids) else 0
    pad_id = _scalar_wrap32(padding_token_id)
    par_id = _scalar_wrap32(parallel_drafting_token_id)

    R = len(query_end_loc)
    if R == 0:
        return  # empty grid: nothing is read or written
    _check_len(query_start_loc, R + 1, "query_start_loc read")
    r = np.arange(R, dtype=np.int64)
    qs = query_start_loc[:R].astype(np.int64)
    nqs = query_start_loc[1 : R + 1].astype(np.int64)
    qe = query_end_loc.astype(np.int64)

    nv = _wrap32(qe - qs + 1 - s)
    out_start = _wrap32(qs + r * (P - s))
    total = _wrap32(nv + P + (nqs - qe - 1))
    nv_plus_p = _wrap32(nv + P)
    qlen = _wrap32(nqs - qs)
    n_slots = np.maximum(total, 0)
    covered = None if slots_per_request is None else max(int(slots_per_request), 0)
    if covered is not None:
        n_slots = np.minimum(n_slots, covered)

    # Output ranges first (bounded before any per-slot array is allocated).
    for buf, name in (
        (out_input_ids, "out_input_ids"),
        (out_positions, "out_positions"),
        (out_is_rejected_token_mask, "out_is_rejected_token_mask"),
        (out_is_masked_token_mask, "out_is_masked_token_mask"),
    ):
        _check_ranges(out_start, n_slots, len(buf), f"{name} write")
    n_map = np.maximum(qlen, 0) if s else np.zeros(R, dtype=np.int64)
    if covered is not None:
        n_map = np.minimum(n_map, covered)
    if s:
        _check_ranges(qs, n_map, len(out_hidden_state_mapping), "out_hidden_state_mapping write")

    # Per-slot view: request of each slot and local slot index j.
    req, j = _segments(n_slots)
    out_idx = _wrap32(out_start[req] + j)
    nvr, nvp = nv[req], nv_plus_p[req]
    rejected = j >= nvp
    parallel = ~rejected & (j > nvr)
    bonus = ~rejected & ~parallel & (j == nvr)
    valid = ~rejected & ~parallel & ~bonus  # j < nv
    new_tok = parallel | bonus

    # Reads, only where the result depends on them.
    in_idx = np.minimum(_wrap32(qs[req] + s + j), T - 1)[valid]
    _check_index(in_idx, len(target_token_ids), "target_token_ids read")
    _check_index(qs[req][~rejected], len(target_positions), "target_positions read (p0)")
    _check_index(req[bonus], len(next_token_ids), "next_token_ids read")
    nti_idx = _wrap32(req[new_tok] * P + (j[new_tok] - nvr[new_tok]))
    _check_index(nti_idx, len(out_new_token_indices), "out_new_token_indices write")

    # Values.
    ids = np.full(j.size, pad_id, dtype=np.int64)
    ids[parallel] = par_id
    ids[bonus] = next_token_ids[req[bonus]]
    ids[valid] = target_token_ids[in_idx]

    pos = np.zeros(j.size, dtype=np.int64)
    p0 = target_positions[qs[req][~rejected]].astype(np.int64)  # same bits, mod 2**width
    pos[~rejected] = p0 + j[~rejected]  # int64 array add wraps; astype below wraps narrower

    # Writes.
    _scatter(out_input_ids, out_idx, ids)
    _scatter(out_positions, out_idx, pos)
    _scatter(out_is_rejected_token_mask, out_idx, rejected)
    _scatter(out_is_masked_token_mask, out_idx, parallel)
    _scatter(out_new_token_indices, nti_idx, out_idx[new_tok])
    if s:
        mreq, mj = _segments(n_map)
        _scatter(out_hidden_state_mapping, _wrap32(qs[mreq] + mj), _wrap32(out_start[mreq] + mj))


# --------------------------------------------------------------------------------------------
# 2. eagle_prepare_inputs_padded_kernel
# --------------------------------------------------------------------------------------------


def eagle_prepare_inputs_padded(
    *,
    cu_num_draft_tokens,
    valid_sampled_tokens_count,
    query_start_loc,
    num_reqs,
    token_indices_to_sample,
    num_rejected_tokens,
) -> None:
    """docs/CONTRACT.md §2.

    For ``r < num_reqs`` only (nothing else is written), int32 wrap-around, no clamping::

        d        = cu[r] - cu[r-1]            (cu inclusive; cu[-1] taken as 0)
        rejected = d + 1 - valid[r] if d > 0 else 0
        token_indices_to_sample[r] = query_start_loc[r+1] - 1 - rejected
        num_rejected_tokens[r]     = rejected
    """
    n = int(num_reqs)
    if n <= 0:
        return
    _check_len(cu_num_draft_tokens, n, "cu_num_draft_tokens read")
    _check_len(valid_sampled_tokens_count, n, "valid_sampled_tokens_count read")
    _check_len(query_start_loc, n + 1, "query_start_loc read")
    _check_len(token_indices_to_sample, n, "token_indices_to_sample write")
    _check_len(num_rejected_tokens, n, "num_rejected_tokens write")

    cu = cu_num_draft_tokens[:n].astype(np.int64)
    cu_prev = np.concatenate([np.zeros(1, dtype=np.int64), cu[:-1]])
    d = _wrap32(cu - cu_prev)
    valid = valid_sampled_tokens_count[:n].astype(np.int64)
    rejected = np.where(d > 0, _wrap32(d + 1 - valid), 0)
    idx = _wrap32(query_start_loc[1 : n + 1].astype(np.int64) - 1 - rejected)

    token_indices_to_sample[:n] = idx.astype(token_indices_to_sample.dtype)
    num_rejected_tokens[:n] = rejected.astype(num_rejected_tokens.dtype)


# --------------------------------------------------------------------------------------------
# 3. eagle_prepare_next_token_padded_kernel
# --------------------------------------------------------------------------------------------


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
    """docs/CONTRACT.md §3, for ``r < num_reqs`` only.

    Row r's columns ``0 .. min(num_sampled_tokens_per_req, block_size_tokens) - 1`` are read.
    Discarded request: ``next = backup[r]``, ``count = 0``. Otherwise a column is valid when
    ``id != -1 and id < vocab_size`` (signed: other negative ids are valid); ``count`` = number
    of valid columns; ``next`` = id of the last valid column, or ``backup[r]`` if ``count == 0``.
    """
    n = int(num_reqs)
    if n <= 0:
        return
    ncols = max(0, min(int(num_sampled_tokens_per_req), int(block_size_tokens)))
    vocab = min(max(int(vocab_size), _I64_MIN), _I64_MAX)  # exact for int32 ids
    _check_len(discard_request_mask, n, "discard_request_mask read")
    _check_len(next_token_ids, n, "next_token_ids write")
    _check_len(valid_sampled_tokens_count, n, "valid_sampled_tokens_count write")

    discard = np.asarray(discard_request_mask[:n]).astype(np.bool_)
    kept = np.flatnonzero(~discard)  # discarded rows are not read at all
    if ncols > 0:
        _check_index(kept, sampled_token_ids.shape[0], "sampled_token_ids row read")
        if kept.size and ncols > sampled_token_ids.shape[1]:
            raise IndexError(
                f"sampled_token_ids read: {ncols} columns, rows have {sampled_token_ids.shape[1]}"
            )
        ids = sampled_token_ids[kept, :ncols].astype(np.int64)  # shape (len(kept), ncols)
    else:
        ids = np.zeros((kept.size, 0), dtype=np.int64)
    is_valid = (ids != -1) & (ids < vocab)
    count_kept = is_valid.sum(axis=1).astype(np.int64)
    if ncols > 0:
        last_col = ncols - 1 - np.argmax(is_valid[:, ::-1], axis=1)
        last_id = ids[np.arange(kept.size), last_col]
    else:
        last_id = np.zeros(kept.size, dtype=np.int64)

    count = np.zeros(n, dtype=np.int64)
    count[kept] = count_kept
    nxt = np.zeros(n, dtype=np.int64)
    nxt[kept] = last_id
    use_backup = discard.copy()
    use_backup[kept] = count_kept == 0
    backup_rows = np.flatnonzero(use_backup)
    _check_index(backup_rows, len(backup_next_token_ids), "backup_next_token_ids read")
    nxt[backup_rows] = backup_next_token_ids[backup_rows]

    next_token_ids[:n] = nxt.astype(next_token_ids.dtype)
    valid_sampled_tokens_count[:n] = count.astype(valid_sampled_tokens_count.dtype)


# --------------------------------------------------------------------------------------------
# 9. copy_and_expand_dflash_inputs_kernel
# --------------------------------------------------------------------------------------------

__all__ += ["copy_and_expand_dflash_inputs"]


def _trunc_divmod64(p, d: int):
    """``p // d`` and ``p % d`` with C (truncating) semantics, for int64 ``p`` and ``d > 0``."""
    p = np.asarray(p, dtype=np.int64)
    quot = np.abs(p) // d  # exact for |p| < 2**63
    quot = np.where(p < 0, -quot, quot).astype(np.int64)
    with np.errstate(over="ignore"):
        rem = (p - quot * d).astype(np.int64)
    return quot, rem


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
    """docs/CONTRACT.md §9 (the grid is assumed to cover every slot).

    ``num_rejected_tokens=None`` is the variant without rejected tokens (``HAS_NUM_REJECTED``
    off). ``block_table`` is read flat: row ``r`` starts at ``r * block_table_stride``. Per
    request r (``qs, nqs = query_start_loc[r], query_start_loc[r+1]``, ``rej`` rejected,
    ``Q = num_query_per_req``, ``K = num_speculative_tokens``)::

        slot(r, p) = block_table[r*W + min(p // bs, W - 1)] * bs + p % bs      (int64)
        context j < nqs - qs:  p = target_positions[min(qs + j, T - 1)]
                               out_context_positions[qs + j] = p, slot -> out_context_slot_mapping
        query q < Q:           p = target_positions[nqs - rej - 1] + 1 + q
                               out_query_positions[r*Q + q] = p, slot -> out_query_slot_mapping
                               out_input_ids[r*Q + q] = next_token_ids[r] if q == 0 else mask id
                               out_token_indices[r*K + q - 1] = r*Q + q     (q >= 1)
    """
    Q = _scalar_int32(num_query_per_req, "num_query_per_req")
    K = _scalar_int32(num_speculative_tokens, "num_speculative_tokens")
    W = _scalar_int32(block_table_stride, "block_table_stride")
    bs = _scalar_int32(block_size, "block_size")
    T = _scalar_int32(total_input_tokens, "total_input_tokens")
    mask_id = _scalar_wrap32(parallel_drafting_token_id)
    if bs <= 0:
        raise ZeroDivisionError(f"block_size={bs}: positions are divided by it")
    R = len(query_start_loc) - 1
    if R <= 0:
        return  # empty grid: nothing is read or written
    table = np.asarray(block_table).reshape(-1)
    r = np.arange(R, dtype=np.int64)
    qs = query_start_loc[:R].astype(np.int64)
    nqs = query_start_loc[1 : R + 1].astype(np.int64)
    qlen = _wrap32(nqs - qs)

    # Per-request reads every program makes: the rejected count, the last accepted position,
    # the bonus token.
    if num_rejected_tokens is not None:
        _check_len(num_rejected_tokens, R, "num_rejected_tokens read")
        rej = num_rejected_tokens[:R].astype(np.int64)
    else:
        rej = np.zeros(R, dtype=np.int64)
    last_idx = _wrap32(nqs - rej - 1)
    _check_index(last_idx, len(target_positions), "target_positions read (last accepted)")
    _check_len(next_token_ids, R, "next_token_ids read")
    last_pos = target_positions[last_idx].astype(np.int64)

    # Output ranges, bounded before any per-slot array is built.
    n_ctx = np.maximum(qlen, 0)
    for buf, name in ((out_context_positions, "out_context_positions"),
                      (out_context_slot_mapping, "out_context_slot_mapping")):  # fmt: skip
        _check_ranges(qs, n_ctx, len(buf), f"{name} write")
    n_query = max(Q, 0)
    q_start = _wrap32(r * Q)
    for buf, name in ((out_query_positions, "out_query_positions"),
                      (out_query_slot_mapping, "out_query_slot_mapping"),
                      (out_input_ids, "out_input_ids")):  # fmt: skip
        _check_ranges(q_start, np.full(R, n_query, dtype=np.int64), len(buf), f"{name} write")

    # Context slots.
    creq, j = _segments(n_ctx)
    c_out = _wrap32(qs[creq] + j)
    c_in = np.minimum(c_out, T - 1)
    _check_index(c_in, len(target_positions), "target_positions read (context)")
    c_pos = target_positions[c_in].astype(np.int64)

    # Query slots.
    qreq, q = _segments(np.full(R, n_query, dtype=np.int64))
    q_out = _wrap32(qreq * Q + q)
    with np.errstate(over="ignore"):
        q_pos = (last_pos[qreq] + (1 + q)).astype(np.int64)  # int64 wrap-around

    # Slot mapping of every position (context then query), through the clamped block number.
    def slots(req, pos):
        block, offset = _trunc_divmod64(pos, bs)
        idx = _wrap32(req * W) + np.minimum(block, W - 1)
        _check_index(idx, table.size, "block_table read")
        return table[idx].astype(np.int64) * bs + offset

    c_slot = slots(creq, c_pos)
    q_slot = slots(qreq, q_pos)

    # Token indices of the mask tokens (q >= 1).
    mask = q >= 1
    t_idx = _wrap32(qreq[mask] * K + q[mask] - 1)
    _check_index(t_idx, len(out_token_indices), "out_token_indices write")

    ids = np.where(q == 0, next_token_ids[qreq].astype(np.int64), mask_id)

    _scatter(out_context_positions, c_out, c_pos)
    _scatter(out_context_slot_mapping, c_out, c_slot)
    _scatter(out_query_positions, q_out, q_pos)
    _scatter(out_query_slot_mapping, q_out, q_slot)
    _scatter(out_input_ids, q_out, ids)
    _scatter(out_token_indices, t_idx, q_out[mask])


# --------------------------------------------------------------------------------------------
# 6. eagle_step_slot_mapping_metadata_kernel
# --------------------------------------------------------------------------------------------

__all__ += ["eagle_step_slot_mapping_metadata"]


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
    """docs/CONTRACT.md §6: one EAGLE draft step. ``seq_lens`` is updated in place.

    ``block_table`` is 2-D; its width is the row stride and only columns ``< n_blocks_per_req``
    are meant to be read (element ``r*width + c`` of the flat table, exactly as the kernel
    addresses it). Programs ``0 .. input_batch_size - 1``; program ``r < batch_size`` is
    request ``r``::

        p        = positions[r] + 1;  exceeds = p >= M
        clamped  = 0 if exceeds else p                          -> out_clamped_positions[r]
        c        = min(clamped // bs, n_blocks_per_req - 1)
        slot     = pad_id if exceeds else int32(table[r, c] * bs) + clamped % bs
                                                                -> out_slot_mapping[r]
        seq_lens[r] = 1 if exceeds else min(int32(seq_lens[r] + 1), M)

    and every other program ``r`` writes ``out_slot_mapping[r] = pad_id``. Everything is
    computed from the inputs as given before anything is written, so ``out_clamped_positions``
    may be ``positions`` itself.
    """
    bs = int(block_size)
    M = int(max_model_len)
    nb = int(n_blocks_per_req)
    if bs < 1:
        raise ValueError(f"block_size={bs} must be >= 1")
    n = max(0, min(int(batch_size), int(input_batch_size)))
    pads = np.arange(n, max(n, int(input_batch_size)), dtype=np.int64)
    table = np.asarray(block_table)
    if table.ndim != 2:
        raise ValueError("block_table must be 2-D")
    _check_len(positions, n, "positions read")
    _check_len(seq_lens, n, "seq_lens read")
    _check_len(out_clamped_positions, n, "out_clamped_positions write")
    _check_len(out_slot_mapping, n + pads.size, "out_slot_mapping write")

    r = np.arange(n, dtype=np.int64)
    p = positions[:n].astype(np.int64) + 1
    exceeds = p >= M
    clamped = np.where(exceeds, 0, p)
    col = np.minimum(clamped // bs, nb - 1)
    flat = r * table.shape[1] + col
    _check_index(flat, table.size, "block_table read")
    block = table.reshape(-1)[flat].astype(np.int64)
    slot = np.where(exceeds, int(pad_id), _wrap32(block * bs) + clamped % bs)
    seq = np.where(exceeds, 1, np.minimum(_wrap32(seq_lens[:n].astype(np.int64) + 1), M))

    out_clamped_positions[:n] = clamped.astype(out_clamped_positions.dtype)
    out_slot_mapping[:n] = slot.astype(out_slot_mapping.dtype)
    out_slot_mapping[pads] = int(pad_id)
    seq_lens[:n] = _wrap32(seq).astype(seq_lens.dtype)


# --------------------------------------------------------------------------------------------
# 7. compute_new_slot_mapping
# --------------------------------------------------------------------------------------------

__all__ += ["compute_new_slot_mapping"]


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
    """docs/CONTRACT.md §7: the new slot mapping, returned as a fresh int64 array.

    Requests own consecutive runs of ``qlen_r + N`` tokens from token 0 (``qlen`` from
    ``query_start_loc``); token ``t`` of request ``r`` with position ``p``, ``q = min(p, M-1)``::

        -1                                      if is_rejected_token_mask[t] or p >= M
        int32(table[r, q // bs] * bs) + q % bs  otherwise

    Every token's lookup (``r*nb + q // bs`` in the flat table) must lie inside the table.
    """
    table = np.asarray(block_table)
    if table.ndim != 2:
        raise ValueError("block_table must be 2-D")
    R, nb = table.shape
    bs, N, M = int(block_size), int(num_new_tokens), int(max_model_len)
    if bs < 1:
        raise ValueError(f"block_size={bs} must be >= 1")
    qsl = np.asarray(query_start_loc).astype(np.int64)
    if len(qsl) != R + 1:
        raise ValueError(f"query_start_loc has {len(qsl)} entries for {R} block-table rows")
    counts = np.diff(qsl) + N
    pos = np.asarray(new_positions).astype(np.int64)
    rejected = np.asarray(is_rejected_token_mask).astype(np.bool_)
    if np.any(counts < 0) or int(counts.sum()) != len(pos) or len(rejected) != len(pos):
        raise ValueError("new_positions and the mask need sum(qlen + num_new_tokens) entries")
    owner = np.repeat(np.arange(R, dtype=np.int64), counts)
    q = np.minimum(pos, M - 1)
    flat = owner * nb + q // bs
    _check_index(flat, table.size, "block_table read")
    block = table.reshape(-1)[flat].astype(np.int64)
    slot = _wrap32(block * bs) + q % bs
    slot[rejected | (pos >= M)] = -1
    return slot.astype(np.int64)


# --------------------------------------------------------------------------------------------
# 8. update_num_computed_tokens_for_batch_change
# --------------------------------------------------------------------------------------------

__all__ += ["update_num_computed_tokens_for_batch_change"]


def update_num_computed_tokens_for_batch_change(
    *,
    num_computed_tokens,
    num_accepted_tokens,
    prev_positions,
    valid_sampled_token_count,
    prev_num_draft_tokens,
    cpu_num_computed_tokens,
) -> None:
    """docs/CONTRACT.md §8, in place on ``num_computed_tokens`` and ``num_accepted_tokens``.

    For ``i < n = len(prev_positions)``, ``g = max(prev_positions[i], 0)``, every value read
    before anything is written::

        participating = prev_positions[i] >= 0 and prev_num_draft_tokens[g] > 0
        num_computed_tokens[i] = int32(num_computed_tokens[g] + valid[g]) if participating
                                 else cpu_num_computed_tokens[i]
        num_accepted_tokens[i] = valid[g] if participating (else unchanged)
    """
    prev = np.asarray(prev_positions).astype(np.int64)
    n = len(prev)
    if n == 0:
        return
    g = np.maximum(prev, 0)
    _check_index(g, len(valid_sampled_token_count), "valid_sampled_token_count read")
    _check_index(g, len(num_computed_tokens), "num_computed_tokens read")
    _check_index(g, len(prev_num_draft_tokens), "prev_num_draft_tokens read")
    _check_len(cpu_num_computed_tokens, n, "cpu_num_computed_tokens read")
    _check_len(num_computed_tokens, n, "num_computed_tokens write")
    _check_len(num_accepted_tokens, n, "num_accepted_tokens read/write")
    valid = valid_sampled_token_count[g].astype(np.int64)
    before = num_computed_tokens[g].astype(np.int64)  # a gather: a copy, taken before any write
    participating = (prev >= 0) & (prev_num_draft_tokens[g].astype(np.int64) > 0)
    computed = np.where(participating, _wrap32(before + valid), cpu_num_computed_tokens[:n].astype(np.int64))
    accepted = np.where(participating, valid, num_accepted_tokens[:n].astype(np.int64))
    num_computed_tokens[:n] = computed.astype(num_computed_tokens.dtype)
    num_accepted_tokens[:n] = accepted.astype(num_accepted_tokens.dtype)


# --------------------------------------------------------------------------------------------
# 10.-13. the rejection sampler's kernels: shared helpers
# --------------------------------------------------------------------------------------------

_RECOVERED_CHUNK = 1 << 22  # table elements per vectorised step of sample_recovered_tokens


def _flat_out(buf, what: str) -> np.ndarray:
    """A 1-D view of an output buffer (the kernels address it flat, without strides)."""
    if not buf.flags.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous: the kernel takes no strides")
    return buf.reshape(-1)


def _flat_in(arr) -> np.ndarray:
    """A 1-D view or copy of an input read flat (contiguous row-major, as the kernel reads it)."""
    return np.ascontiguousarray(arr).reshape(-1)


def _draft_rows(cu):
    """Per request (inclusive ``cu``): first token ``s_r`` and draft count ``d_r``, both int32
    values held in int64 (``s_0 = 0``; ``cu[-1]`` is never read)."""
    cu = _wrap32(np.asarray(cu))
    start = np.concatenate([np.zeros(min(1, cu.size), dtype=np.int64), cu[:-1]])
    return start, _wrap32(cu - start)


def _float_operand(arr, name: str) -> np.ndarray:
    """A float32 or float64 input widened to float64 (exact) for an exact comparison."""
    a = _flat_in(arr)
    if a.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be float32 or float64, got {a.dtype}")
    return a.astype(np.float64)


def _float32_table(arr, name: str) -> np.ndarray:
    a = _flat_in(arr)
    if a.dtype != np.float32:
        raise TypeError(f"{name} must be float32 (the kernel's dtype), got {a.dtype}")
    return a


def _visited(owner, rejected, nrows: int):
    """Positions a sequential loop visits: each row's positions up to its first rejection.

    ``owner`` (row of each position, non-decreasing) and ``rejected`` are per position, in
    row-major order. Returns (visited mask, per-row "some visited draft was rejected").
    """
    pos_idx = np.arange(owner.size, dtype=np.int64)
    first_rej = np.full(nrows, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_rej, owner[rejected], pos_idx[rejected])
    visited = pos_idx <= first_rej[owner]
    return visited, first_rej < np.iinfo(np.int64).max


def _row_writes(out, rows, stride, owner, j, vis, tok, bonus_rows, d, bonus_vals, what):
    """Write the visited positions' tokens and the bonus ids of ``bonus_rows``, in program
    order (row, then position, the bonus last); bounds-checked before anything is written."""
    w_idx = np.concatenate([_wrap32(rows[owner[vis]] * stride + j[vis]), _wrap32(bonus_rows * stride + d[bonus_rows])])
    w_val = np.concatenate([tok[vis], bonus_vals])
    key_row = np.concatenate([rows[owner[vis]], bonus_rows])
    key_seq = np.concatenate([j[vis], np.full(bonus_rows.size, np.iinfo(np.int64).max, dtype=np.int64)])
    _check_index(w_idx, out.size, f"{what} write")
    order = np.lexsort((key_seq, key_row))
    _scatter(out, w_idx[order], w_val[order])


def _greedy_rows(is_greedy, B: int, want: bool):
    """The requests a program processes: ``is_greedy[r] == want`` (all with ``None``)."""
    if is_greedy is None:
        return np.arange(B, dtype=np.int64)
    _check_len(is_greedy, B, "is_greedy read")
    return np.flatnonzero(np.asarray(is_greedy[:B]).astype(np.bool_) == want).astype(np.int64)


# --------------------------------------------------------------------------------------------
# 10. rejection_greedy_sample_kernel
# --------------------------------------------------------------------------------------------

__all__ += ["rejection_greedy_sample"]


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
    """docs/CONTRACT.md §10, in place on ``output_token_ids`` (addressed flat, rows
    ``max_spec_len + 1`` apart). ``synthetic_conditional_rates=None`` is ``SYNTHETIC_MODE`` off.

    Per processed request r (all with ``is_greedy=None``, else those with ``is_greedy[r]``),
    positions ``j < d_r`` up to the first rejection, ``a = int32(target_argmax[t])``::

        off:  out[r, j] = a;                  rejected iff draft[t] != a
        on:   accepted iff uniform[t] < rates[j] and draft[t] >= 0
              out[r, j] = draft[t] if accepted else a
        no rejection: out[r, d_r] = int32(bonus[r])
    """
    out = _flat_out(output_token_ids, "output_token_ids")
    L = _scalar_int32(max_spec_len, "max_spec_len")
    stride = _scalar_int32(L + 1, "max_spec_len + 1")
    synthetic = synthetic_conditional_rates is not None
    if synthetic and uniform_probs is None:
        raise ValueError("SYNTHETIC_MODE needs uniform_probs")
    B = len(cu_num_draft_tokens)
    if B == 0:
        return
    start, d = _draft_rows(cu_num_draft_tokens)
    rows = _greedy_rows(is_greedy, B, True)
    owner, j = _segments(np.maximum(d[rows], 0))
    t = _wrap32(start[rows][owner] + j)
    drafts, argmax = _flat_in(draft_token_ids), _flat_in(target_argmax)
    tc = np.clip(t, 0, None)  # gathers first; the positions actually visited are checked below
    did = drafts[np.minimum(tc, max(drafts.size - 1, 0))].astype(np.int64) if drafts.size else np.zeros(t.size, np.int64)
    a = _wrap32(argmax[np.minimum(tc, max(argmax.size - 1, 0))]) if argmax.size else np.zeros(t.size, np.int64)
    if synthetic:
        u = _float_operand(uniform_probs, "uniform_probs")
        c = _float_operand(synthetic_conditional_rates, "synthetic_conditional_rates")
        uu = u[np.minimum(tc, max(u.size - 1, 0))] if u.size else np.zeros(t.size)
        cc = c[np.minimum(j, max(c.size - 1, 0))] if c.size else np.zeros(t.size)
        accepted = (uu < cc) & (did >= 0)
        tok = np.where(accepted, did, a)
    else:
        accepted = did == a
        tok = a
    vis, row_rejected = _visited(owner, ~accepted, rows.size)
    _check_index(t[vis], drafts.size, "draft_token_ids read")
    _check_index(t[vis], argmax.size, "target_argmax read")
    if synthetic:
        _check_index(t[vis], u.size, "uniform_probs read")
        _check_index(j[vis], c.size, "synthetic_conditional_rates read")
    bonus_rows = rows[~row_rejected]
    bonus = _flat_in(bonus_token_ids)
    _check_index(bonus_rows, bonus.size, "bonus_token_ids read")
    _row_writes(
        out, rows, stride, owner, j, vis, tok, bonus_rows, d,
        _wrap32(bonus[bonus_rows]), "output_token_ids",
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# 11. rejection_random_sample_kernel
# --------------------------------------------------------------------------------------------

__all__ += ["rejection_random_sample"]


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
    """docs/CONTRACT.md §11, in place on ``output_token_ids`` (rows ``max_spec_len + 1``
    apart). ``draft_probs=None`` is ``NO_DRAFT_PROBS``; ``synthetic_conditional_rates=None`` is
    ``SYNTHETIC_MODE`` off. The tables are read flat, ``[t*V + id]``.

    Per request r with ``not is_greedy[r]``, positions ``j < d_r`` up to the first rejection,
    ``did = draft[t]``, ``u = uniform[t]``::

        did < 0:    rejected
        synthetic:  accepted iff u < rates[j]
        otherwise:  p = target[t*V + did], q = draft[t*V + did] (1 with NO_DRAFT_PROBS)
                    accepted iff q > 0 and float32(p / q) >= u   (an exact comparison)
        out[r, j] = did if accepted else recovered[t];  no rejection: out[r, d_r] = bonus[r]
    """
    out = _flat_out(output_token_ids, "output_token_ids")
    L = _scalar_int32(max_spec_len, "max_spec_len")
    stride = _scalar_int32(L + 1, "max_spec_len + 1")
    V = _scalar_int32(vocab_size, "vocab_size")
    if is_greedy is None:
        raise ValueError("is_greedy is required: the kernel loads it unconditionally")
    synthetic = synthetic_conditional_rates is not None
    B = len(cu_num_draft_tokens)
    if B == 0:
        return
    start, d = _draft_rows(cu_num_draft_tokens)
    rows = _greedy_rows(is_greedy, B, False)
    owner, j = _segments(np.maximum(d[rows], 0))
    t = _wrap32(start[rows][owner] + j)
    tc = np.clip(t, 0, None)
    drafts = _flat_in(draft_token_ids)
    u = _float_operand(uniform_probs, "uniform_probs")
    did = drafts[np.minimum(tc, max(drafts.size - 1, 0))].astype(np.int64) if drafts.size else np.zeros(t.size, np.int64)
    uu = u[np.minimum(tc, max(u.size - 1, 0))] if u.size else np.zeros(t.size)
    reads_probs = np.zeros(t.size, dtype=np.bool_)
    if synthetic:
        c = _float_operand(synthetic_conditional_rates, "synthetic_conditional_rates")
        cc = c[np.minimum(j, max(c.size - 1, 0))] if c.size else np.zeros(t.size)
        accepted = (did >= 0) & (uu < cc)
    else:
        target = _float32_table(target_probs, "target_probs")
        draft = None if draft_probs is None else _float32_table(draft_probs, "draft_probs")
        reads_probs = did >= 0
        idx = t * V + did  # exact (int64): the flat index never wraps (docs/CONTRACT.md §11.1)
        p = target[np.clip(idx, 0, max(target.size - 1, 0))] if target.size else np.zeros(t.size, np.float32)
        with np.errstate(all="ignore"):
            if draft is None:
                accepted = p.astype(np.float64) >= uu  # p / 1 == p
            else:
                q = draft[np.clip(idx, 0, max(draft.size - 1, 0))] if draft.size else np.zeros(t.size, np.float32)
                quotient = np.divide(p, q, dtype=np.float32)
                accepted = (q > np.float32(0)) & (quotient.astype(np.float64) >= uu)
        accepted &= reads_probs
    vis, row_rejected = _visited(owner, ~accepted, rows.size)
    _check_index(t[vis], drafts.size, "draft_token_ids read")
    _check_index(t[vis], u.size, "uniform_probs read")
    if synthetic:
        _check_index(j[vis & (did >= 0)], c.size, "synthetic_conditional_rates read")
    else:
        _check_index(idx[vis & reads_probs], target.size, "target_probs read")
        if draft is not None:
            _check_index(idx[vis & reads_probs], draft.size, "draft_probs read")
    recovered = _flat_in(recovered_token_ids)
    rej_pos = vis & ~accepted
    _check_index(t[rej_pos], recovered.size, "recovered_token_ids read")
    tok = did.copy()
    tok[rej_pos] = recovered[t[rej_pos]].astype(np.int64)
    bonus_rows = rows[~row_rejected]
    bonus = _flat_in(bonus_token_ids)
    _check_index(bonus_rows, bonus.size, "bonus_token_ids read")
    _row_writes(
        out, rows, stride, owner, j, vis, _wrap32(tok), bonus_rows, d,
        _wrap32(bonus[bonus_rows]), "output_token_ids",
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# 12. expand_kernel
# --------------------------------------------------------------------------------------------

__all__ += ["expand"]

_EXPAND_DTYPES = (np.float32, np.int32, np.int64)


def _promoted_int(x, name: str) -> int:
    """A Python int scalar argument of the kernel: int32 or int64 in Triton."""
    v = int(x)
    if not _I64_MIN <= v <= _I64_MAX:
        raise OverflowError(f"{name}={v} is outside int64 (Triton would pass it as uint64)")
    return v


def expand(*, output, input, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=128) -> None:
    """docs/CONTRACT.md §12, in place on ``output``: for ``r < len(input)``,
    ``x = replace_to if input[r] == replace_from else input[r]`` (float32 data: both ints rounded
    to float32 and compared in float32; integer data: exact, ``replace_to`` truncated to the
    data's width), stored at ``output[s_r + k]`` for ``k < min(n_r, MAX_NUM_TOKENS)``."""
    out = _flat_out(output, "output")
    x = _flat_in(input)
    if x.dtype not in _EXPAND_DTYPES or out.dtype != x.dtype:
        raise TypeError(f"expand: input and output must share a dtype of float32/int32/int64 ({x.dtype}, {out.dtype})")
    M = int(MAX_NUM_TOKENS)
    if M < 1 or M & (M - 1):
        raise ValueError(f"MAX_NUM_TOKENS={M} must be a power of two (tl.arange)")
    frm, to = _promoted_int(replace_from, "replace_from"), _promoted_int(replace_to, "replace_to")
    B = x.size
    if B == 0:
        return
    _check_len(cu_num_tokens, B, "cu_num_tokens read")
    start, n = _draft_rows(np.asarray(cu_num_tokens)[:B])
    if x.dtype == np.float32:
        frm32 = np.array([frm], dtype=np.int64).astype(np.float32)[0]
        to32 = np.array([to], dtype=np.int64).astype(np.float32)[0]
        vals = np.where(x == frm32, to32, x).astype(np.float32)
    else:
        to_w = np.array([to], dtype=np.int64).astype(x.dtype)[0]  # two's-complement truncation
        vals = np.where(x.astype(np.int64) == frm, to_w, x).astype(x.dtype)
    owner, k = _segments(np.clip(n, 0, M))
    idx = _wrap32(start[owner] + k)
    _check_index(idx, out.size, "output write")
    _scatter(out, idx, vals[owner])


# --------------------------------------------------------------------------------------------
# 13. sample_recovered_tokens_kernel
# --------------------------------------------------------------------------------------------


def _whole_rows(t, owner, V: int, target, draft, iq):
    """``(target, draft, inv_q)`` as ``[rows, V]`` views when every row the tokens ``t`` and
    requests ``owner`` read lies whole inside its table (production: always), else ``None``
    (the element-wise path then bounds-checks every read)."""
    tables = (target, draft, iq)
    if t.size == 0 or any(a is not None and a.size % V for a in tables):
        return None
    views = tuple(None if a is None else a.reshape(-1, V) for a in tables)
    if t.min() < 0 or owner.min() < 0 or t.max() >= views[0].shape[0] or owner.max() >= views[2].shape[0]:
        return None
    if views[1] is not None and t.max() >= views[1].shape[0]:
        return None
    return views


def _recovered_rows(rows, tt, rr, did, V: int) -> np.ndarray:
    """§13.1's result for tokens ``tt`` of requests ``rr`` from whole rows (``did``: the draft
    ids with ``NO_DRAFT_PROBS``, else ``None``)."""
    target, draft, iq = rows
    with np.errstate(all="ignore"):
        if draft is None:
            p = target[tt]
            inside = (did >= 0) & (did < V)
            p[np.flatnonzero(inside), did[inside]] = np.float32(0)
        else:
            p = np.fmax(target[tt] - draft[tt], np.float32(0))
        q = iq[rr]
        score = p * q if q.dtype == np.float32 else p.astype(np.float64) * q
    if np.isnan(score).any():
        raise ValueError("sample_recovered_tokens: a NaN score is outside the contract (docs/CONTRACT.md §13.4)")
    best = score.max(axis=1)
    return np.where(best > -np.inf, score.argmax(axis=1), 0)

__all__ += ["sample_recovered_tokens"]


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
    """docs/CONTRACT.md §13, in place on ``output_token_ids``; grid ``(B, max_spec_len)``.
    ``draft_probs=None`` is ``NO_DRAFT_PROBS``; a float64 ``inv_q`` is ``USE_FP64_GUMBEL``.

    For token ``t = s_r + j`` (``j < min(d_r, max_spec_len)``)::

        p_v = target[t*V + v] (0 at v = draft[t])        with NO_DRAFT_PROBS
            = fmax(target[t*V + v] - draft[t*V + v], 0)  otherwise          (float32)
        s_v = p_v * inv_q[r*V + v]       (float32, or float64(p_v) * inv_q in float64)
        out[t] = min(first index of max(s) if max(s) > -inf else 0, V - 1)

    computed over the whole vocabulary at once: the kernel's ``BLOCK_SIZE`` tiles give the same
    result (§13.1), so ``BLOCK_SIZE`` is only checked. A NaN score is outside the contract
    (§13.4) and raises ``ValueError``. Tokens are processed in chunks of at most
    ``_RECOVERED_CHUNK`` table elements.
    """
    out = _flat_out(output_token_ids, "output_token_ids")
    L = _scalar_int32(max_spec_len, "max_spec_len")
    V = _scalar_int32(vocab_size, "vocab_size")
    bs = int(BLOCK_SIZE)
    if bs < 1 or bs & (bs - 1):
        raise ValueError(f"BLOCK_SIZE={bs} must be a power of two (tl.arange)")
    target = _float32_table(target_probs, "target_probs")
    draft = None if draft_probs is None else _float32_table(draft_probs, "draft_probs")
    iq = _flat_in(inv_q)
    if iq.dtype not in (np.float32, np.float64):
        raise TypeError(f"inv_q must be float32 or float64 (USE_FP64_GUMBEL), got {iq.dtype}")
    B = len(cu_num_draft_tokens)
    if B == 0 or L <= 0:
        return
    start, d = _draft_rows(cu_num_draft_tokens)
    owner, j = _segments(np.clip(d, 0, L))
    t = _wrap32(start[owner] + j)
    _check_index(t, out.size, "output_token_ids write")
    if draft is None:
        drafts = _flat_in(draft_token_ids)
        _check_index(t, drafts.size, "draft_token_ids read")
        did = drafts[t].astype(np.int64)
    if V <= 0:
        _scatter(out, t, np.full(t.size, V - 1, dtype=np.int64))
        return
    result = np.empty(t.size, dtype=np.int64)
    v = np.arange(V, dtype=np.int64)
    step = max(1, _RECOVERED_CHUNK // V)
    rows = _whole_rows(t, owner, V, target, draft, iq)
    for c0 in range(0, t.size, step):  # chunks bound the memory; each chunk is vectorised
        tt, rr = t[c0 : c0 + step], owner[c0 : c0 + step]
        if rows is not None:  # every row read lies whole in its table: read rows, not elements
            result[c0 : c0 + step] = _recovered_rows(rows, tt, rr, None if draft is not None else did[c0 : c0 + step], V)
            continue
        idx = tt[:, None] * V + v[None, :]  # exact flat indices (docs/CONTRACT.md §13.1)
        iidx = rr[:, None] * V + v[None, :]
        _check_index(iidx, iq.size, "inv_q read")
        if draft is None:
            masked = v[None, :] == did[c0 : c0 + step, None]
            _check_index(idx[~masked], target.size, "target_probs read")
            src = target[np.clip(idx, 0, target.size - 1)] if target.size else np.zeros(idx.shape, np.float32)
            p = np.where(masked, np.float32(0), src).astype(np.float32)
        else:
            _check_index(idx, target.size, "target_probs read")
            _check_index(idx, draft.size, "draft_probs read")
            with np.errstate(all="ignore"):
                p = np.fmax(target[idx] - draft[idx], np.float32(0))
        with np.errstate(all="ignore"):
            score = p * iq[iidx] if iq.dtype == np.float32 else p.astype(np.float64) * iq[iidx]
        if np.isnan(score).any():
            raise ValueError("sample_recovered_tokens: a NaN score is outside the contract (docs/CONTRACT.md §13.4)")
        best = score.max(axis=1)
        result[c0 : c0 + step] = np.where(best > -np.inf, score.argmax(axis=1), 0)
    _scatter(out, t, np.minimum(result, V - 1))
