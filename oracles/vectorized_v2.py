"""NumPy oracles of Model Runner V2's input and bookkeeping kernels, written from
docs/CONTRACT.md §14-§27.

One function per kernel, vectorised over batch rows and tokens (``np.repeat`` / cumulative
sums / fancy indexing; a loop over KV-cache groups at most). Every function writes in place
into the buffers it is given (the outputs and the buffers a kernel updates) and returns
``None``; elements the contract leaves unwritten keep their value.

Conventions (docs/CONTRACT.md, "Model Runner V2"):

* a 2-D array is addressed as the kernel addresses it: element ``(r, c)`` is flat element
  ``r * width + c``, the array's width standing for the launch's row stride;
* integer arithmetic is exact in int64 here and wrapped to int32 wherever the kernel holds an
  int32 value; a value stored into a narrower buffer is truncated;
* every read and write is bounds-checked before anything is written: an access outside a
  buffer raises ``IndexError`` and the buffers are then untouched;
* where two writes hit one element (only outside the contract's tiers) the later one in
  program order wins, as with programs run one after another.
"""

from __future__ import annotations

import numpy as np

from .vectorized import _check_index, _check_len, _scatter, _segments, _wrap32

__all__ = [
    "combine_sampled_and_draft_tokens",
    "compute_slot_mappings",
    "expand_idx_mapping",
    "flatten_sampled",
    "gather_block_tables",
    "gather_draft_sampled",
    "get_num_sampled_and_rejected",
    "input_batch_prepare_prefill_inputs",
    "post_update",
    "post_update_num_computed_tokens",
    "prepare_decode_inputs",
    "prepare_pos_seq_lens",
    "target_dependent_ar_prepare_prefill_inputs",
    "update_draft_inputs",
]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _flat(buf, what: str) -> np.ndarray:
    """A 1-D view of a buffer the kernel addresses flat (writes land in the caller's array)."""
    a = np.asarray(buf)
    if not a.flags.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous")
    return a.reshape(-1)


def _table(arr, what: str) -> tuple[np.ndarray, int]:
    """A 2-D table as (flat view, row stride = its width)."""
    a = np.asarray(arr)
    if a.ndim != 2:
        raise ValueError(f"{what} must be 2-D (rows x row stride)")
    return _flat(a, what), int(a.shape[1])


def _i64(arr, n: int, what: str) -> np.ndarray:
    """The first ``n`` elements of a 1-D input as exact int64 values (bounds-checked)."""
    _check_len(arr, n, what)
    return np.asarray(arr)[:n].astype(np.int64)


def _gather(buf: np.ndarray, idx, what: str) -> np.ndarray:
    """``buf[idx]`` as int64 values, every index checked."""
    idx = np.asarray(idx, dtype=np.int64)
    _check_index(idx, buf.size, what)
    return buf[idx].astype(np.int64) if idx.size else np.zeros(0, dtype=np.int64)


def _rows(num_reqs, idx_mapping, query_start_loc):
    """``B``, the state rows ``s_b`` and ``qs_b``, ``qe_b``, ``qlen_b`` (int32 values)."""
    B = max(0, int(num_reqs))
    s = _i64(idx_mapping, B, "idx_mapping read")
    q = _wrap32(_i64(query_start_loc, B + 1, "query_start_loc read")) if B else np.zeros(1, np.int64)
    return B, s, q[:B], q[1 : B + 1], _wrap32(q[1 : B + 1] - q[:B])


def _cu(cu_num_logits, B: int):
    """``cu[b]`` and ``nl_b`` (int32 values) of ``B`` rows."""
    cu = _wrap32(_i64(cu_num_logits, B + 1, "cu_num_logits read")) if B else np.zeros(1, np.int64)
    return cu[:B], _wrap32(cu[1 : B + 1] - cu[:B])


def _store(buf, idx, vals, what: str) -> None:
    """Write ``vals`` at the checked flat indices of ``buf`` (later writes win)."""
    flat = _flat(buf, what)
    idx = np.asarray(idx, dtype=np.int64)
    _check_index(idx, flat.size, what)
    _scatter(flat, idx, np.asarray(vals).astype(np.int64).astype(flat.dtype) if flat.dtype.kind in "iu" else vals)


# --------------------------------------------------------------------------------------------
# 14. input_batch_prepare_prefill_inputs_kernel
# --------------------------------------------------------------------------------------------


