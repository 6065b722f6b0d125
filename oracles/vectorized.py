"""NumPy oracles for the EAGLE helper kernels, written from docs/CONTRACT.md §1-§3.

One function per kernel, vectorised over requests and slots (``np.repeat`` / ``cumsum`` /
fancy indexing; no Python loop over either). Every function writes in place into the output
arrays it is given and returns ``None``; elements the contract leaves unwritten keep their value.

Integer semantics follow the GPU: index arithmetic is exact in int64 here and then wrapped to
int32 (two's complement) wherever the kernel would hold an int32 value that is compared,
clamped, used as an index or stored; positions wrap in their own integer width.

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
    uniq, first_in_reversed = np.unique(idx[::-1], return_index=True)
    buf[uniq] = vals[::-1][first_in_reversed]


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
