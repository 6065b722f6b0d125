"""Torch oracles for the EAGLE helper kernels (docs/CONTRACT.md §1, §6, §9), the torch functions
``compute_new_slot_mapping`` and ``update_num_computed_tokens_for_batch_change`` (§7, §8) and
the rejection sampler's kernels (§10-§13), written from the contract, to run on the
GPU beside the kernel (the device campaign, :mod:`eaglefuzz.harness.checking.device_mode`). The prepare
kernels' cases are small and checked on the host with the NumPy oracle instead.

They compute the same thing as :mod:`.vectorized` and :mod:`.loops`, in *scatter form*: for
each output, the flat indices the contract writes and the values it writes there
(``{name: (index, value)}``; ``index`` int64, ``value`` in the output's dtype). Elements not
listed stay untouched. Knowing the written set directly is what lets the device campaign
build its expected buffers (and pre-fill the outputs so that a missing write always shows)
without a second oracle run.

Only the production domain (§N.2) is covered: every request has ``qlen >= 1``, ``P - s >= 1``
and so on. Cases outside it go through the NumPy and Numba oracles. Index arithmetic is
int64; values wrap to their output's width as the kernel's stores do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import torch

from .host_copy import host_to

__all__ = ["copy_and_expand_eagle_inputs", "expand_slots"]

Writes = dict[str, tuple[torch.Tensor, torch.Tensor]]


def _ragged(lengths: torch.Tensor, total: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """For rows of ``lengths`` (int64, >= 0; ``total`` their sum when the caller knows it, which
    spares a wait for the device): each element's row and its index in the row."""
    total = int(lengths.sum()) if total is None else total
    row = torch.repeat_interleave(torch.arange(lengths.numel(), device=lengths.device), lengths, output_size=total)
    starts = torch.cumsum(lengths, 0) - lengths
    return row, torch.arange(total, device=lengths.device) - starts[row]


def copy_and_expand_eagle_inputs(
    *,
    target_token_ids: torch.Tensor,
    target_positions: torch.Tensor,
    next_token_ids: torch.Tensor,
    query_start_loc: torch.Tensor,
    query_end_loc: torch.Tensor,
    padding_token_id: int | Sequence[int],
    parallel_drafting_token_id: int | Sequence[int],
    total_input_tokens: int | Sequence[int],
    num_padding_slots_per_request: int | Sequence[int],
    shift_input_ids: bool | Sequence[bool],
    tokens: int | Sequence[int] | None = None,
    requests: Sequence[int] | None = None,
    slots: Callable[..., tuple[torch.Tensor, ...]] | None = None,
) -> Writes:
    """§1.1: per request ``r``, ``total = qlen + P - s`` slots from ``out_start = qs + r*(P - s)``:
    valid slots (``j < nv``), the bonus (``j == nv``), ``P - 1`` parallel-drafting slots, then the
    rejected tokens as padding; the new-token indices of the bonus and parallel slots; in shift
    mode the hidden-state mapping of every input token.

    ``tokens``: the requests' input tokens, ``query_start_loc[R] - query_start_loc[0]``, when
    the caller knows it (``T`` in the production domain); read from the device otherwise.

    Several cases at once: ``requests``, each case's request count (known on the host); every
    input the cases' arrays concatenated case after case (each case's ``query_start_loc`` its
    own ``R + 1`` entries, each case's ``target_token_ids`` ``total_input_tokens`` long), every
    scalar (and ``tokens``) one per case. Each output's indices are then flat indices in the
    concatenation of the cases' outputs (``T + R*(P - s)`` elements each for the slots, ``R*P``
    for the new-token indices, ``T`` for the hidden-state mapping); values are what each case
    alone writes (indices into its own outputs).

    ``slots``: :func:`expand_slots` or a function equal to it (a compiled one), which computes
    every slot's values from the per-request table."""
    single = requests is None
    C = 1 if single else len(requests)

    def per_case(v: object) -> np.ndarray:
        return np.asarray([v] if single else list(v), dtype=np.int64)

    req = np.asarray([query_end_loc.numel()] if single else list(requests), dtype=np.int64)
    P, s, T = per_case(num_padding_slots_per_request), per_case(shift_input_ids), per_case(total_input_tokens)
    pad, par = per_case(padding_token_id), per_case(parallel_drafting_token_id)
    dev = query_start_loc.device
    qsl = query_start_loc.long()
    R = int(req.sum())
    case = np.repeat(np.arange(C), req)  # each request's case
    first = np.cumsum(req) - req
    local = np.arange(R) - first[case]  # each request's index in its case
    if tokens is None:  # each case's qsl[R] - qsl[0], from the device
        ends = first + np.arange(C)
        tok = (qsl[host_to(ends + req, dev)] - qsl[host_to(ends, dev)]).cpu().numpy()
    else:
        tok = per_case(tokens)
    tok_off = np.cumsum(T) - T  # each case's first input token in the concatenation
    slot_counts = tok + req * (P - s)
    out_off = np.cumsum(slot_counts) - slot_counts  # each case's first slot in the concatenation of its outputs
    host = host_to(np.stack([  # per request, one copy to the device
        np.arange(R) + case, local * (P - s)[case], P[case], s[case], T[case] - 1, tok_off[case], out_off[case],
        pad[case], par[case]]), dev)
    at, r_ps, Pr, sr, last, toff, ooff, padr, parr = host
    qs, nqs, qe = qsl[at], qsl[at + 1], query_end_loc.long()
    nv = qe - qs + 1 - sr
    out_start = qs + r_ps  # in the case's own outputs
    # every slot g of the requests concatenated, request r's from first[r]: its j = g - first[r];
    # each per-request quantity below is shifted by -first so that a slot reads it as a
    # function of g (one gather of a table of them per slot, no per-slot j)
    n = nqs - qs + Pr - sr
    slot_ends = torch.cumsum(n, 0)
    first = slot_ends - n
    valid_end = first + nv
    table = torch.stack([valid_end, valid_end + Pr, toff + qs + sr - first, toff + last,
                         target_positions[toff + qs].long() - first, ooff + out_start - first])
    ids = torch.stack([next_token_ids.reshape(-1).long(), parr, padr]).to(torch.int32)
    dest, ids, positions, rejected, parallel = (slots or expand_slots)(table, ids, slot_ends, target_token_ids,
                                                                       int(slot_counts.sum()))
    positions = positions.to(target_positions.dtype)
    kr = torch.arange(int((req * P).sum()), device=dev)  # new-token index r*P + k of each case, concatenated
    rk, k = _ragged(Pr, kr.numel())
    writes: Writes = {
        "out_input_ids": (dest, ids),
        "out_positions": (dest, positions),
        "out_is_rejected_token_mask": (dest, rejected),
        "out_is_masked_token_mask": (dest, parallel),
        "out_new_token_indices": (kr, (out_start[rk] + nv[rk] + k).to(torch.int32)),
    }
    if s.any():  # the hidden-state mapping of the shift cases' input tokens
        tr, tj = _ragged(torch.where(sr > 0, nqs - qs, 0), int((tok * s).sum()))
        writes["out_hidden_state_mapping"] = (toff[tr] + qs[tr] + tj, (out_start[tr] + tj).to(torch.int32))
    return writes


