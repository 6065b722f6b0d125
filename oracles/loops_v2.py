"""Numba oracles of Model Runner V2's input and bookkeeping kernels, written from
docs/CONTRACT.md §14-§27.

Each kernel is a Numba function of plain loops (an :func:`~.entry.entry`: its inputs passed
read-only), one program (batch row) after another as the contract describes it, plus a thin wrapper with the same keyword-only
signature as the matching function of ``vectorized_v2``. Tables are passed flat with their row
stride (a 2-D array's width). Values are computed exactly in int64 and wrapped with
``np.int32(...)`` wherever the kernel holds an int32 value (Numba ignores NEP 50: every cast is
explicit); a store has the destination buffer's dtype.

Each njit function runs twice: a checking pass (``do_write=False``) that returns the first read
or write outside a buffer as an error code, then, if there is none, the writing pass. An error
becomes an ``IndexError`` in the wrapper, the buffers untouched.
"""

from __future__ import annotations

import numpy as np

from .entry import entry

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

# Error codes of the njit functions: a code names the buffer and the access.
_ERRORS = {
    1: "idx_mapping read",
    2: "query_start_loc read",
    3: "prefill_len read",
    4: "num_computed_tokens read",
    5: "all_token_ids read",
    6: "input_ids write",
    7: "next_prefill_tokens write",
    8: "seq_lens write",
    9: "pos write",
    10: "cu_num_logits read",
    11: "logits_indices write",
    12: "seq_lens read",
    13: "last_sampled_tokens read",
    14: "draft_tokens read",
    15: "expanded_idx_mapping write",
    16: "expanded_local_pos write",
    17: "num_sampled read",
    18: "num_rejected write",
    19: "draft_tokens_out write",
    20: "total_len read",
    21: "sampled_tokens read",
    22: "last_sampled_tokens write",
    23: "all_token_ids write",
    24: "output_bin_counts read",
    25: "num_rejected read",
    26: "num_computed_tokens write",
    27: "num_blocks read",
    28: "src_block_tables read",
    29: "dst_block_tables write",
    30: "sliding_window_reach / block_sizes read",
    31: "positions read",
    32: "block_tables read",
    33: "slot_mappings write",
    34: "logits_indices read",
    35: "input_ids read",
    36: "expanded_idx_mapping read",
    37: "expanded_local_pos read",
    38: "draft_sampled write",
    39: "pos write",
    40: "sampled read",
    41: "flat_sampled write",
    42: "target_input_ids read",
    43: "target_positions read",
    44: "last_sampled read",
    45: "next_prefill_tokens read",
    46: "draft_input_ids write",
    47: "draft_positions write",
    48: "last_token_indices write",
    49: "draft_query_start_loc write",
    50: "draft_current_step write",
    51: "target_seq_lens read",
    52: "sample_src_positions read/write",
    53: "positions read/write",
    54: "query_start_loc write",
    55: "output_draft_tokens write",
    56: "hidden_states read",
    57: "next_input_hidden_states write",
    58: "seq_lens read/write",
    59: "total_len write",
    60: "output_bin_counts write",
}

_OK = (np.int64(0), np.int64(0), np.int64(0))


def _raise_if_error(err, kernel: str) -> None:
    code, b, idx = (int(v) for v in err)
    if code:
        raise IndexError(f"{kernel}: {_ERRORS[code]} out of bounds (row {b}, index {idx})")


def _flat(buf, what: str) -> np.ndarray:
    a = np.asarray(buf)
    if not a.flags.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous")
    return a.reshape(-1)


def _table(arr, what: str) -> tuple[np.ndarray, np.int64]:
    a = np.asarray(arr)
    if a.ndim != 2:
        raise ValueError(f"{what} must be 2-D (rows x row stride)")
    return _flat(a, what), np.int64(a.shape[1])


def _run(fn, args, kernel: str) -> None:
    _raise_if_error(fn(*args, False), kernel)
    fn(*args, True)


_EMPTY_I64 = np.zeros(0, dtype=np.int64)
_EMPTY_I32 = np.zeros(0, dtype=np.int32)


# --------------------------------------------------------------------------------------------
# 14. input_batch_prepare_prefill_inputs_kernel
# --------------------------------------------------------------------------------------------


@entry("ids", "npt")
def _prefill_loops(ids, npt, NS, idx, qsl, tab, W, plen, nct, B, nla, do_write):
    for b in range(B):
        if b >= idx.shape[0]:
            return np.int64(1), np.int64(b), np.int64(b)
        if b + 1 >= qsl.shape[0]:
            return np.int64(2), np.int64(b), np.int64(b + 1)
        s = np.int64(idx[b])
        if s < 0 or s >= plen.shape[0]:
            return np.int64(3), np.int64(b), s
        if s >= nct.shape[0]:
            return np.int64(4), np.int64(b), s
        L = np.int64(plen[s])
        c = np.int64(nct[s])
        if c >= L:
            continue
        qs = np.int64(qsl[b])
        qlen = np.int64(np.int32(np.int64(qsl[b + 1]) - qs))
        for i in range(qlen):
            src = s * W + np.int64(np.int32(c + i))
            if src < 0 or src >= tab.shape[0]:
                return np.int64(5), np.int64(b), src
            dst = np.int64(np.int32(qs + i))
            if dst < 0 or dst >= ids.shape[0]:
                return np.int64(6), np.int64(b), dst
            if do_write:
                ids[dst] = tab[src]
        for k in range(nla):
            p = np.int64(np.int32(c + qlen + k))
            tok = np.int32(0)
            if p < L:
                src = s * W + p
                if src < 0 or src >= tab.shape[0]:
                    return np.int64(5), np.int64(b), src
                tok = tab[src]
            dst = np.int64(k) * NS + s
            if dst < 0 or dst >= npt.shape[0]:
                return np.int64(7), np.int64(b), dst
            if do_write:
                npt[dst] = tok
    return _OK