def input_batch_prepare_prefill_inputs(
    *, input_ids, next_prefill_tokens, idx_mapping, query_start_loc, all_token_ids, prefill_len,
    num_computed_tokens, num_reqs, num_lookahead, LOOKAHEAD_BLOCK,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §14. For each row ``b`` with ``c = num_computed_tokens[s] <
    L = prefill_len[s]``::

        input_ids[qs + i]          = all_token_ids[s, c + i]                       i < qlen
        next_prefill_tokens[k, s]  = all_token_ids[s, c + qlen + k] if c + qlen + k < L else 0
                                                                 k < min(num_lookahead, LOOKAHEAD_BLOCK)
    """
    B, s, qs, _, qlen = _rows(num_reqs, idx_mapping, query_start_loc)
    table, W = _table(all_token_ids, "all_token_ids")
    npt, NS = _table(next_prefill_tokens, "next_prefill_tokens")
    L = _gather(np.asarray(prefill_len), s, "prefill_len read")
    c = _gather(np.asarray(num_computed_tokens), s, "num_computed_tokens read")
    pre = c < L
    owner, i = _segments(np.where(pre, np.maximum(qlen, 0), 0))
    src = s[owner] * W + _wrap32(c[owner] + i)
    tokens = _gather(table, src, "all_token_ids read")
    dst = _wrap32(qs[owner] + i)

    rows = np.flatnonzero(pre)
    k = np.arange(max(0, min(int(num_lookahead), int(LOOKAHEAD_BLOCK))), dtype=np.int64)
    pos = _wrap32(c[rows, None] + qlen[rows, None] + k[None, :])
    readable = pos < L[rows, None]
    ahead = np.zeros(pos.shape, dtype=np.int64)
    ahead[readable] = _gather(table, (s[rows, None] * W + pos)[readable], "all_token_ids read (lookahead)")
    dst2 = k[None, :] * NS + s[rows, None]

    _check_index(dst, np.asarray(input_ids).size, "input_ids write")
    _check_index(dst2, npt.size, "next_prefill_tokens write")
    _store(input_ids, dst, tokens, "input_ids write")
    _store(npt, dst2.reshape(-1), ahead.reshape(-1), "next_prefill_tokens write")


# --------------------------------------------------------------------------------------------
# 15. _prepare_pos_seq_lens_kernel
# --------------------------------------------------------------------------------------------


def prepare_pos_seq_lens(*, pos, seq_lens, idx_mapping, query_start_loc, num_computed_tokens, max_num_reqs,
                         num_reqs) -> None:
    """docs/CONTRACT.md §15. ``seq_lens[b] = c + qlen`` and ``pos[qs + i] = int32(c + i)``
    for ``b < B``; then ``seq_lens[B:max_num_reqs] = 0``."""
    B, s, qs, _, qlen = _rows(num_reqs, idx_mapping, query_start_loc)
    c = _gather(np.asarray(num_computed_tokens), s, "num_computed_tokens read")
    owner, i = _segments(np.maximum(qlen, 0))
    pads = np.arange(B, max(B, int(max_num_reqs)), dtype=np.int64)
    rows = np.arange(B, dtype=np.int64)
    _check_index(np.concatenate([rows, pads]), np.asarray(seq_lens).size, "seq_lens write")
    _check_index(_wrap32(qs[owner] + i), np.asarray(pos).size, "pos write")
    _store(seq_lens, np.concatenate([rows, pads]),
           np.concatenate([_wrap32(c + qlen), np.zeros(pads.size, np.int64)]), "seq_lens write")
    _store(pos, _wrap32(qs[owner] + i), _wrap32(c[owner] + i), "pos write")


# --------------------------------------------------------------------------------------------
# 16. _combine_sampled_and_draft_tokens_kernel
# --------------------------------------------------------------------------------------------


def combine_sampled_and_draft_tokens(
    *, input_ids, logits_indices, idx_mapping, last_sampled_tokens, query_start_loc, seq_lens, prefill_len,
    draft_tokens, cu_num_logits, num_reqs, BLOCK_SIZE, NUM_NEW_SAMPLED_TOKENS=1,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §16. With ``nl = cu[b+1] - cu[b]``, ``d = nl - NEW``,
    ``ls = qe - nl``: ``logits_indices[cu[b] + i] = ls + i`` (``i < min(nl, BLOCK_SIZE)``);
    then, if ``seq_lens[b] > prefill_len[s]``: the last sampled token at ``ls`` (``NEW > 0`` and
    ``seq - nl >= L``) and the drafts at ``qe - d + i`` (``i < min(d, BLOCK_SIZE)``)."""
    B, s, _, qe, _ = _rows(num_reqs, idx_mapping, query_start_loc)
    cs, nl = _cu(cu_num_logits, B)
    new = int(NUM_NEW_SAMPLED_TOKENS)
    bs = int(BLOCK_SIZE)
    d = _wrap32(nl - new)
    ls = _wrap32(qe - nl)
    owner, i = _segments(np.clip(nl, 0, bs))
    li_idx, li_val = _wrap32(cs[owner] + i), _wrap32(ls[owner] + i)

    seq = _wrap32(_i64(seq_lens, B, "seq_lens read"))
    L = _gather(np.asarray(prefill_len), s, "prefill_len read")
    past = seq > L
    bonus = np.flatnonzero(past & (new > 0) & (_wrap32(seq - nl) >= L))
    last = _flat(last_sampled_tokens, "last_sampled_tokens")
    bonus_val = _gather(last, s[bonus], "last_sampled_tokens read")
    table, DW = _table(draft_tokens, "draft_tokens")
    o2, i2 = _segments(np.where(past, np.clip(d, 0, bs), 0))
    draft_val = _gather(table, s[o2] * DW + i2, "draft_tokens read")
    draft_idx = _wrap32(qe[o2] - d[o2] + i2)

    w_idx = np.concatenate([ls[bonus], draft_idx])
    w_val = np.concatenate([bonus_val, draft_val])
    order = np.lexsort((np.concatenate([np.full(bonus.size, -1), i2]), np.concatenate([bonus, o2])))
    _check_index(li_idx, np.asarray(logits_indices).size, "logits_indices write")
    _check_index(w_idx, np.asarray(input_ids).size, "input_ids write")
    _store(logits_indices, li_idx, li_val, "logits_indices write")
    _store(input_ids, w_idx[order], w_val[order], "input_ids write")


# --------------------------------------------------------------------------------------------
# 17. _expand_idx_mapping_kernel
# --------------------------------------------------------------------------------------------


def expand_idx_mapping(*, idx_mapping, expanded_idx_mapping, expanded_local_pos, cu_num_logits, num_reqs,
                       BLOCK_SIZE) -> None:
    """docs/CONTRACT.md §17. ``expanded_idx_mapping[cu[b] + i] = s_b``,
    ``expanded_local_pos[cu[b] + i] = i`` for ``i < min(nl_b, BLOCK_SIZE)``."""
    B = max(0, int(num_reqs))
    s = _i64(idx_mapping, B, "idx_mapping read")
    cs, nl = _cu(cu_num_logits, B)
    owner, i = _segments(np.clip(nl, 0, int(BLOCK_SIZE)))
    idx = _wrap32(cs[owner] + i)
    _check_index(idx, np.asarray(expanded_idx_mapping).size, "expanded_idx_mapping write")
    _check_index(idx, np.asarray(expanded_local_pos).size, "expanded_local_pos write")
    _store(expanded_idx_mapping, idx, s[owner], "expanded_idx_mapping write")
    _store(expanded_local_pos, idx, i, "expanded_local_pos write")


# --------------------------------------------------------------------------------------------
# 18. _get_num_sampled_and_rejected_kernel
# --------------------------------------------------------------------------------------------


def get_num_sampled_and_rejected(*, num_sampled, num_rejected, seq_lens, cu_num_logits, idx_mapping,
                                 prefill_len, num_reqs) -> None:
    """docs/CONTRACT.md §18. ``chunked = seq_lens[b] < prefill_len[s]``: both 0; else
    ``num_rejected[b] = nl_b - num_sampled[b]`` (``num_sampled`` kept)."""
    B = max(0, int(num_reqs))
    s = _i64(idx_mapping, B, "idx_mapping read")
    seq = _i64(seq_lens, B, "seq_lens read")
    L = _gather(np.asarray(prefill_len), s, "prefill_len read")
    n = _i64(num_sampled, B, "num_sampled read")
    _, nl = _cu(cu_num_logits, B)
    chunked = seq < L
    rows = np.arange(B, dtype=np.int64)
    _check_index(rows, np.asarray(num_rejected).size, "num_rejected write")
    _store(num_sampled, rows, np.where(chunked, 0, n), "num_sampled write")
    _store(num_rejected, rows, np.where(chunked, 0, _wrap32(nl - n)), "num_rejected write")


# --------------------------------------------------------------------------------------------
# 19. _post_update_kernel
# --------------------------------------------------------------------------------------------


def post_update(
    *, idx_mapping, num_computed_tokens, last_sampled_tokens, output_bin_counts, sampled_tokens, num_sampled,
    num_rejected, query_start_loc, all_token_ids, total_len, draft_tokens, draft_tokens_out, num_draft_tokens,
    num_reqs,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §19. For each row with ``s = idx_mapping[b] >= 0`` (``t = total_len[s]``,
    ``n = num_sampled[b]``): drafts copied to ``draft_tokens_out[s]``; if ``n > 0`` the last
    sampled token and ``total_len[s] = t + n``; ``all_token_ids[s, t + i] = sampled[b, i]``
    and ``output_bin_counts[s, sampled[b, i]] += 1`` for ``i < n``;
    ``num_computed_tokens[s] += qlen - num_rejected[b]`` when that is not 0."""
    B = max(0, int(num_reqs))
    s_all = _i64(idx_mapping, B, "idx_mapping read")
    rows = np.flatnonzero(s_all >= 0).astype(np.int64)
    s = s_all[rows]
    writes: list[tuple[object, np.ndarray, np.ndarray, str]] = []

    if draft_tokens is not None:
        D = int(num_draft_tokens)
        j = np.arange(max(D, 0), dtype=np.int64)
        src = _flat(draft_tokens, "draft_tokens")
        vals = _gather(src, _wrap32(rows[:, None] * D + j[None, :]).reshape(-1), "draft_tokens read")
        writes.append((draft_tokens_out, (s[:, None] * D + j[None, :]).reshape(-1), vals, "draft_tokens_out write"))

    t = _gather(np.asarray(total_len), s, "total_len read")
    n = _gather(np.asarray(num_sampled), rows, "num_sampled read")
    sampled, SS = _table(sampled_tokens, "sampled_tokens")
    some = np.flatnonzero(n > 0)
    last = _gather(sampled, _wrap32(rows[some] * SS + n[some] - 1), "sampled_tokens read")
    writes.append((last_sampled_tokens, s[some], last, "last_sampled_tokens write"))
    writes.append((total_len, s[some], _wrap32(t[some] + n[some]), "total_len write"))

    owner, i = _segments(np.maximum(n, 0))
    tok = _gather(sampled, _wrap32(rows[owner] * SS + i), "sampled_tokens read")
    atok, AW = _table(all_token_ids, "all_token_ids")
    writes.append((atok, s[owner] * AW + _wrap32(t[owner] + i), tok, "all_token_ids write"))
    if output_bin_counts is not None:
        bins, BW = _table(output_bin_counts, "output_bin_counts")
        where = s[owner] * BW + tok
        _check_index(where, bins.size, "output_bin_counts read")
        touched, times = np.unique(where, return_counts=True)
        writes.append((bins, touched, _wrap32(bins[touched].astype(np.int64) + times), "output_bin_counts write"))

    if query_start_loc is None:
        qlen = np.zeros(rows.size, dtype=np.int64)
    else:
        q = _wrap32(_i64(query_start_loc, B + 1, "query_start_loc read"))
        qlen = _wrap32(q[rows + 1] - q[rows])
    delta = _wrap32(qlen - _gather(np.asarray(num_rejected), rows, "num_rejected read"))
    ch = np.flatnonzero(delta != 0)
    computed = _gather(np.asarray(num_computed_tokens), s[ch], "num_computed_tokens read")
    writes.append((num_computed_tokens, s[ch], _wrap32(computed + delta[ch]), "num_computed_tokens write"))

    for buf, idx, _, what in writes:
        _check_index(idx, np.asarray(buf).size, what)
    for buf, idx, vals, what in writes:
        _store(buf, idx, vals, what)


# --------------------------------------------------------------------------------------------
# 20. _post_update_num_computed_tokens_kernel
# --------------------------------------------------------------------------------------------


def post_update_num_computed_tokens(*, idx_mapping, num_computed_tokens, query_start_loc, num_reqs) -> None:
    """docs/CONTRACT.md §20. ``num_computed_tokens[s_b] += qlen_b`` (int32)."""
    B, s, _, _, qlen = _rows(num_reqs, idx_mapping, query_start_loc)
    c = _gather(np.asarray(num_computed_tokens), s, "num_computed_tokens read")
    _store(num_computed_tokens, s, _wrap32(c + qlen), "num_computed_tokens write")


# --------------------------------------------------------------------------------------------
# 21. _gather_block_tables_kernel
# --------------------------------------------------------------------------------------------


def gather_block_tables(
    *, idx_mapping, src_block_tables, dst_block_tables, num_blocks, num_reqs, num_rows, num_computed_tokens,
    sliding_window_reach, block_sizes, MASK_SLIDING_WINDOW,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §21. Per group ``g`` (tables of one row stride ``W``): rows
    ``b < min(num_reqs, num_rows)`` get ``dst[b, i] = src[s_b, i]`` for
    ``null <= i < num_blocks[g, s_b]`` and ``0`` below ``null``; rows
    ``num_reqs <= b < num_rows`` are zeroed over ``W`` entries."""
    G = len(src_block_tables)
    if len(dst_block_tables) != G:
        raise ValueError("one destination table per group")
    R = max(0, int(num_reqs))
    NR = max(0, int(num_rows))
    live = np.arange(min(R, NR), dtype=np.int64)
    pads = np.arange(R, max(R, NR), dtype=np.int64)
    s = _i64(idx_mapping, live.size, "idx_mapping read")
    nb, NBW = _table(num_blocks, "num_blocks")
    writes = []
    for g in range(G):
        src, W = _table(src_block_tables[g], f"src_block_tables[{g}]")
        dst = _flat(dst_block_tables[g], f"dst_block_tables[{g}]")
        n = _gather(nb, g * NBW + s, "num_blocks read")
        null = np.zeros(live.size, dtype=np.int64)
        if MASK_SLIDING_WINDOW:
            reach = int(_gather(np.asarray(sliding_window_reach), [g], "sliding_window_reach read")[0])
            if reach > 0:
                bs = int(_gather(np.asarray(block_sizes), [g], "block_sizes read")[0])
                first = _gather(np.asarray(num_computed_tokens), s, "num_computed_tokens read")
                null = np.maximum(_wrap32(first - reach), 0) // bs
        owner, i = _segments(np.maximum(n, 0))
        keep = i >= null[owner]
        vals = np.zeros(i.size, dtype=np.int64)
        vals[keep] = _gather(src, (s[owner] * W + i)[keep], f"src_block_tables[{g}] read")
        j = np.arange(W, dtype=np.int64)
        idx = np.concatenate([live[owner] * W + i, (pads[:, None] * W + j[None, :]).reshape(-1)])
        vals = np.concatenate([vals, np.zeros(pads.size * W, dtype=np.int64)])
        _check_index(idx, dst.size, f"dst_block_tables[{g}] write")
        writes.append((dst, idx, vals))
    for dst, idx, vals in writes:
        _store(dst, idx, vals, "dst_block_tables write")


# --------------------------------------------------------------------------------------------
# 22. _compute_slot_mappings_kernel
# --------------------------------------------------------------------------------------------


def compute_slot_mappings(
    *, idx_mapping, query_start_loc, positions, block_tables, block_sizes, slot_mapping_enabled, dcp_sharded,
    slot_mappings, cp_rank, num_reqs, max_num_tokens, CP_SIZE=1, CP_INTERLEAVE=1, PAD_ID=-1,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §22. Per group ``g``: each token ``t`` of row ``b`` gets
    ``table[s, lp // bs] * bs + lp % bs`` (the product int32), ``lp`` the position (or its
    local position on this context-parallel rank), or ``PAD_ID`` (a disabled group, a row
    ``s < 0``, a position another rank holds); ``slot_mappings[g, t] = PAD_ID`` for
    ``query_start_loc[B] <= t < max_num_tokens``."""
    B, s, qs, _, qlen = _rows(num_reqs, idx_mapping, query_start_loc)
    end = int(_wrap32(_i64(query_start_loc, B + 1, "query_start_loc read"))[B])
    out, SW = _table(slot_mappings, "slot_mappings")
    pos = np.asarray(positions)
    CP, IL, PAD = int(CP_SIZE), int(CP_INTERLEAVE), int(PAD_ID)
    owner, i = _segments(np.maximum(qlen, 0))
    t = _wrap32(qs[owner] + i)
    p = _gather(pos, t, "positions read")
    real = s[owner] >= 0
    tail = np.arange(end, max(end, int(max_num_tokens)), dtype=np.int64)
    writes = []
    for g in range(len(block_tables)):
        table, W = _table(block_tables[g], f"block_tables[{g}]")
        bs = int(_gather(np.asarray(block_sizes), [g], "block_sizes read")[0])
        enabled = bool(np.asarray(slot_mapping_enabled)[g])
        if CP == 1:
            lp, local = p, np.ones(p.size, dtype=np.bool_)
        else:
            sharded = bool(np.asarray(dcp_sharded)[g])
            V = int(_wrap32(bs * CP))
            vo = p % V
            lp_sharded = (p // V) * bs + (vo // (IL * CP)) * IL + vo % IL
            lp = lp_sharded if sharded else p
            local = ((vo // IL) % CP == int(cp_rank)) if sharded else np.ones(p.size, dtype=np.bool_)
        col = lp // bs if enabled else np.zeros(p.size, dtype=np.int64)
        read = local & real
        bn = np.zeros(p.size, dtype=np.int64)
        bn[read] = _gather(table, s[owner][read] * W + col[read], f"block_tables[{g}] read")
        slot = _wrap32(bn * bs) + lp % bs
        slot = np.where(local & real & enabled, slot, PAD)
        idx = np.concatenate([g * SW + t, g * SW + tail])
        _check_index(idx, out.size, "slot_mappings write")
        writes.append((idx, np.concatenate([slot, np.full(tail.size, PAD, dtype=np.int64)])))
    for idx, vals in writes:
        _store(out, idx, vals, "slot_mappings write")


# --------------------------------------------------------------------------------------------
# 23. _gather_draft_sampled_kernel
# --------------------------------------------------------------------------------------------


def gather_draft_sampled(*, draft_sampled, pos, input_ids, positions, logits_indices, expanded_idx_mapping,
                         expanded_local_pos, prefill_len, num_logits) -> None:
    """docs/CONTRACT.md §23. ``pos[j] = positions[ti]``; ``draft_sampled[j] = -1`` when
    ``lp > 0`` and ``p - lp < prefill_len[s]``, else ``input_ids[ti]``."""
    n = max(0, int(num_logits))
    ti = _i64(logits_indices, n, "logits_indices read")
    tok = _gather(np.asarray(input_ids), ti, "input_ids read")
    p = _gather(np.asarray(positions), ti, "positions read")
    s = _i64(expanded_idx_mapping, n, "expanded_idx_mapping read")
    lp = _i64(expanded_local_pos, n, "expanded_local_pos read")
    L = _gather(np.asarray(prefill_len), s, "prefill_len read")
    rows = np.arange(n, dtype=np.int64)
    _check_index(rows, np.asarray(draft_sampled).size, "draft_sampled write")
    _check_index(rows, np.asarray(pos).size, "pos write")
    _store(draft_sampled, rows, np.where((lp > 0) & (p - lp < L), -1, tok), "draft_sampled write")
    _store(pos, rows, p, "pos write")


# --------------------------------------------------------------------------------------------
# 24. _flatten_sampled_kernel
# --------------------------------------------------------------------------------------------


def flatten_sampled(*, flat_sampled, sampled, num_sampled, cu_num_logits, num_reqs) -> None:
    """docs/CONTRACT.md §24. ``flat_sampled[cu[b] + i] = sampled[b, i]`` for
    ``i < num_sampled[b]``."""
    B = max(0, int(num_reqs))
    cs, _ = _cu(cu_num_logits, B)
    n = _i64(num_sampled, B, "num_sampled read")
    table, SS = _table(sampled, "sampled")
    owner, i = _segments(np.maximum(n, 0))
    vals = table[_checked(_wrap32(owner * SS + i), table.size, "sampled read")]
    idx = _wrap32(cs[owner] + i)
    flat = _flat(flat_sampled, "flat_sampled")
    _check_index(idx, flat.size, "flat_sampled write")
    _scatter(flat, idx, vals)


def _checked(idx, n: int, what: str) -> np.ndarray:
    _check_index(idx, n, what)
    return idx


# --------------------------------------------------------------------------------------------
# 25. target_dependent_ar_prepare_prefill_inputs_kernel
# --------------------------------------------------------------------------------------------


def target_dependent_ar_prepare_prefill_inputs(
    *, last_token_indices, draft_current_step, draft_input_ids, draft_positions, draft_query_start_loc,
    draft_seq_lens, target_input_ids, target_positions, idx_mapping, last_sampled, next_prefill_tokens,
    num_sampled, num_rejected, query_start_loc, seq_lens, max_num_reqs, num_reqs,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §25. With ``q = qlen - num_rejected[b]`` and ``lti = qs + q - 1``:
    ``draft_input_ids[qs + i - 1] = target_input_ids[qs + i]`` (``1 <= i < q``), then
    ``draft_input_ids[lti] = next`` (the last sampled token, or the next prefill token when
    nothing was sampled); positions ``[qs, qs + q)`` copied; ``last_token_indices[b] = lti``,
    ``draft_query_start_loc[b] = qs``, ``draft_seq_lens[b] = seq_lens[b]``; the last program
    resets the step and pads the three per-request buffers up to ``max_num_reqs``."""
    B, s, qs, qe, qlen = _rows(num_reqs, idx_mapping, query_start_loc)
    if B == 0:
        return
    q = _wrap32(qlen - _i64(num_rejected, B, "num_rejected read"))
    seq = _i64(seq_lens, B, "seq_lens read")
    n = _i64(num_sampled, B, "num_sampled read")
    sampled_rows = n > 0
    last = _gather(_flat(last_sampled, "last_sampled"), s[sampled_rows], "last_sampled read")
    ahead = _gather(_flat(next_prefill_tokens, "next_prefill_tokens"), s[~sampled_rows], "next_prefill_tokens read")
    nxt = np.zeros(B, dtype=np.int64)
    nxt[sampled_rows] = _wrap32(last)
    nxt[~sampled_rows] = ahead
    lti = _wrap32(qs + q - 1)

    o1, i1 = _segments(np.maximum(q - 1, 0))
    shifted = _gather(np.asarray(target_input_ids), _wrap32(qs[o1] + i1 + 1), "target_input_ids read")
    ids_idx = np.concatenate([_wrap32(qs[o1] + i1), lti])
    ids_val = np.concatenate([shifted, nxt])
    order = np.lexsort((np.concatenate([i1, np.full(B, np.iinfo(np.int64).max)]),
                        np.concatenate([o1, np.arange(B)])))
    o2, i2 = _segments(np.maximum(q, 0))
    pos_idx = _wrap32(qs[o2] + i2)
    pos_val = _gather(np.asarray(target_positions), pos_idx, "target_positions read")

    M = int(max_num_reqs)
    rows = np.arange(B, dtype=np.int64)
    pad1 = np.arange(B, max(B, M + 1), dtype=np.int64)
    pad0 = np.arange(B, max(B, M), dtype=np.int64)
    writes = [
        (draft_input_ids, ids_idx[order], ids_val[order], "draft_input_ids write"),
        (draft_positions, pos_idx, pos_val, "draft_positions write"),
        (last_token_indices, np.concatenate([rows, pad0]), np.concatenate([lti, np.zeros(pad0.size, np.int64)]),
         "last_token_indices write"),
        (draft_query_start_loc, np.concatenate([rows, pad1]),
         np.concatenate([qs, np.full(pad1.size, qe[B - 1], np.int64)]), "draft_query_start_loc write"),
        (draft_seq_lens, np.concatenate([rows, pad0]), np.concatenate([seq, np.zeros(pad0.size, np.int64)]),
         "draft_seq_lens write"),
        (draft_current_step, np.zeros(1, np.int64), np.zeros(1, np.int64), "draft_current_step write"),
    ]
    for buf, idx, _, what in writes:
        _check_index(idx, np.asarray(buf).size, what)
    for buf, idx, vals, what in writes:
        _store(buf, idx, vals, what)


# --------------------------------------------------------------------------------------------
# 26. _prepare_decode_inputs_kernel
# --------------------------------------------------------------------------------------------


def prepare_decode_inputs(
    *, draft_tokens, target_seq_lens, num_rejected, input_ids, positions, sample_src_positions, query_start_loc,
    seq_lens, max_model_len, max_num_reqs, num_reqs, ADVANCE_DRAFT_POSITIONS=True,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §26. ``draft_tokens`` is the 2-D table whose column 0 the kernel reads
    (``draft_tokens[b, 0]``). For ``b < B``: ``input_ids[b]`` the first draft, the sampling
    key ``+1``, ``seq = target_seq_lens[b] - num_rejected[b]`` and, when advancing,
    ``positions[b] = min(positions[b] + 1, M - 1)``, ``seq = min(seq + 1, M)``;
    ``seq_lens[b] = seq``. Program ``B``: ``query_start_loc[i] = min(i, B)`` for
    ``i <= max_num_reqs``, ``seq_lens[B:max_num_reqs] = 0``."""
    B = max(0, int(num_reqs))
    M = int(max_model_len)
    table, DW = _table(draft_tokens, "draft_tokens")
    rows = np.arange(B, dtype=np.int64)
    tok = _gather(table, rows * DW, "draft_tokens read")
    src = _i64(sample_src_positions, B, "sample_src_positions read")
    seq = _wrap32(_i64(target_seq_lens, B, "target_seq_lens read") - _i64(num_rejected, B, "num_rejected read"))
    writes = [
        (input_ids, rows, tok, "input_ids write"),
        (sample_src_positions, rows, src + 1, "sample_src_positions write"),
    ]
    if ADVANCE_DRAFT_POSITIONS:
        p = _i64(positions, B, "positions read")
        writes.append((positions, rows, np.minimum(p + 1, M - 1), "positions write"))
        seq = np.minimum(_wrap32(seq + 1), M)
    R = int(max_num_reqs)
    pad0 = np.arange(B, max(B, R), dtype=np.int64)
    qsl_idx = np.arange(max(0, R + 1), dtype=np.int64)
    writes.append((seq_lens, np.concatenate([rows, pad0]), np.concatenate([seq, np.zeros(pad0.size, np.int64)]),
                   "seq_lens write"))
    writes.append((query_start_loc, qsl_idx, np.minimum(qsl_idx, B), "query_start_loc write"))
    for buf, idx, _, what in writes:
        _check_index(idx, np.asarray(buf).size, what)
    for buf, idx, vals, what in writes:
        _store(buf, idx, vals, what)


# --------------------------------------------------------------------------------------------
# 27. _update_draft_inputs_kernel
# --------------------------------------------------------------------------------------------


def _bits(a: np.ndarray) -> np.ndarray:
    """The same memory seen as unsigned integers of the element's width (a bit-exact copy)."""
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def update_draft_inputs(
    *, output_draft_tokens, next_input_hidden_states, input_ids, positions, sample_src_positions, seq_lens,
    draft_tokens, current_draft_step, hidden_states, hidden_size, max_model_len, num_speculative_steps,
    num_reqs, ADVANCE_DRAFT_POSITIONS=True,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §27. ``output_draft_tokens[b, step] = draft_tokens[b]``; unless
    ``step >= num_speculative_steps - 1``: the sampling key ``+1``, the token as the next
    input id, ``hidden_size`` hidden-state columns copied bit for bit, and (advancing)
    ``positions[b] = min(positions[b] + 1, M - 1)``, ``seq_lens[b] = min(seq_lens[b] + 1, M)``."""
    B = max(0, int(num_reqs))
    M = int(max_model_len)
    step = int(_flat(current_draft_step, "current_draft_step")[0])
    tok = _i64(draft_tokens, B, "draft_tokens read")
    rows = np.arange(B, dtype=np.int64)
    out, OW = _table(output_draft_tokens, "output_draft_tokens")
    writes = [(out, rows * OW + step, tok, "output_draft_tokens write")]
    if step < int(num_speculative_steps) - 1:
        hs, HW = _table(hidden_states, "hidden_states")
        nxt, NW = _table(next_input_hidden_states, "next_input_hidden_states")
        if hs.dtype.itemsize != nxt.dtype.itemsize:
            raise TypeError("hidden_states and next_input_hidden_states must have one element width")
        H = max(0, int(hidden_size))
        j = np.arange(H, dtype=np.int64)
        src = (rows[:, None] * HW + j[None, :]).reshape(-1)
        _check_index(src, hs.size, "hidden_states read")
        writes.append((_bits(nxt), (rows[:, None] * NW + j[None, :]).reshape(-1), _bits(hs)[src],
                       "next_input_hidden_states write"))
        writes.append((sample_src_positions, rows, _i64(sample_src_positions, B, "sample_src_positions read") + 1,
                       "sample_src_positions write"))
        writes.append((input_ids, rows, tok, "input_ids write"))
        if ADVANCE_DRAFT_POSITIONS:
            p = _i64(positions, B, "positions read")
            sl = _i64(seq_lens, B, "seq_lens read")
            writes.append((positions, rows, np.minimum(p + 1, M - 1), "positions write"))
            writes.append((seq_lens, rows, np.minimum(_wrap32(sl + 1), M), "seq_lens write"))
    for buf, idx, _, what in writes:
        _check_index(idx, np.asarray(buf).size, what)
    for buf, idx, vals, what in writes:
        flat = _flat(buf, what)
        if flat.dtype.kind == "u" and vals.dtype == flat.dtype:
            _scatter(flat, idx, vals)
        else:
            _store(flat, idx, vals, what)