def expand_slots(table: torch.Tensor, ids: torch.Tensor, ends: torch.Tensor, target_token_ids: torch.Tensor,
                 total: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """§1.1's ``total`` slots of the requests concatenated, slot ``g`` request ``r``'s (``ends``,
    int64 ``[R]``: each request's end among the slots, ascending). ``table`` (int64 ``[6, R]``)
    holds per request, each shifted by minus its first slot so that a slot reads it as a
    function of ``g``: where its bonus slot is and where its padding starts, where its valid
    slots read their ids (``g`` plus the shift, at most the last input token), its first
    position and its first output place; ``ids`` (int32 ``[3, R]``) its next-token,
    parallel-drafting and padding ids. Returns, per slot, its output place (int64), id (int32),
    position (int64, 0 for padding), whether it is padding (rejected) and whether a
    parallel-drafting slot. Elementwise past the request lookup (one pass when compiled:
    :mod:`~eaglefuzz.harness.targetkit.fused`)."""
    g = torch.arange(total, device=ends.device)
    r = torch.searchsorted(ends, g, right=True)
    bonus_at, pad_from, src_shift, src_last, pos_shift, dest_shift = table[:, r].unbind(0)
    nxt, par, pad = ids[:, r].unbind(0)
    valid = g < bonus_at
    rejected = g >= pad_from
    parallel = (g > bonus_at) & ~rejected
    src = torch.minimum(g + src_shift, src_last)
    ids = torch.where(valid, target_token_ids[torch.where(valid, src, 0)].to(torch.int32),
                      torch.where(parallel, par, torch.where(rejected, pad, nxt)))
    positions = torch.where(rejected, 0, g + pos_shift)
    return g + dest_shift, ids, positions, rejected, parallel


# --------------------------------------------------------------------------------------------
# §10-§13: the rejection sampler's kernels (production domain: 0 <= d_r <= max_spec_len, ids
# and tables as vLLM passes them, no NaN score in §13)
# --------------------------------------------------------------------------------------------

__all__ += ["expand", "rejection_greedy_sample", "rejection_random_sample", "sample_recovered_tokens", "recovered_keys",
            "recovered_winners", "recovered_chunk", "check_support"]


def _draft_positions(cu: torch.Tensor, rows: torch.Tensor, tokens: int | None = None) -> tuple[torch.Tensor, ...]:
    """For the requests ``rows`` (int64 indices) of the inclusive cumsum ``cu``: each of their
    draft positions' request, its index ``j`` in the request and its token ``t = s_r + j``;
    and every request's start and draft count."""
    cu = cu.long()
    start = torch.cat([cu.new_zeros(1), cu[:-1]])
    d = cu - start
    total = None if tokens is None or rows.numel() != cu.numel() else tokens
    k, j = _ragged(d[rows], total)
    r = rows[k]
    return r, j, start[r] + j, start, d


def _first_rejection(r: torch.Tensor, rejected: torch.Tensor, B: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions visited (none of the request's earlier drafts rejected; ``r`` is sorted) and,
    per request, whether any of its drafts was rejected."""
    c = torch.cumsum(rejected.long(), 0)
    counts = torch.zeros(B, dtype=torch.long, device=r.device).index_add_(0, r, rejected.long())
    before_row = torch.cumsum(counts, 0) - counts
    visited = (c - rejected.long() - before_row[r]) == 0
    return visited, counts > 0


def _row_writes(rows, r, j, t_vals, visited, any_rejected, d, bonus, L, out_start=None) -> Writes:
    start = torch.arange(d.numel(), device=d.device) * (L + 1) if out_start is None else out_start.long()
    keep = ~any_rejected[rows]
    bonus_rows = rows[keep]
    index = torch.cat([start[r[visited]] + j[visited], start[bonus_rows] + d[bonus_rows]])
    value = torch.cat([t_vals[visited].to(torch.int32), bonus.reshape(-1)[bonus_rows].to(torch.int32)])
    return {"output_token_ids": (index, value)}


def rejection_greedy_sample(
    *,
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    target_argmax: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    is_greedy: torch.Tensor | None,
    max_spec_len: int,
    uniform_probs: torch.Tensor | None = None,
    synthetic_conditional_rates: torch.Tensor | None = None,
    tokens: int | None = None,
    out_start: torch.Tensor | None = None,
) -> Writes:
    """§10.1 in scatter form on ``output_token_ids`` (flat, rows ``max_spec_len + 1`` apart):
    per processed request, positions up to the first rejection get the argmax (or, in
    synthetic mode, the accepted draft), the bonus follows when none was rejected.

    Several steps at once (their requests concatenated, ``cu_num_draft_tokens`` the inclusive
    cumsum over all of them, each step's synthetic rates a prefix of the same rates):
    ``out_start``, each request's first output element (default ``r * (max_spec_len + 1)``)."""
    B = cu_num_draft_tokens.numel()
    dev = cu_num_draft_tokens.device
    rows = torch.arange(B, device=dev) if is_greedy is None else torch.nonzero(is_greedy, as_tuple=True)[0]
    r, j, t, _, d = _draft_positions(cu_num_draft_tokens, rows, tokens)
    did = draft_token_ids[t].long()
    a = target_argmax[t].to(torch.int32).long()
    if synthetic_conditional_rates is None:
        rejected, val = did != a, a
    else:
        accepted = (uniform_probs[t].double() < synthetic_conditional_rates[j].double()) & (did >= 0)
        rejected, val = ~accepted, torch.where(accepted, did, a)
    visited, any_rejected = _first_rejection(r, rejected, B)
    return _row_writes(rows, r, j, val, visited, any_rejected, d, bonus_token_ids, max_spec_len, out_start)


def rejection_random_sample(
    *,
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    recovered_token_ids: torch.Tensor,
    uniform_probs: torch.Tensor,
    is_greedy: torch.Tensor,
    max_spec_len: int,
    vocab_size: int,
    synthetic_conditional_rates: torch.Tensor | None = None,
    table_row: torch.Tensor | None = None,
    out_start: torch.Tensor | None = None,
    with_reads: bool = False,
) -> Writes | tuple[Writes, tuple[torch.Tensor, torch.Tensor]]:
    """§11.1 in scatter form: per request with ``not is_greedy[r]``, a ``-1`` draft rejected,
    else (synthetic) ``u < rate[j]``, else ``q > 0 and float32(p / q) >= u`` (``q = 1``
    without draft probabilities); the recovered id at the first rejection, the bonus when none.

    Several steps at once (requests of several steps concatenated, each step's tokens reading
    its own rows of shared tables): ``table_row``, each draft token's row of the tables
    (default: the token's index); ``out_start``, each request's first output element (default
    ``r * (max_spec_len + 1)``). ``with_reads``: also the tables' reads §11.1 makes (the
    visited positions with a draft id, outside synthetic mode), each one's draft token and the
    flat index ``row * vocab_size + id`` it reads at."""
    B = cu_num_draft_tokens.numel()
    rows = torch.nonzero(~is_greedy, as_tuple=True)[0]
    r, j, t, _, d = _draft_positions(cu_num_draft_tokens, rows)
    did = draft_token_ids[t].long()
    u = uniform_probs[t]
    if synthetic_conditional_rates is not None:
        accepted = (did >= 0) & (u.double() < synthetic_conditional_rates[j].double())
    else:
        flat = (t if table_row is None else table_row.long()[t]) * vocab_size + did.clamp(min=0)
        p = target_probs.reshape(-1)[flat]
        if draft_probs is None:
            accepted = p.double() >= u.double()
        else:
            q = draft_probs.reshape(-1)[flat]
            accepted = (q > 0) & ((p / q).double() >= u.double())
        accepted &= did >= 0
    val = torch.where(accepted, did, recovered_token_ids[t].long())
    visited, any_rejected = _first_rejection(r, ~accepted, B)
    writes = _row_writes(rows, r, j, val, visited, any_rejected, d, bonus_token_ids, max_spec_len, out_start)
    if not with_reads:
        return writes
    if synthetic_conditional_rates is not None:
        return writes, (t[:0], t[:0])
    read = visited & (did >= 0)
    return writes, (t[read], flat[read])


def expand(
    *,
    input: torch.Tensor,  # noqa: A002 - the contract's name
    cu_num_tokens: torch.Tensor,
    replace_from: int,
    replace_to: int,
    MAX_NUM_TOKENS: int = 128,  # noqa: N803 - the kernel's name
    tokens: int | None = None,
) -> Writes:
    """§12.1 in scatter form on ``output``: ``input[r]`` (``replace_to`` where it equals
    ``replace_from``, compared in the data's dtype: float32 after rounding both ints) at
    ``s_r + k`` for ``k < min(n_r, MAX_NUM_TOKENS)``. ``tokens``: the elements written, where
    the caller knows them (no wait for the device to count them)."""
    cu = cu_num_tokens.long()
    start = torch.cat([cu.new_zeros(1), cu[:-1]])
    n = (cu - start).clamp(0, MAX_NUM_TOKENS)
    to = torch.tensor(replace_to, dtype=torch.int64).to(input.dtype).to(input.device)  # rounded or truncated
    if input.dtype.is_floating_point:
        hit = input == torch.tensor(replace_from, dtype=torch.int64).to(input.dtype).to(input.device)
    else:
        hit = input.long() == replace_from  # exact
    x = torch.where(hit, to, input)
    r, k = _ragged(n, tokens)
    return {"output": (start[r] + k, x[r])}


RECOVERED_CHUNK = 1 << 26
"""Score elements (tokens x vocabulary) :func:`sample_recovered_tokens` computes at once."""


def sample_recovered_tokens(
    *,
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    inv_q: torch.Tensor,
    vocab_size: int,
    max_spec_len: int,
    table_row: torch.Tensor | None = None,
    noise_row: torch.Tensor | None = None,
    support: torch.Tensor | None = None,
) -> Writes:
    """§13.1 in scatter form on ``output_token_ids``, for production inputs (``V >= 1``, no NaN
    score): per token of position ``j < max_spec_len``, the first index of the maximum of
    ``p_v * inv_q[r, v]`` over the vocabulary, ``p`` the target with the draft id zeroed
    (without draft probabilities) or ``fmax(target - draft, 0)`` in float32; the product in
    float64 when ``inv_q`` is float64 (``USE_FP64_GUMBEL``). ``torch.argmax`` returns the first
    index of the maximum, as the kernel's tiles do.

    Several steps at once (requests concatenated, each step reading its own rows of shared
    tables and noise): ``table_row``, each draft token's row of the tables (default: its
    index); ``noise_row``, each request's row of ``inv_q`` (default: its index).

    ``support`` (int64 ``[rows, k]``, distinct positions per row): where each row of
    ``target_probs`` may be nonzero (top-k or top-p rows). Then ``p`` is 0 off it, so each
    token's maximum is found among its row's ``k`` positions (the first index of a positive
    maximum; index 0 when every score is 0) and the whole rows are read once, only to check
    that they hold (:func:`check_support`).

    The two halves, for a caller that computes each distinct token once over many calls:
    :func:`recovered_keys` and :func:`recovered_winners`."""
    t, key, inverse = recovered_keys(cu_num_draft_tokens=cu_num_draft_tokens, draft_token_ids=draft_token_ids,
                                     vocab_size=vocab_size, max_spec_len=max_spec_len, with_draft=draft_probs is not None,
                                     table_row=table_row, noise_row=noise_row)
    if support is not None:
        check_support(target_probs.reshape(-1, vocab_size), None if draft_probs is None else draft_probs.reshape(-1, vocab_size),
                      support)
    out = recovered_winners(key, target_probs, draft_probs, inv_q, vocab_size, support)
    return {"output_token_ids": (t, out[inverse].clamp(max=vocab_size - 1).to(torch.int32))}


def recovered_keys(*, cu_num_draft_tokens: torch.Tensor, draft_token_ids: torch.Tensor, vocab_size: int,
                   max_spec_len: int, with_draft: bool, table_row: torch.Tensor | None = None,
                   noise_row: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The processed tokens ``t`` of :func:`sample_recovered_tokens` (position ``j <
    max_spec_len``) and what decides each one's winner: its table row, its noise row and
    (without draft probabilities) its draft id where it lies in ``[0, V)``, else ``-1``; as
    ``key`` (int64 ``[n, 3]``, distinct rows in ascending order) and ``inverse`` (each
    token's row of ``key``)."""
    B = cu_num_draft_tokens.numel()
    V = vocab_size
    rows = torch.arange(B, device=cu_num_draft_tokens.device)
    r, j, t, _, _ = _draft_positions(cu_num_draft_tokens, rows)
    keep = j < max_spec_len
    r, t = r[keep], t[keep]
    at = t if table_row is None else table_row.long()[t]
    qrow = r if noise_row is None else noise_row.long()[r]
    did = draft_token_ids[t].long()
    did = torch.where((did >= 0) & (did < V) & (not with_draft), did, -1)
    key, inverse = torch.unique(torch.stack([at, qrow, did], 1), dim=0, return_inverse=True)
    return t, key, inverse


def recovered_winners(key: torch.Tensor, target_probs: torch.Tensor, draft_probs: torch.Tensor | None,
                      inv_q: torch.Tensor, vocab_size: int, support: torch.Tensor | None = None,
                      chunk: Callable[..., tuple[torch.Tensor]] | None = None) -> torch.Tensor:
    """Each :func:`recovered_keys` row's winner (int64, before the clamp to ``V - 1``), §13.1
    as :func:`sample_recovered_tokens` states it; with ``support``, on its positions alone
    (the caller has checked it: :func:`check_support`). Over whole rows, a chunk of keys at a
    time by ``chunk`` (:func:`recovered_chunk` by default; a caller may pass it compiled)."""
    V = vocab_size
    target = target_probs.reshape(-1, V)
    draft = None if draft_probs is None else draft_probs.reshape(-1, V)
    iq = inv_q.reshape(-1, V)
    if support is not None:
        return _recovered_on_support(key, target, draft, iq, support)
    chunk = recovered_chunk if chunk is None else chunk
    out = torch.empty(key.shape[0], dtype=torch.int64, device=key.device)
    step = max(1, RECOVERED_CHUNK // max(V, 1))
    for c in range(0, key.shape[0], step):
        kt, kq, kd = (k.contiguous() for k in key[c : c + step].unbind(1))
        out[c : c + step] = chunk(kt, kq, kd, target, draft, iq)[0]
    return out


def recovered_chunk(kt: torch.Tensor, kq: torch.Tensor, kd: torch.Tensor, target: torch.Tensor,
                    draft: torch.Tensor | None, iq: torch.Tensor) -> tuple[torch.Tensor]:
    """The winners (int64) of keys of :func:`recovered_keys` over whole rows of ``target``,
    ``draft`` and ``iq`` (``[rows, V]``): the keys' table rows ``kt``, noise rows ``kq`` and
    draft ids ``kd`` (``-1``: none, or draft probabilities given). Without draft probabilities
    ``p`` is the target row with the draft id's element 0, with them ``fmax(target - draft, 0)``
    (NaN gives 0); the score ``p * inv_q`` (in float64 with float64 noise); the first index of
    its maximum. No shape depends on the data, so that ``torch.compile`` makes it one pass over
    the rows (harness/targetkit/fused.py)."""
    p = target.index_select(0, kt)  # a copy, written in place below
    if draft is None:
        at = kd.clamp(min=0)[:, None]
        p.scatter_(1, at, torch.where(kd[:, None] >= 0, 0.0, p.gather(1, at)))
    else:
        p.sub_(draft.index_select(0, kt))
        torch.fmax(p, torch.zeros((), dtype=p.dtype, device=p.device), out=p)  # fmax(x, 0): NaN gives 0
    q = iq.index_select(0, kq)
    score = p.mul_(q) if p.dtype == q.dtype else q.mul_(p)  # float64 noise: the product in float64
    return (torch.argmax(score, dim=1),)


def check_support(target: torch.Tensor, draft: torch.Tensor | None, support: torch.Tensor) -> None:
    """Raise :class:`ValueError` unless every row of ``target`` ``[rows, V]`` is 0 off its
    row of ``support`` (distinct positions) and no draft probability is negative (``fmax(0 - q,
    0)`` would be positive off the support)."""
    if support.shape[0] != target.shape[0]:
        raise ValueError(f"support: {support.shape[0]} rows for a table of {target.shape[0]}")
    ordered = support.sort(dim=1).values
    if support.shape[1] > 1 and bool((ordered[:, 1:] == ordered[:, :-1]).any()):
        raise ValueError("support: a row repeats a position")
    if not torch.equal(torch.count_nonzero(target, dim=1), torch.count_nonzero(target.gather(1, support), dim=1)):
        raise ValueError("support: a row of target_probs is nonzero off its support")
    if draft is not None and bool((draft < 0).any()):
        raise ValueError("support: a negative draft probability (its residual is positive off the support)")


def _recovered_on_support(key: torch.Tensor, target: torch.Tensor, draft: torch.Tensor | None, iq: torch.Tensor,
                          support: torch.Tensor) -> torch.Tensor:
    """Each key's (table row, noise row, draft id or -1) winner, §13.1 on ``support``'s
    positions (see :func:`sample_recovered_tokens`)."""
    V = target.shape[1]
    out = torch.empty(key.shape[0], dtype=torch.int64, device=key.device)
    step = max(1, RECOVERED_CHUNK // max(support.shape[1], 1))
    for c in range(0, key.shape[0], step):
        kt, kq, kd = key[c : c + step].unbind(1)
        at = support[kt]
        p = target[kt[:, None], at]
        if draft is None:
            p.masked_fill_(at == kd[:, None], 0.0)
        else:
            p.sub_(draft[kt[:, None], at])
            p.masked_fill_(~(p > 0), 0.0)  # fmax(x, 0): NaN gives 0
        q = iq[kq[:, None], at]
        score = p.mul_(q) if p.dtype == q.dtype else p.to(q.dtype).mul_(q)
        best = score.amax(dim=1, keepdim=True)
        first = torch.where(score == best, at, V).amin(dim=1)
        out[c : c + step] = torch.where(best[:, 0] > 0, first, 0)  # all 0: every index ties, the first wins
    return out


__all__ += ["eagle_step_slot_mapping_metadata"]


def eagle_step_slot_mapping_metadata(
    *,
    positions: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    B: Sequence[int],  # noqa: N803 - the contract's names
    IB: Sequence[int],  # noqa: N803
    NB: Sequence[int],  # noqa: N803
    block_size: Sequence[int],
    max_model_len: Sequence[int],
    aliased: Sequence[bool],
    pad_id: int = -1,
) -> Writes:
    """§6.1 for cases concatenated: case ``k`` of ``B[k]`` requests and ``IB[k] >= B[k]``
    programs, its ``block_table`` ``[B[k], NB[k]]`` (contiguous: the row stride is
    ``n_blocks_per_req = NB[k]``), ``block_size[k]``, ``max_model_len[k]``. Request ``r``:
    ``p = positions[r] + 1``, ``exceeds = p >= M``, ``clamped = 0`` if it exceeds else ``p``,
    column ``c = min(clamped // bs, NB - 1)``; ``out_slot_mapping[r] = pad_id`` if it exceeds
    else ``block_table[r, c] * bs + clamped % bs``; ``seq_lens[r]`` (in place) ``1`` if it
    exceeds else ``min(seq_lens[r] + 1, M)`` (int32). The clamped position goes to
    ``out_clamped_positions`` (its elements: the cases not ``aliased``, theirs concatenated),
    or, where ``aliased[k]`` (the output is the positions buffer), into ``positions`` itself
    (in place: every request's element). The padding programs ``B <= r < IB`` write ``pad_id``
    into ``out_slot_mapping`` and nothing else. The sizes are host lists: no wait for the device."""
    dev = positions.device
    Bn, IBn, NBn = (np.asarray(x, dtype=np.int64) for x in (B, IB, NB))
    bs_k, M_k = np.asarray(block_size, dtype=np.int64), np.asarray(max_model_len, dtype=np.int64)
    al = np.asarray(aliased, dtype=bool)
    n = int(Bn.sum())
    case = torch.repeat_interleave(torch.arange(Bn.size, device=dev), host_to(Bn, dev), output_size=n)
    r = torch.arange(n, device=dev) - host_to(np.cumsum(Bn) - Bn, dev)[case]

    def per(values: np.ndarray) -> torch.Tensor:
        return host_to(values, dev)[case]

    bs, M, nb = per(bs_k), per(M_k), per(NBn)
    p = positions.long() + 1
    exceeds = p >= M
    clamped = torch.where(exceeds, 0, p)
    col = torch.minimum(clamped // bs, nb - 1)
    row_at = per(np.cumsum(Bn * NBn) - Bn * NBn) + r * nb
    block = block_table.reshape(-1).long()[row_at + col]
    slot = torch.where(exceeds, pad_id, block * bs + clamped % bs)
    seq = torch.where(exceeds, 1, torch.minimum(seq_lens.long() + 1, M)).to(torch.int32)
    # out_slot_mapping: each case's IB entries, its requests' first, then the padding
    slot_at = per(np.cumsum(IBn) - IBn) + r
    pad_case, pad_j = _ragged(host_to(IBn - Bn, dev), int((IBn - Bn).sum()))
    pad_at = host_to(np.cumsum(IBn) - IBn + Bn, dev)[pad_case] + pad_j
    out: Writes = {
        "out_slot_mapping": (torch.cat([slot_at, pad_at]), torch.cat([slot, torch.full_like(pad_at, pad_id)])),
        "seq_lens": (torch.arange(n, device=dev), seq),
    }
    first = host_to(np.cumsum(Bn) - Bn, dev)
    sep, inplace = Bn * ~al, Bn * al
    c, j = _ragged(host_to(sep, dev), int(sep.sum()))  # the separate buffers' cases: theirs concatenated
    out["out_clamped_positions"] = (host_to(np.cumsum(sep) - sep, dev)[c] + j, clamped[first[c] + j])
    c, j = _ragged(host_to(inplace, dev), int(inplace.sum()))  # the aliased cases': into positions
    out["positions"] = (first[c] + j, clamped[first[c] + j])
    return out


# --------------------------------------------------------------------------------------------
# §9: DFlash's first-pass inputs (production domain: 0 <= rej <= qlen - 1, positions >= 0, every
# query position inside the table)
# --------------------------------------------------------------------------------------------

__all__ += ["copy_and_expand_dflash_inputs", "dflash_context"]


def copy_and_expand_dflash_inputs(
    *,
    next_token_ids: torch.Tensor,
    target_positions: torch.Tensor,
    block_table: torch.Tensor,
    query_start_loc: torch.Tensor,
    num_rejected_tokens: torch.Tensor | None = None,
    parallel_drafting_token_id: Sequence[int],
    block_size: Sequence[int],
    num_speculative_tokens: Sequence[int],
    total_input_tokens: Sequence[int],
    requests: Sequence[int],
    widths: Sequence[int],
    spare: Sequence[int],
    context: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> Writes:
    """§9.1 for cases concatenated: case ``k`` of ``requests[k]`` requests (its own ``R + 1``
    entries of ``query_start_loc``, from 0), ``total_input_tokens[k]`` positions, a block table
    of ``[R, widths[k]]`` (every case's flattened and concatenated), its scalars one per case;
    ``num_rejected_tokens`` ``None`` (the variant off: no rejected token) or one count per
    request. Per request ``r`` with ``K`` speculative tokens, ``Q = 1 + K``: every context slot
    ``j`` keeps its position ``p = target_positions[min(qs + j, T - 1)]`` and gets
    ``slot(r, p) = int64(table[r, min(p div bs, W - 1)]) * bs + p mod bs``; query slot ``q``
    (``r*Q + q``) the position ``target_positions[nqs - rej - 1] + 1 + q``, its slot, and the
    id ``next_token_ids[r]`` (``q = 0``) or the mask id; token index ``r*K + q - 1`` the value
    ``r*Q + q`` (``q >= 1``). Each output's indices are flat in the concatenation of the cases'
    outputs: ``T + spare`` context elements a case, ``R*Q + spare`` query elements, ``R*K``
    token indices (the spare elements are never written).

    ``context``: :func:`dflash_context` or a function equal to it (a compiled one), which computes
    every context slot's place and slot mapping."""
    dev = query_start_loc.device
    Rn, Tn, Wn = (np.asarray(list(x), dtype=np.int64) for x in (requests, total_input_tokens, widths))
    Kn, bsn, par, sp = (np.asarray(list(x), dtype=np.int64) for x in (num_speculative_tokens, block_size,
                                                                      parallel_drafting_token_id, spare))
    C, R = len(Rn), int(Rn.sum())
    Qn = Kn + 1
    first, tokens = np.cumsum(Rn) - Rn, np.cumsum(Tn) - Tn  # each case's first request and token
    ctx_out = np.cumsum(Tn + sp) - (Tn + sp)  # each case's first element of the context outputs
    # per case on the host (one copy), each request's on the device: its case's, and where its
    # case's places of it start (its table row, query slots, token indices) moved by its index
    per_case = host_to(np.stack([Rn, first, tokens, np.cumsum(Rn * Wn) - Rn * Wn, Wn, bsn, ctx_out - tokens, Qn, Kn, par,
                                 np.cumsum(Rn * Qn + sp) - (Rn * Qn + sp), np.cumsum(Rn * Kn) - Rn * Kn]), dev)
    case = torch.repeat_interleave(torch.arange(C, device=dev), per_case[0], output_size=R)
    first_r, toff, row, Wr, bs, shift, Qr, Kr, parr, qout, kout = per_case[1:, case]
    every = torch.arange(R, device=dev)
    at, lr = every + case, every - first_r  # each request's entry of query_start_loc, its index in its case
    row, qout, kout, last_col = row + lr * Wr, qout + lr * Qr, kout + lr * Kr, Wr - 1
    qsl = query_start_loc.long()
    qs, nqs = qsl[at], qsl[at + 1]
    rej = torch.zeros_like(qs) if num_rejected_tokens is None else num_rejected_tokens.long()
    table = block_table.reshape(-1)
    pos = target_positions.long()

    def slot(per_request: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        """``slot(r, p)`` with ``per_request`` the request's row start, last column and block size
        for each ``p``: ``(table[row + min(d, W - 1)] - d) * bs + p`` with ``d = p div bs``."""
        start, last, size = per_request
        d = torch.div(p, size, rounding_mode="floor")
        return (table[start + torch.minimum(d, last)] - d) * size + p

    # every context slot: in the production domain a case's requests tile its T tokens in order
    # (query_start_loc[R] = T), so slot qs + j of request r is the case's token qs + j, its
    # position that token's, unclamped; the context outputs the tokens shifted by the spare
    # elements of the cases before
    nt = int(Tn.sum())
    ctx, ctx_slots = (context or dflash_context)(torch.stack([row, last_col, bs, shift]), torch.cumsum(nqs - qs, 0), pos,
                                                 table, nt)
    rq, q = _ragged(Qr, int((Rn * Qn).sum()))  # every query slot
    last = pos[toff + nqs - rej - 1]
    pq = last[rq] + 1 + q
    dest = qout[rq] + q
    ids = torch.where(q == 0, next_token_ids.long()[rq], parr[rq]).to(torch.int32)
    rk, k = _ragged(Kr, int((Rn * Kn).sum()))  # every mask token's index
    return {
        "out_context_positions": (ctx, pos),
        "out_context_slot_mapping": (ctx, ctx_slots),
        "out_query_positions": (dest, pq),
        "out_query_slot_mapping": (dest, slot(torch.stack([row, last_col, bs])[:, rq], pq)),
        "out_input_ids": (dest, ids),
        "out_token_indices": (kout[rk] + k, (lr[rk] * Qr[rk] + k + 1).to(torch.int32)),
    }


def dflash_context(per_request: torch.Tensor, ends: torch.Tensor, positions: torch.Tensor, block_table: torch.Tensor,
                   total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """§9.1's context slots of ``total`` tokens of requests concatenated, token ``t`` request
    ``r``'s (``ends``, int64 ``[R]``: each request's end among the tokens, ascending), its
    position ``positions[t]`` (int64). ``per_request`` (int64 ``[4, R]``): each request's row
    start in the flat ``block_table``, its last column, its block size, and the shift from a
    token to its output place. Returns each token's output place and its slot
    ``int64(table[row + min(p div bs, W - 1)]) * bs + p mod bs`` (both int64). Elementwise past
    the request lookup (one pass when compiled: :mod:`~eaglefuzz.harness.targetkit.fused`)."""
    t = torch.arange(total, device=ends.device)
    start, last, size, shift = per_request[:, torch.searchsorted(ends, t, right=True)].unbind(0)
    d = torch.div(positions, size, rounding_mode="floor")
    return t + shift, (block_table[start + torch.minimum(d, last)] - d) * size + positions


__all__ += ["compute_new_slot_mapping", "update_num_computed_tokens_for_batch_change"]


def compute_new_slot_mapping(
    *,
    query_start_loc: torch.Tensor,
    block_table: torch.Tensor,
    new_positions: torch.Tensor,
    is_rejected_token_mask: torch.Tensor,
    R: Sequence[int],  # noqa: N803 - the contract's names
    NB: Sequence[int],  # noqa: N803
    block_size: Sequence[int],
    num_new_tokens: Sequence[int],
    max_model_len: Sequence[int],
    pad_id: int = -1,
) -> Writes:
    """§7.1 for cases concatenated: case ``k`` of ``R[k]`` requests (its ``query_start_loc``
    ``R[k] + 1`` entries from 0), its ``block_table`` ``[R[k], NB[k]]`` (contiguous),
    ``bs = block_size[k]``, ``N = num_new_tokens[k]``, ``M = max_model_len[k]``. Request ``r``
    owns the next ``qlen_r + N`` tokens of its case (``qlen_r = query_start_loc[r + 1] -
    query_start_loc[r]``, read on the device). Token ``t`` of request ``r``: ``p =
    new_positions[t]``, ``q = min(p, M - 1)``; the result is ``pad_id`` where
    ``is_rejected_token_mask[t]`` or ``p >= M``, else ``block_table[r, q // bs] * bs + q % bs``
    (int64). The result, a new tensor per case, is the output ``new_slot_mapping``: each case's
    ``len(new_positions)`` elements concatenated, every one written."""
    dev = new_positions.device
    Rn, NBn = np.asarray(R, dtype=np.int64), np.asarray(NB, dtype=np.int64)
    bs_k, N_k, M_k = (np.asarray(x, dtype=np.int64) for x in (block_size, num_new_tokens, max_model_len))
    n = int(Rn.sum())
    case = torch.repeat_interleave(torch.arange(Rn.size, device=dev), host_to(Rn, dev), output_size=n)
    r = torch.arange(n, device=dev) - host_to(np.cumsum(Rn) - Rn, dev)[case]
    qsl = query_start_loc.long()
    at = torch.arange(n, device=dev) + case  # request r's own entry of its case's [R + 1] segment
    counts = qsl[at + 1] - qsl[at] + host_to(N_k, dev)[case]
    total = new_positions.numel()
    owner = torch.repeat_interleave(torch.arange(n, device=dev), counts, output_size=total)

    def per(values: np.ndarray) -> torch.Tensor:
        return host_to(values, dev)[case[owner]]

    bs, M = per(bs_k), per(M_k)
    p = new_positions.long()
    q = torch.minimum(p, M - 1)
    row_at = host_to(np.cumsum(Rn * NBn) - Rn * NBn, dev)[case] + r * host_to(NBn, dev)[case]
    block = block_table.reshape(-1).long()[row_at[owner] + q // bs]
    slot = torch.where(is_rejected_token_mask.bool() | (p >= M), pad_id, block * bs + q % bs)
    return {"new_slot_mapping": (torch.arange(total, device=dev), slot)}


def update_num_computed_tokens_for_batch_change(
    *,
    num_computed_tokens: torch.Tensor,
    num_accepted_tokens: torch.Tensor,
    prev_positions: torch.Tensor,
    valid_sampled_token_count: torch.Tensor,
    prev_num_draft_tokens: torch.Tensor,
    cpu_num_computed_tokens: torch.Tensor,
    n: Sequence[int],
    P: Sequence[int],  # noqa: N803 - the contract's names
    Mx: Sequence[int],  # noqa: N803
) -> Writes:
    """§8.1 for cases concatenated: case ``k`` of ``n[k]`` requests (``prev_positions``,
    ``num_accepted_tokens``, ``cpu_num_computed_tokens``), a previous batch of ``P[k]``
    (``valid_sampled_token_count``) and buffers of ``Mx[k]`` rows (``num_computed_tokens``,
    ``prev_num_draft_tokens``). Row ``i``: ``g = max(prev_positions[i], 0)``, ``v =
    valid_sampled_token_count[g]``, participating when ``prev_positions[i] >= 0`` and
    ``prev_num_draft_tokens[g] > 0``; every value read as given (before any write).
    ``num_computed_tokens[i]`` (in place) becomes ``num_computed_tokens[g] + v`` (int32) if
    participating, else ``cpu_num_computed_tokens[i]``; ``num_accepted_tokens[i]`` (in place)
    ``v`` if participating, else itself. Rows ``i >= n`` are not written."""
    dev = prev_positions.device
    nn, Pn, Mn = (np.asarray(x, dtype=np.int64) for x in (n, P, Mx))
    total = int(nn.sum())
    case = torch.repeat_interleave(torch.arange(nn.size, device=dev), host_to(nn, dev), output_size=total)
    i = torch.arange(total, device=dev) - host_to(np.cumsum(nn) - nn, dev)[case]
    m_base = host_to(np.cumsum(Mn) - Mn, dev)[case]
    p_base = host_to(np.cumsum(Pn) - Pn, dev)[case]
    prev = prev_positions.long()
    g = prev.clamp(min=0)
    v = valid_sampled_token_count[p_base + g]
    part = (prev >= 0) & (prev_num_draft_tokens[m_base + g] > 0)
    corrected = (num_computed_tokens[m_base + g].long() + v.long()).to(torch.int32)  # int32 arithmetic wraps
    everyone = torch.arange(total, device=dev)
    return {"num_computed_tokens": (m_base + i, torch.where(part, corrected, cpu_num_computed_tokens.to(torch.int32))),
            "num_accepted_tokens": (everyone, torch.where(part, v.to(torch.int32), num_accepted_tokens.to(torch.int32)))}


__all__ += ["eagle_prepare_next_token_padded"]


def running_count(flags: torch.Tensor, start: torch.Tensor, end: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """Per row of the flat bool ``flags`` (the cells ``[start, end)`` of each, rows laid end to
    end), how many are set: one running count (int32), read at each row's end and before its
    start. Returns the counts, the running count and its value at each row's end."""
    seen = torch.cumsum(flags, 0, dtype=torch.int32)
    upto = torch.where(end > 0, seen[(end - 1).clamp(min=0)], 0)
    count = upto - torch.where(start > 0, seen[(start - 1).clamp(min=0)], 0)
    return count, seen, upto


class NextTokenRows(NamedTuple):
    """The rows of §3's cases laid end to end (:func:`next_token_rows`)."""

    start: torch.Tensor
    end: torch.Tensor
    width: torch.Tensor
    buf_at: torch.Tensor
    count: torch.Tensor
    """Each row's valid cells (int32)."""
    last: torch.Tensor
    """Each row's last valid cell (where ``count`` is 0: not the row's)."""


def next_token_rows(ids: torch.Tensor, R: np.ndarray, S: np.ndarray, V: np.ndarray,  # noqa: N803
                    buffer_lengths: np.ndarray) -> NextTokenRows:
    """Each row of §3's cases (``ids`` flat, each case's ``R * S`` ids row after row): its
    cells, width and persistent-buffer entry, from per-case values on the device; its count of
    valid cells (an id not ``-1`` and below ``vocab_size``, signed) from a running count, and
    its last valid cell where that count last grew (``searchsorted``)."""
    dev = ids.device
    n = int(R.sum())
    per_case = host_to(np.stack([R, S, np.cumsum(R) - R, np.cumsum(buffer_lengths) - buffer_lengths]), dev)  # one copy
    case = torch.repeat_interleave(torch.arange(R.size, device=dev), per_case[0], output_size=n)
    width = per_case[1][case]
    end = torch.cumsum(width, 0)  # the rows laid end to end, S cells each
    start = end - width
    buf_at = per_case[3][case] + torch.arange(n, device=dev) - per_case[2][case]
    v_cell = torch.repeat_interleave(host_to(V, dev), host_to(R * S, dev), output_size=ids.numel())
    count, seen, upto = running_count((ids != -1) & (ids.long() < v_cell), start, end)
    last = torch.searchsorted(seen, upto, side="left")  # where the count last grew: the last valid cell
    return NextTokenRows(start, end, width, buf_at, count, last)


def eagle_prepare_next_token_padded(
    *,
    sampled_token_ids: torch.Tensor,
    discard_request_mask: torch.Tensor,
    backup_next_token_ids: torch.Tensor,
    vocab_size: Sequence[int],
    num_sampled_tokens_per_req: Sequence[int],
    num_reqs: Sequence[int],
    buffer_lengths: Sequence[int],
) -> Writes:
    """§3.1 for several cases at once, each in the production domain (§3.2: rows of exactly
    ``S`` columns, ``stride(0) = S``, ``BLOCK_SIZE_TOKENS >= S``, so that every column is read):
    per request ``r < R``, ``valid_sampled_tokens_count[r] = 0`` and
    ``next_token_ids[r] = backup_next_token_ids[r]`` where ``discard_request_mask[r]``; else a
    column is valid when its id is not ``-1`` and below ``vocab_size`` (signed), the count is
    the number of valid columns and the next token the id in the last valid column, the
    backup id when there is none.

    Every input is the cases' arrays concatenated case after case: ``sampled_token_ids`` each
    case's ``R * S`` ids row after row, ``discard_request_mask`` and ``backup_next_token_ids``
    each case's ``buffer_lengths`` entries (``R`` or more: the persistent buffers); the
    per-case scalars are host sequences. Each output's indices are flat indices in the
    concatenation of the cases' outputs (``R`` elements each), int32 values. The rows are read
    flat, laid end to end (no padding to the widest): a running count of valid cells, read
    at each row's end, gives its count, and the cell where it last grew its last valid id."""
    R = np.asarray(num_reqs, dtype=np.int64)
    S = np.asarray(num_sampled_tokens_per_req, dtype=np.int64)
    V = np.asarray(vocab_size, dtype=np.int64)
    ids = sampled_token_ids.reshape(-1)
    rows = next_token_rows(ids, R, S, V, np.asarray(buffer_lengths, dtype=np.int64))
    count, buf_at = rows.count, rows.buf_at
    found = ids[rows.last.clamp(max=max(ids.numel() - 1, 0))] if ids.numel() else torch.zeros_like(count)
    backup = backup_next_token_ids.reshape(-1)[buf_at]
    discard = discard_request_mask.reshape(-1)[buf_at]
    nxt = torch.where(discard | (count == 0), backup, found.to(torch.int32))
    count = torch.where(discard, 0, count).to(torch.int32)
    index = torch.arange(count.numel(), device=count.device)
    return {"next_token_ids": (index, nxt), "valid_sampled_tokens_count": (index, count)}