def input_batch_prepare_prefill_inputs(
    *, input_ids, next_prefill_tokens, idx_mapping, query_start_loc, all_token_ids, prefill_len,
    num_computed_tokens, num_reqs, num_lookahead, LOOKAHEAD_BLOCK,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §14; same rules as ``vectorized_v2.input_batch_prepare_prefill_inputs``."""
    tab, W = _table(all_token_ids, "all_token_ids")
    npt, NS = _table(next_prefill_tokens, "next_prefill_tokens")
    args = (_flat(input_ids, "input_ids"), npt, NS, np.asarray(idx_mapping), np.asarray(query_start_loc), tab, W,
            np.asarray(prefill_len), np.asarray(num_computed_tokens), np.int64(max(0, int(num_reqs))),
            np.int64(max(0, min(int(num_lookahead), int(LOOKAHEAD_BLOCK)))))
    _run(_prefill_loops, args, "input_batch_prepare_prefill_inputs")


# --------------------------------------------------------------------------------------------
# 15. _prepare_pos_seq_lens_kernel
# --------------------------------------------------------------------------------------------


@entry("pos", "seq")
def _pos_seq_loops(pos, seq, idx, qsl, nct, R, B, do_write):
    for b in range(B):
        if b >= idx.shape[0]:
            return np.int64(1), np.int64(b), np.int64(b)
        if b + 1 >= qsl.shape[0]:
            return np.int64(2), np.int64(b), np.int64(b + 1)
        s = np.int64(idx[b])
        if s < 0 or s >= nct.shape[0]:
            return np.int64(4), np.int64(b), s
        c = np.int64(nct[s])
        qs = np.int64(qsl[b])
        qlen = np.int64(np.int32(np.int64(qsl[b + 1]) - qs))
        if b >= seq.shape[0]:
            return np.int64(8), np.int64(b), np.int64(b)
        if do_write:
            seq[b] = np.int32(c + qlen)
        for i in range(qlen):
            t = np.int64(np.int32(qs + i))
            if t < 0 or t >= pos.shape[0]:
                return np.int64(9), np.int64(b), t
            if do_write:
                pos[t] = np.int64(np.int32(c + i))
    for i in range(B, R):
        if i >= seq.shape[0]:
            return np.int64(8), np.int64(B), np.int64(i)
        if do_write:
            seq[i] = np.int32(0)
    return _OK


def prepare_pos_seq_lens(*, pos, seq_lens, idx_mapping, query_start_loc, num_computed_tokens, max_num_reqs,
                         num_reqs) -> None:
    """docs/CONTRACT.md §15; same rules as ``vectorized_v2.prepare_pos_seq_lens``."""
    args = (_flat(pos, "pos"), _flat(seq_lens, "seq_lens"), np.asarray(idx_mapping), np.asarray(query_start_loc),
            np.asarray(num_computed_tokens), np.int64(int(max_num_reqs)), np.int64(max(0, int(num_reqs))))
    _run(_pos_seq_loops, args, "prepare_pos_seq_lens")


# --------------------------------------------------------------------------------------------
# 16. _combine_sampled_and_draft_tokens_kernel
# --------------------------------------------------------------------------------------------


@entry("ids", "li")
def _combine_loops(ids, li, idx, last, qsl, seq, plen, drafts, DW, cu, B, BS, NEW, do_write):
    for b in range(B):
        if b >= idx.shape[0]:
            return np.int64(1), np.int64(b), np.int64(b)
        s = np.int64(idx[b])
        if b + 1 >= cu.shape[0]:
            return np.int64(10), np.int64(b), np.int64(b + 1)
        cs = np.int64(cu[b])
        nl = np.int64(np.int32(np.int64(cu[b + 1]) - cs))
        nd = np.int64(np.int32(nl - NEW))
        if b + 1 >= qsl.shape[0]:
            return np.int64(2), np.int64(b), np.int64(b + 1)
        qe = np.int64(qsl[b + 1])
        ls = np.int64(np.int32(qe - nl))
        for i in range(min(nl, BS)):
            t = np.int64(np.int32(cs + i))
            if t < 0 or t >= li.shape[0]:
                return np.int64(11), np.int64(b), t
            if do_write:
                li[t] = np.int64(np.int32(ls + i))
        if b >= seq.shape[0]:
            return np.int64(12), np.int64(b), np.int64(b)
        sq = np.int64(seq[b])
        if s < 0 or s >= plen.shape[0]:
            return np.int64(3), np.int64(b), s
        L = np.int64(plen[s])
        if sq <= L:
            continue
        if NEW > 0 and np.int64(np.int32(sq - nl)) >= L:
            if s >= last.shape[0]:
                return np.int64(13), np.int64(b), s
            if ls < 0 or ls >= ids.shape[0]:
                return np.int64(6), np.int64(b), ls
            if do_write:
                ids[ls] = np.int32(last[s])
        for i in range(min(nd, BS)):
            src = s * DW + i
            if src < 0 or src >= drafts.shape[0]:
                return np.int64(14), np.int64(b), src
            t = np.int64(np.int32(qe - nd + i))
            if t < 0 or t >= ids.shape[0]:
                return np.int64(6), np.int64(b), t
            if do_write:
                ids[t] = np.int32(drafts[src])
    return _OK


def combine_sampled_and_draft_tokens(
    *, input_ids, logits_indices, idx_mapping, last_sampled_tokens, query_start_loc, seq_lens, prefill_len,
    draft_tokens, cu_num_logits, num_reqs, BLOCK_SIZE, NUM_NEW_SAMPLED_TOKENS=1,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §16; same rules as ``vectorized_v2.combine_sampled_and_draft_tokens``."""
    drafts, DW = _table(draft_tokens, "draft_tokens")
    args = (_flat(input_ids, "input_ids"), _flat(logits_indices, "logits_indices"), np.asarray(idx_mapping),
            _flat(last_sampled_tokens, "last_sampled_tokens"), np.asarray(query_start_loc), np.asarray(seq_lens),
            np.asarray(prefill_len), drafts, DW, np.asarray(cu_num_logits), np.int64(max(0, int(num_reqs))),
            np.int64(int(BLOCK_SIZE)), np.int64(int(NUM_NEW_SAMPLED_TOKENS)))
    _run(_combine_loops, args, "combine_sampled_and_draft_tokens")


# --------------------------------------------------------------------------------------------
# 17. _expand_idx_mapping_kernel
# --------------------------------------------------------------------------------------------


@entry("out_idx", "out_pos")
def _expand_loops(idx, out_idx, out_pos, cu, B, BS, do_write):
    for b in range(B):
        if b + 1 >= cu.shape[0]:
            return np.int64(10), np.int64(b), np.int64(b + 1)
        cs = np.int64(cu[b])
        n = np.int64(np.int32(np.int64(cu[b + 1]) - cs))
        if b >= idx.shape[0]:
            return np.int64(1), np.int64(b), np.int64(b)
        s = np.int64(idx[b])
        for i in range(min(n, BS)):
            t = np.int64(np.int32(cs + i))
            if t < 0 or t >= out_idx.shape[0]:
                return np.int64(15), np.int64(b), t
            if t >= out_pos.shape[0]:
                return np.int64(16), np.int64(b), t
            if do_write:
                out_idx[t] = s
                out_pos[t] = np.int32(i)
    return _OK


def expand_idx_mapping(*, idx_mapping, expanded_idx_mapping, expanded_local_pos, cu_num_logits, num_reqs,
                       BLOCK_SIZE) -> None:
    """docs/CONTRACT.md §17; same rules as ``vectorized_v2.expand_idx_mapping``."""
    args = (np.asarray(idx_mapping), _flat(expanded_idx_mapping, "expanded_idx_mapping"),
            _flat(expanded_local_pos, "expanded_local_pos"), np.asarray(cu_num_logits),
            np.int64(max(0, int(num_reqs))), np.int64(int(BLOCK_SIZE)))
    _run(_expand_loops, args, "expand_idx_mapping")


# --------------------------------------------------------------------------------------------
# 18. _get_num_sampled_and_rejected_kernel
# --------------------------------------------------------------------------------------------


@entry("nr", "ns")
def _sampled_rejected_loops(ns, nr, seq, cu, idx, plen, B, do_write):
    for b in range(B):
        if b >= idx.shape[0]:
            return np.int64(1), np.int64(b), np.int64(b)
        s = np.int64(idx[b])
        if b >= seq.shape[0]:
            return np.int64(12), np.int64(b), np.int64(b)
        if s < 0 or s >= plen.shape[0]:
            return np.int64(3), np.int64(b), s
        chunked = np.int64(seq[b]) < np.int64(plen[s])
        if b >= ns.shape[0]:
            return np.int64(17), np.int64(b), np.int64(b)
        n = np.int64(ns[b])
        if chunked:
            n = np.int64(0)
        if b + 1 >= cu.shape[0]:
            return np.int64(10), np.int64(b), np.int64(b + 1)
        nl = np.int64(np.int32(np.int64(cu[b + 1]) - np.int64(cu[b])))
        rej = np.int64(0) if chunked else np.int64(np.int32(nl - n))
        if b >= nr.shape[0]:
            return np.int64(18), np.int64(b), np.int64(b)
        if do_write:
            ns[b] = np.int32(n)
            nr[b] = np.int32(rej)
    return _OK


def get_num_sampled_and_rejected(*, num_sampled, num_rejected, seq_lens, cu_num_logits, idx_mapping,
                                 prefill_len, num_reqs) -> None:
    """docs/CONTRACT.md §18; same rules as ``vectorized_v2.get_num_sampled_and_rejected``."""
    args = (_flat(num_sampled, "num_sampled"), _flat(num_rejected, "num_rejected"), np.asarray(seq_lens),
            np.asarray(cu_num_logits), np.asarray(idx_mapping), np.asarray(prefill_len),
            np.int64(max(0, int(num_reqs))))
    _run(_sampled_rejected_loops, args, "get_num_sampled_and_rejected")


# --------------------------------------------------------------------------------------------
# 19. _post_update_kernel
# --------------------------------------------------------------------------------------------


@entry("atok", "bins", "drafts_out", "last", "nct", "total")
def _post_update_loops(idx, nct, last, bins, BW, has_bins, sampled, SS, ns, nr, qsl, has_qsl, atok, AW, total,
                       drafts, drafts_out, D, has_drafts, B, do_write):  # fmt: skip
    for b in range(B):
        if b >= idx.shape[0]:
            return np.int64(1), np.int64(b), np.int64(b)
        s = np.int64(idx[b])
        if s < 0:
            continue
        if has_drafts:
            for i in range(D):
                src = np.int64(np.int32(b * D + i))
                if src < 0 or src >= drafts.shape[0]:
                    return np.int64(14), np.int64(b), src
                dst = s * D + i
                if dst >= drafts_out.shape[0]:
                    return np.int64(19), np.int64(b), dst
                if do_write:
                    drafts_out[dst] = drafts[src]
        if s >= total.shape[0]:
            return np.int64(20), np.int64(b), s
        t = np.int64(total[s])
        if b >= ns.shape[0]:
            return np.int64(17), np.int64(b), np.int64(b)
        n = np.int64(ns[b])
        if n > 0:
            src = np.int64(np.int32(b * SS + n - 1))
            if src < 0 or src >= sampled.shape[0]:
                return np.int64(21), np.int64(b), src
            if s >= last.shape[0]:
                return np.int64(22), np.int64(b), s
            if do_write:
                last[s] = sampled[src]
                total[s] = np.int32(t + n)
        for i in range(n):
            src = np.int64(np.int32(b * SS + i))
            if src < 0 or src >= sampled.shape[0]:
                return np.int64(21), np.int64(b), src
            tok = np.int64(sampled[src])
            dst = s * AW + np.int64(np.int32(t + i))
            if dst < 0 or dst >= atok.shape[0]:
                return np.int64(23), np.int64(b), dst
            if do_write:
                atok[dst] = np.int32(tok)
            if has_bins:
                where = s * BW + tok
                if where < 0 or where >= bins.shape[0]:
                    return np.int64(24), np.int64(b), where
                if do_write:
                    bins[where] = np.int32(np.int64(bins[where]) + 1)
        qlen = np.int64(0)
        if has_qsl:
            if b + 1 >= qsl.shape[0]:
                return np.int64(2), np.int64(b), np.int64(b + 1)
            qlen = np.int64(np.int32(np.int64(qsl[b + 1]) - np.int64(qsl[b])))
        if b >= nr.shape[0]:
            return np.int64(25), np.int64(b), np.int64(b)
        delta = np.int64(np.int32(qlen - np.int64(nr[b])))
        if delta != 0:
            if s >= nct.shape[0]:
                return np.int64(26), np.int64(b), s
            if do_write:
                nct[s] = np.int32(np.int64(nct[s]) + delta)
    return _OK


def post_update(
    *, idx_mapping, num_computed_tokens, last_sampled_tokens, output_bin_counts, sampled_tokens, num_sampled,
    num_rejected, query_start_loc, all_token_ids, total_len, draft_tokens, draft_tokens_out, num_draft_tokens,
    num_reqs,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §19; same rules as ``vectorized_v2.post_update``: one program after
    another, each row's reads before its writes."""
    sampled, SS = _table(sampled_tokens, "sampled_tokens")
    atok, AW = _table(all_token_ids, "all_token_ids")
    if output_bin_counts is None:
        bins, BW = _EMPTY_I32, np.int64(0)
    else:
        bins, BW = _table(output_bin_counts, "output_bin_counts")
    has_drafts = draft_tokens is not None
    drafts = _flat(draft_tokens, "draft_tokens") if has_drafts else _EMPTY_I64
    drafts_out = _flat(draft_tokens_out, "draft_tokens_out") if has_drafts else _EMPTY_I64
    qsl = _EMPTY_I32 if query_start_loc is None else np.asarray(query_start_loc)
    args = (np.asarray(idx_mapping), _flat(num_computed_tokens, "num_computed_tokens"),
            _flat(last_sampled_tokens, "last_sampled_tokens"), bins, BW, output_bin_counts is not None, sampled, SS,
            np.asarray(num_sampled), np.asarray(num_rejected), qsl, query_start_loc is not None, atok, AW,
            _flat(total_len, "total_len"), drafts, drafts_out, np.int64(int(num_draft_tokens)), has_drafts,
            np.int64(max(0, int(num_reqs))))
    _run(_post_update_loops, args, "post_update")


# --------------------------------------------------------------------------------------------
# 20. _post_update_num_computed_tokens_kernel
# --------------------------------------------------------------------------------------------


@entry("nct")
def _post_update_computed_loops(idx, nct, qsl, B, do_write):
    for b in range(B):
        if b >= idx.shape[0]:
            return np.int64(1), np.int64(b), np.int64(b)
        if b + 1 >= qsl.shape[0]:
            return np.int64(2), np.int64(b), np.int64(b + 1)
        qlen = np.int64(np.int32(np.int64(qsl[b + 1]) - np.int64(qsl[b])))
        s = np.int64(idx[b])
        if s < 0 or s >= nct.shape[0]:
            return np.int64(26), np.int64(b), s
        if do_write:
            nct[s] = np.int32(np.int64(nct[s]) + qlen)
    return _OK


def post_update_num_computed_tokens(*, idx_mapping, num_computed_tokens, query_start_loc, num_reqs) -> None:
    """docs/CONTRACT.md §20; same rules as ``vectorized_v2.post_update_num_computed_tokens``."""
    args = (np.asarray(idx_mapping), _flat(num_computed_tokens, "num_computed_tokens"), np.asarray(query_start_loc),
            np.int64(max(0, int(num_reqs))))
    _run(_post_update_computed_loops, args, "post_update_num_computed_tokens")


# --------------------------------------------------------------------------------------------
# 21. _gather_block_tables_kernel
# --------------------------------------------------------------------------------------------


@entry("dst")
def _gather_tables_loops(idx, src, dst, W, nb, NBW, g, R, NR, nct, reach, bs, mask, do_write):
    for b in range(NR):
        if b >= R:
            for i in range(W):
                t = np.int64(b) * W + i
                if t >= dst.shape[0]:
                    return np.int64(29), np.int64(b), t
                if do_write:
                    dst[t] = np.int32(0)
            continue
        if b >= idx.shape[0]:
            return np.int64(1), np.int64(b), np.int64(b)
        r = np.int64(idx[b])
        where = g * NBW + r
        if where < 0 or where >= nb.shape[0]:
            return np.int64(27), np.int64(b), where
        n = np.int64(nb[where])
        null = np.int64(0)
        if mask and reach > 0:
            if r >= nct.shape[0]:
                return np.int64(4), np.int64(b), r
            first = np.int64(np.int32(np.int64(nct[r]) - reach))
            if first < 0:
                first = np.int64(0)
            null = first // bs
        for i in range(n):
            val = np.int32(0)
            if i >= null:
                at = r * W + i
                if at < 0 or at >= src.shape[0]:
                    return np.int64(28), np.int64(b), at
                val = src[at]
            t = np.int64(b) * W + i
            if t >= dst.shape[0]:
                return np.int64(29), np.int64(b), t
            if do_write:
                dst[t] = val
    return _OK


def gather_block_tables(
    *, idx_mapping, src_block_tables, dst_block_tables, num_blocks, num_reqs, num_rows, num_computed_tokens,
    sliding_window_reach, block_sizes, MASK_SLIDING_WINDOW,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §21; same rules as ``vectorized_v2.gather_block_tables``: the groups one
    after another, each group's rows one after another."""
    G = len(src_block_tables)
    if len(dst_block_tables) != G:
        raise ValueError("one destination table per group")
    nb, NBW = _table(num_blocks, "num_blocks")
    reaches = np.asarray(sliding_window_reach).reshape(-1)
    sizes = np.asarray(block_sizes).reshape(-1)
    nct = np.asarray(num_computed_tokens)
    runs = []
    for g in range(G):
        src, W = _table(src_block_tables[g], f"src_block_tables[{g}]")
        dst = _flat(dst_block_tables[g], f"dst_block_tables[{g}]")
        reach = bs = np.int64(0)
        if MASK_SLIDING_WINDOW:
            if g >= reaches.size:
                raise IndexError(f"gather_block_tables: {_ERRORS[30]} out of bounds (group {g})")
            reach = np.int64(reaches[g])
            if reach > 0:
                if g >= sizes.size:
                    raise IndexError(f"gather_block_tables: {_ERRORS[30]} out of bounds (group {g})")
                bs = np.int64(sizes[g])
        args = (np.asarray(idx_mapping), src, dst, W, nb, NBW, np.int64(g), np.int64(max(0, int(num_reqs))),
                np.int64(max(0, int(num_rows))), nct, reach, bs, bool(MASK_SLIDING_WINDOW))
        _raise_if_error(_gather_tables_loops(*args, False), "gather_block_tables")
        runs.append(args)
    for args in runs:
        _gather_tables_loops(*args, True)


# --------------------------------------------------------------------------------------------
# 22. _compute_slot_mappings_kernel
# --------------------------------------------------------------------------------------------


@entry("out")
def _slot_mapping_loops(idx, qsl, pos, table, W, bs, enabled, sharded, out, base, MT, cp_rank, CP, IL, PAD, B,
                        do_write):  # fmt: skip
    for b in range(B):
        if b >= idx.shape[0]:
            return np.int64(1), np.int64(b), np.int64(b)
        s = np.int64(idx[b])
        real = s >= 0
        if b + 1 >= qsl.shape[0]:
            return np.int64(2), np.int64(b), np.int64(b + 1)
        qs = np.int64(qsl[b])
        qe = np.int64(qsl[b + 1])
        for t in range(qs, qe):
            if t < 0 or t >= pos.shape[0]:
                return np.int64(31), np.int64(b), np.int64(t)
            p = np.int64(pos[t])
            lp = p
            local = True
            if CP != 1 and sharded:
                V = np.int64(np.int32(bs * CP))
                vo = p % V
                local = (vo // IL) % CP == cp_rank
                lp = (p // V) * bs + (vo // (IL * CP)) * IL + vo % IL
            col = lp // bs if enabled else np.int64(0)
            bn = np.int64(0)
            if local and real:
                at = s * W + col
                if at < 0 or at >= table.shape[0]:
                    return np.int64(32), np.int64(b), at
                bn = np.int64(table[at])
            slot = np.int64(np.int32(bn * bs)) + lp % bs
            if not (local and real and enabled):
                slot = PAD
            o = base + t
            if o < 0 or o >= out.shape[0]:
                return np.int64(33), np.int64(b), o
            if do_write:
                out[o] = slot
    if B >= qsl.shape[0]:
        return np.int64(2), np.int64(B), np.int64(B)
    for t in range(np.int64(qsl[B]), MT):
        o = base + t
        if o < 0 or o >= out.shape[0]:
            return np.int64(33), np.int64(B), o
        if do_write:
            out[o] = PAD
    return _OK


def compute_slot_mappings(
    *, idx_mapping, query_start_loc, positions, block_tables, block_sizes, slot_mapping_enabled, dcp_sharded,
    slot_mappings, cp_rank, num_reqs, max_num_tokens, CP_SIZE=1, CP_INTERLEAVE=1, PAD_ID=-1,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §22; same rules as ``vectorized_v2.compute_slot_mappings``: the groups
    one after another, each group's rows, then its padding program."""
    out, SW = _table(slot_mappings, "slot_mappings")
    sizes = np.asarray(block_sizes).reshape(-1)
    enabled = np.asarray(slot_mapping_enabled).reshape(-1)
    sharded = np.asarray(dcp_sharded).reshape(-1)
    runs = []
    for g in range(len(block_tables)):
        table, W = _table(block_tables[g], f"block_tables[{g}]")
        if g >= sizes.size or g >= enabled.size or (int(CP_SIZE) != 1 and g >= sharded.size):
            raise IndexError(f"compute_slot_mappings: per-group flags out of bounds (group {g})")
        args = (np.asarray(idx_mapping), np.asarray(query_start_loc), np.asarray(positions), table, W,
                np.int64(sizes[g]), bool(enabled[g]), bool(sharded[g]) if int(CP_SIZE) != 1 else False, out,
                np.int64(g) * SW, np.int64(int(max_num_tokens)), np.int64(int(cp_rank)), np.int64(int(CP_SIZE)),
                np.int64(int(CP_INTERLEAVE)), np.int64(int(PAD_ID)), np.int64(max(0, int(num_reqs))))
        _raise_if_error(_slot_mapping_loops(*args, False), "compute_slot_mappings")
        runs.append(args)
    for args in runs:
        _slot_mapping_loops(*args, True)


# --------------------------------------------------------------------------------------------
# 23. _gather_draft_sampled_kernel
# --------------------------------------------------------------------------------------------


@entry("out_pos", "out_tok")
def _gather_draft_loops(out_tok, out_pos, ids, pos, li, eidx, epos, plen, n, do_write):
    for j in range(n):
        if j >= li.shape[0]:
            return np.int64(34), np.int64(j), np.int64(j)
        ti = np.int64(li[j])
        if ti < 0 or ti >= ids.shape[0]:
            return np.int64(35), np.int64(j), ti
        if ti >= pos.shape[0]:
            return np.int64(31), np.int64(j), ti
        tok = np.int64(ids[ti])
        p = np.int64(pos[ti])
        if j >= eidx.shape[0]:
            return np.int64(36), np.int64(j), np.int64(j)
        if j >= epos.shape[0]:
            return np.int64(37), np.int64(j), np.int64(j)
        s = np.int64(eidx[j])
        lp = np.int64(epos[j])
        if s < 0 or s >= plen.shape[0]:
            return np.int64(3), np.int64(j), s
        if lp > 0 and p - lp < np.int64(plen[s]):
            tok = np.int64(-1)
        if j >= out_tok.shape[0]:
            return np.int64(38), np.int64(j), np.int64(j)
        if j >= out_pos.shape[0]:
            return np.int64(39), np.int64(j), np.int64(j)
        if do_write:
            out_tok[j] = tok
            out_pos[j] = p
    return _OK


def gather_draft_sampled(*, draft_sampled, pos, input_ids, positions, logits_indices, expanded_idx_mapping,
                         expanded_local_pos, prefill_len, num_logits) -> None:
    """docs/CONTRACT.md §23; same rules as ``vectorized_v2.gather_draft_sampled``."""
    args = (_flat(draft_sampled, "draft_sampled"), _flat(pos, "pos"), np.asarray(input_ids), np.asarray(positions),
            np.asarray(logits_indices), np.asarray(expanded_idx_mapping), np.asarray(expanded_local_pos),
            np.asarray(prefill_len), np.int64(max(0, int(num_logits))))
    _run(_gather_draft_loops, args, "gather_draft_sampled")


# --------------------------------------------------------------------------------------------
# 24. _flatten_sampled_kernel
# --------------------------------------------------------------------------------------------


@entry("flat")
def _flatten_loops(flat, sampled, SS, ns, cu, B, do_write):
    for b in range(B):
        if b >= cu.shape[0]:
            return np.int64(10), np.int64(b), np.int64(b)
        start = np.int64(cu[b])
        if b >= ns.shape[0]:
            return np.int64(17), np.int64(b), np.int64(b)
        for i in range(np.int64(ns[b])):
            src = np.int64(np.int32(b * SS + i))
            if src < 0 or src >= sampled.shape[0]:
                return np.int64(40), np.int64(b), src
            dst = np.int64(np.int32(start + i))
            if dst < 0 or dst >= flat.shape[0]:
                return np.int64(41), np.int64(b), dst
            if do_write:
                flat[dst] = sampled[src]
    return _OK


def flatten_sampled(*, flat_sampled, sampled, num_sampled, cu_num_logits, num_reqs) -> None:
    """docs/CONTRACT.md §24; same rules as ``vectorized_v2.flatten_sampled``."""
    table, SS = _table(sampled, "sampled")
    flat = _flat(flat_sampled, "flat_sampled")
    if flat.dtype != table.dtype:
        raise TypeError("flat_sampled has sampled's dtype")
    args = (flat, table, SS, np.asarray(num_sampled), np.asarray(cu_num_logits), np.int64(max(0, int(num_reqs))))
    _run(_flatten_loops, args, "flatten_sampled")


# --------------------------------------------------------------------------------------------
# 25. target_dependent_ar_prepare_prefill_inputs_kernel
# --------------------------------------------------------------------------------------------


@entry("d_ids", "d_pos", "d_qsl", "d_seq", "lti_out", "step")
def _draft_prefill_loops(lti_out, step, d_ids, d_pos, d_qsl, d_seq, t_ids, t_pos, idx, last, npt, ns, nr, qsl,
                         seq, R, B, do_write):  # fmt: skip
    for b in range(B):
        if b >= idx.shape[0]:
            return np.int64(1), np.int64(b), np.int64(b)
        s = np.int64(idx[b])
        if b + 1 >= qsl.shape[0]:
            return np.int64(2), np.int64(b), np.int64(b + 1)
        qs = np.int64(qsl[b])
        qe = np.int64(qsl[b + 1])
        if b >= seq.shape[0]:
            return np.int64(12), np.int64(b), np.int64(b)
        sl = seq[b]
        if b >= nr.shape[0]:
            return np.int64(25), np.int64(b), np.int64(b)
        q = np.int64(np.int32(np.int64(np.int32(qe - qs)) - np.int64(nr[b])))
        if b >= ns.shape[0]:
            return np.int64(17), np.int64(b), np.int64(b)
        if ns[b] > 0:
            if s < 0 or s >= last.shape[0]:
                return np.int64(44), np.int64(b), s
            nxt = np.int32(last[s])
        else:
            if s < 0 or s >= npt.shape[0]:
                return np.int64(45), np.int64(b), s
            nxt = np.int32(npt[s])
        for i in range(1, q):
            src = np.int64(np.int32(qs + i))
            if src < 0 or src >= t_ids.shape[0]:
                return np.int64(42), np.int64(b), src
            dst = np.int64(np.int32(qs + i - 1))
            if dst < 0 or dst >= d_ids.shape[0]:
                return np.int64(46), np.int64(b), dst
            if do_write:
                d_ids[dst] = t_ids[src]
        lti = np.int64(np.int32(qs + q - 1))
        if b >= lti_out.shape[0]:
            return np.int64(48), np.int64(b), np.int64(b)
        if lti < 0 or lti >= d_ids.shape[0]:
            return np.int64(46), np.int64(b), lti
        if do_write:
            lti_out[b] = lti
            d_ids[lti] = nxt
        for i in range(q):
            t = np.int64(np.int32(qs + i))
            if t < 0 or t >= t_pos.shape[0]:
                return np.int64(43), np.int64(b), t
            if t >= d_pos.shape[0]:
                return np.int64(47), np.int64(b), t
            if do_write:
                d_pos[t] = t_pos[t]
        if b >= d_qsl.shape[0]:
            return np.int64(49), np.int64(b), np.int64(b)
        if b >= d_seq.shape[0]:
            return np.int64(8), np.int64(b), np.int64(b)
        if do_write:
            d_qsl[b] = np.int32(qs)
            d_seq[b] = sl
        if b == B - 1:
            if step.shape[0] < 1:
                return np.int64(50), np.int64(b), np.int64(0)
            if do_write:
                step[0] = 0
            for i in range(B, R + 1):
                if i >= d_qsl.shape[0]:
                    return np.int64(49), np.int64(b), np.int64(i)
                if do_write:
                    d_qsl[i] = np.int32(qe)
            for i in range(B, R):
                if i >= d_seq.shape[0]:
                    return np.int64(8), np.int64(b), np.int64(i)
                if i >= lti_out.shape[0]:
                    return np.int64(48), np.int64(b), np.int64(i)
                if do_write:
                    d_seq[i] = 0
                    lti_out[i] = 0
    return _OK


def target_dependent_ar_prepare_prefill_inputs(
    *, last_token_indices, draft_current_step, draft_input_ids, draft_positions, draft_query_start_loc,
    draft_seq_lens, target_input_ids, target_positions, idx_mapping, last_sampled, next_prefill_tokens,
    num_sampled, num_rejected, query_start_loc, seq_lens, max_num_reqs, num_reqs,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §25; same rules as
    ``vectorized_v2.target_dependent_ar_prepare_prefill_inputs``."""
    args = (_flat(last_token_indices, "last_token_indices"), _flat(draft_current_step, "draft_current_step"),
            _flat(draft_input_ids, "draft_input_ids"), _flat(draft_positions, "draft_positions"),
            _flat(draft_query_start_loc, "draft_query_start_loc"), _flat(draft_seq_lens, "draft_seq_lens"),
            np.asarray(target_input_ids), np.asarray(target_positions), np.asarray(idx_mapping),
            _flat(last_sampled, "last_sampled"), _flat(next_prefill_tokens, "next_prefill_tokens"),
            np.asarray(num_sampled), np.asarray(num_rejected), np.asarray(query_start_loc), np.asarray(seq_lens),
            np.int64(int(max_num_reqs)), np.int64(max(0, int(num_reqs))))
    _run(_draft_prefill_loops, args, "target_dependent_ar_prepare_prefill_inputs")


# --------------------------------------------------------------------------------------------
# 26. _prepare_decode_inputs_kernel
# --------------------------------------------------------------------------------------------


@entry("ids", "pos", "qsl", "seq", "src_pos")
def _decode_inputs_loops(drafts, DW, tsl, nr, ids, pos, src_pos, qsl, seq, M, R, B, advance, do_write):
    for b in range(B):
        at = np.int64(b) * DW
        if at >= drafts.shape[0]:
            return np.int64(14), np.int64(b), at
        if b >= ids.shape[0]:
            return np.int64(6), np.int64(b), np.int64(b)
        if b >= src_pos.shape[0]:
            return np.int64(52), np.int64(b), np.int64(b)
        if b >= tsl.shape[0]:
            return np.int64(51), np.int64(b), np.int64(b)
        if b >= nr.shape[0]:
            return np.int64(25), np.int64(b), np.int64(b)
        sl = np.int64(np.int32(np.int64(tsl[b]) - np.int64(nr[b])))
        if advance:
            if b >= pos.shape[0]:
                return np.int64(53), np.int64(b), np.int64(b)
            p = np.int64(pos[b]) + 1
            if p > M - 1:
                p = M - 1
            if do_write:
                pos[b] = p
            sl = np.int64(np.int32(sl + 1))
            if sl > M:
                sl = M
        if b >= seq.shape[0]:
            return np.int64(8), np.int64(b), np.int64(b)
        if do_write:
            ids[b] = np.int32(drafts[at])
            src_pos[b] = src_pos[b] + 1
            seq[b] = np.int32(sl)
    for i in range(R + 1):
        if i >= qsl.shape[0]:
            return np.int64(54), np.int64(B), np.int64(i)
        if do_write:
            qsl[i] = np.int32(min(np.int64(i), B))
    for i in range(B, R):
        if i >= seq.shape[0]:
            return np.int64(8), np.int64(B), np.int64(i)
        if do_write:
            seq[i] = 0
    return _OK


def prepare_decode_inputs(
    *, draft_tokens, target_seq_lens, num_rejected, input_ids, positions, sample_src_positions, query_start_loc,
    seq_lens, max_model_len, max_num_reqs, num_reqs, ADVANCE_DRAFT_POSITIONS=True,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §26; same rules as ``vectorized_v2.prepare_decode_inputs``."""
    drafts, DW = _table(draft_tokens, "draft_tokens")
    args = (drafts, DW, np.asarray(target_seq_lens), np.asarray(num_rejected), _flat(input_ids, "input_ids"),
            _flat(positions, "positions"), _flat(sample_src_positions, "sample_src_positions"),
            _flat(query_start_loc, "query_start_loc"), _flat(seq_lens, "seq_lens"), np.int64(int(max_model_len)),
            np.int64(int(max_num_reqs)), np.int64(max(0, int(num_reqs))), bool(ADVANCE_DRAFT_POSITIONS))
    _run(_decode_inputs_loops, args, "prepare_decode_inputs")


# --------------------------------------------------------------------------------------------
# 27. _update_draft_inputs_kernel
# --------------------------------------------------------------------------------------------


@entry("ids", "nxt", "out", "pos", "seq", "src_pos")
def _update_draft_loops(out, OW, nxt, NW, ids, pos, src_pos, seq, drafts, step, hs, HW, H, M, K, B, advance,
                        do_write):  # fmt: skip
    for b in range(B):
        if b >= drafts.shape[0]:
            return np.int64(14), np.int64(b), np.int64(b)
        tok = np.int64(drafts[b])
        at = np.int64(b) * OW + step
        if at < 0 or at >= out.shape[0]:
            return np.int64(55), np.int64(b), at
        if do_write:
            out[at] = tok
        if step >= K - 1:
            continue
        if b >= src_pos.shape[0]:
            return np.int64(52), np.int64(b), np.int64(b)
        if b >= ids.shape[0]:
            return np.int64(6), np.int64(b), np.int64(b)
        if do_write:
            src_pos[b] = src_pos[b] + 1
            ids[b] = np.int32(tok)
        for j in range(H):
            src = np.int64(b) * HW + j
            if src >= hs.shape[0]:
                return np.int64(56), np.int64(b), src
            dst = np.int64(b) * NW + j
            if dst >= nxt.shape[0]:
                return np.int64(57), np.int64(b), dst
            if do_write:
                nxt[dst] = hs[src]
        if advance:
            if b >= pos.shape[0]:
                return np.int64(53), np.int64(b), np.int64(b)
            if b >= seq.shape[0]:
                return np.int64(58), np.int64(b), np.int64(b)
            p = np.int64(pos[b]) + 1
            if p > M - 1:
                p = M - 1
            sl = np.int64(np.int32(np.int64(seq[b]) + 1))
            if sl > M:
                sl = M
            if do_write:
                pos[b] = p
                seq[b] = np.int32(sl)
    return _OK


def update_draft_inputs(
    *, output_draft_tokens, next_input_hidden_states, input_ids, positions, sample_src_positions, seq_lens,
    draft_tokens, current_draft_step, hidden_states, hidden_size, max_model_len, num_speculative_steps,
    num_reqs, ADVANCE_DRAFT_POSITIONS=True,
) -> None:  # fmt: skip
    """docs/CONTRACT.md §27; same rules as ``vectorized_v2.update_draft_inputs``. The hidden
    states are copied as unsigned integers of their width (bit for bit)."""
    out, OW = _table(output_draft_tokens, "output_draft_tokens")
    hs, HW = _table(hidden_states, "hidden_states")
    nxt, NW = _table(next_input_hidden_states, "next_input_hidden_states")
    if hs.dtype.itemsize != nxt.dtype.itemsize:
        raise TypeError("hidden_states and next_input_hidden_states must have one element width")
    bits = np.dtype(f"u{hs.dtype.itemsize}")
    args = (out, OW, nxt.view(bits), NW, _flat(input_ids, "input_ids"), _flat(positions, "positions"),
            _flat(sample_src_positions, "sample_src_positions"), _flat(seq_lens, "seq_lens"), np.asarray(draft_tokens),
            np.int64(_flat(current_draft_step, "current_draft_step")[0]), hs.view(bits), HW,
            np.int64(max(0, int(hidden_size))), np.int64(int(max_model_len)), np.int64(int(num_speculative_steps)),
            np.int64(max(0, int(num_reqs))), bool(ADVANCE_DRAFT_POSITIONS))
    _run(_update_draft_loops, args, "update_draft_inputs")
