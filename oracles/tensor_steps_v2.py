"""Torch oracles of Model Runner V2's step kernels (docs/CONTRACT.md §14-§27), written from the
contract, to run on the GPU beside the kernel over many cases at once (the device campaign's
batches, :mod:`eaglefuzz.harness.checking.device_mode`).

A batch is ``K`` cases whose arrays are concatenated, each case's rows after the previous
case's: what differs from one case is where each row finds its case's other arrays. Each oracle
takes those places as tensors (``state_base``: where the row's case's state arrays start;
``cu_at``: where its entry of ``cu_num_logits`` is), so that one call checks every case; one
case alone is a batch of one (the defaults). Like :mod:`.tensor_ops`, each returns, per array it
writes, the flat indices it writes (in the concatenation of the cases' arrays) and the values
(``{name: (index, value)}``); an input the kernel updates in place lists its elements' values after
the call (one it leaves as it was too). No oracle waits for the device: a batch's sizes are known
on the host. Only the production domain (the section's N.2) is covered; index arithmetic is int64.
"""

from __future__ import annotations

import numpy as np
import torch

from .host_copy import host_to

__all__ = ["combine_sampled_and_draft_tokens", "compute_slot_mappings", "expand_idx_mapping", "flatten_sampled",
           "gather_block_tables", "gather_draft_sampled", "input_batch_prepare_prefill_inputs",
           "get_num_sampled_and_rejected", "post_update", "post_update_num_computed_tokens", "prepare_decode_inputs",
           "prepare_pos_seq_lens", "target_dependent_ar_prepare_prefill_inputs", "update_draft_inputs"]

Writes = dict[str, tuple[torch.Tensor, torch.Tensor]]


def get_num_sampled_and_rejected(*, num_sampled: torch.Tensor, seq_lens: torch.Tensor, cu_num_logits: torch.Tensor,
                                 idx_mapping: torch.Tensor, prefill_len: torch.Tensor,
                                 state_base: torch.Tensor | None = None, cu_at: torch.Tensor | None = None) -> Writes:
    """§18.1 for every row ``b``: its state row ``s = state_base[b] + idx_mapping[b]``, its
    logits ``nl = cu_num_logits[cu_at[b] + 1] - cu_num_logits[cu_at[b]]``; a row with
    ``seq_lens[b] < prefill_len[s]`` (chunked) gets ``num_sampled[b] = 0`` and
    ``num_rejected[b] = 0``, any other keeps ``num_sampled[b]`` and gets ``num_rejected[b] =
    nl - num_sampled[b]`` (int32, wrapping). Defaults: one case (``state_base`` 0, ``cu_at``
    the row's own index)."""
    B = idx_mapping.numel()
    rows = torch.arange(B, device=idx_mapping.device)
    base = torch.zeros_like(rows) if state_base is None else state_base.long()
    at = rows if cu_at is None else cu_at.long()
    cu = cu_num_logits.long()
    nl = cu[at + 1] - cu[at]
    ns = num_sampled.long()
    chunked = seq_lens.long() < prefill_len.long()[base + idx_mapping.long()]
    rejected = torch.where(chunked, torch.zeros_like(nl), nl - ns)
    rejected = ((rejected + 2**31) % 2**32 - 2**31).to(torch.int32)  # int32, as the kernel stores it
    return {"num_rejected": (rows, rejected), "num_sampled": (rows, torch.where(chunked, 0, ns).to(torch.int32))}


def _ragged(counts: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For rows of ``counts`` (int64, ``total`` their sum): each element's row and its index in
    the row."""
    row = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts, output_size=total)
    return row, torch.arange(total, device=counts.device) - (torch.cumsum(counts, 0) - counts)[row]


def combine_sampled_and_draft_tokens(*, idx_mapping: torch.Tensor, last_sampled_tokens: torch.Tensor,
                                     query_start_loc: torch.Tensor, seq_lens: torch.Tensor, prefill_len: torch.Tensor,
                                     draft_tokens: torch.Tensor, cu_num_logits: torch.Tensor, K: torch.Tensor | int,
                                     new: int = 1, state_base: torch.Tensor | None = None,
                                     cu_at: torch.Tensor | None = None, draft_base: torch.Tensor | None = None,
                                     ids_base: torch.Tensor | None = None, logits_base: torch.Tensor | None = None,
                                     logits_total: int | None = None, bonus_total: int | None = None,
                                     drafts_total: int | None = None) -> Writes:
    """§16.1 for every row ``b`` (``NUM_NEW_SAMPLED_TOKENS = new``, ``BLOCK_SIZE >= nl``, as in
    production): ``s = state_base[b] + idx_mapping[b]``; from its case's ``[B + 1]`` arrays at
    ``cu_at[b]``: its query ``[qs, qe)`` and logits count ``nl``, ``d = nl - new``,
    ``ls = qe - nl``. ``logits_indices[logits_base[b] + cu[b] + i] = ls + i`` for ``i < nl``; a row
    with ``seq_lens[b] > prefill_len[s]`` also writes ``input_ids[ids_base[b] + ls] =
    last_sampled_tokens[s]`` when ``new > 0`` and ``seq - nl >= prefill_len[s]``, and
    ``input_ids[ids_base[b] + qe - d + i] = draft_tokens[draft_base[b] + idx_mapping[b] * K[b] + i]`` for
    ``i < d`` (int32, truncated). ``logits_total``, ``bonus_total``, ``drafts_total``: the logits,
    the last sampled tokens and the draft ids written in all, where the caller knows them (else
    counted: a wait for the device). Defaults: one case."""
    B = idx_mapping.numel()
    dev = idx_mapping.device
    rows = torch.arange(B, device=dev)
    zero = torch.zeros_like(rows)
    base = zero if state_base is None else state_base.long()
    at = rows if cu_at is None else cu_at.long()
    K = torch.full_like(rows, int(K)) if isinstance(K, int) else K.long()
    s = base + idx_mapping.long()
    q, cu = query_start_loc.long(), cu_num_logits.long()
    qe = q[at + 1]
    nl = cu[at + 1] - cu[at]
    d = nl - new
    ls = qe - nl
    seq, L = seq_lens.long(), prefill_len.long()[s]
    past = seq > L
    lb = zero if logits_base is None else logits_base.long()
    ib = zero if ids_base is None else ids_base.long()
    total = int(nl.sum()) if logits_total is None else logits_total
    r, i = _ragged(nl, total)
    logits = (lb[r] + cu[at[r]] + i, ls[r] + i)
    bonus = past & (seq - nl >= L) & (new > 0)
    nb = int(bonus.sum()) if bonus_total is None else bonus_total
    rb, _ = _ragged(bonus.long(), nb)  # the rows that write their last sampled token
    written = torch.where(past & (d > 0), d, zero)
    nd = int(written.sum()) if drafts_total is None else drafts_total
    r, i = _ragged(written, nd)
    db = zero if draft_base is None else draft_base.long()
    index = torch.cat([ib[rb] + ls[rb], ib[r] + qe[r] - d[r] + i])
    value = torch.cat([last_sampled_tokens.reshape(-1)[s[rb]], draft_tokens.reshape(-1)[db[r] + idx_mapping.long()[r] * K[r] + i]])
    return {"logits_indices": logits, "input_ids": (index, ((value + 2**31) % 2**32 - 2**31).to(torch.int32))}


def gather_draft_sampled(*, input_ids: torch.Tensor, positions: torch.Tensor, logits_indices: torch.Tensor,
                         expanded_idx_mapping: torch.Tensor, expanded_local_pos: torch.Tensor, prefill_len: torch.Tensor,
                         state_base: torch.Tensor | None = None, token_base: torch.Tensor | None = None) -> Writes:
    """§23.1 for every logits row ``j``: ``t = token_base[j] + logits_indices[j]``, ``p =
    positions[t]``, ``lp = expanded_local_pos[j]``, ``s = state_base[j] +
    expanded_idx_mapping[j]``; ``draft_sampled[j] = -1`` where ``lp > 0`` and ``p - lp <
    prefill_len[s]`` (a placeholder), else ``input_ids[t]``; ``pos[j] = p``. Defaults: one case."""
    n = logits_indices.numel()
    rows = torch.arange(n, device=logits_indices.device)
    t = logits_indices.long() + (0 if token_base is None else token_base.long())
    s = expanded_idx_mapping.long() + (0 if state_base is None else state_base.long())
    p = positions.long()[t]
    lp = expanded_local_pos.long()
    placeholder = (lp > 0) & (p - lp < prefill_len.long()[s])
    return {"draft_sampled": (rows, torch.where(placeholder, -1, input_ids[t].long()).to(torch.int32)), "pos": (rows, p)}


def expand_idx_mapping(*, idx_mapping: torch.Tensor, cu_num_logits: torch.Tensor, cu_at: torch.Tensor | None = None,
                       out_base: torch.Tensor | None = None, total: int | None = None) -> Writes:
    """§17.1 for every row ``b`` (``BLOCK_SIZE >= nl_b``, as in production), its logits count
    ``nl`` from its case's ``cu_num_logits`` at ``cu_at[b]``: ``expanded_idx_mapping[out_base[b]
    + cu[b] + i] = idx_mapping[b]`` and ``expanded_local_pos[...] = i`` for ``0 <= i < nl``.
    ``total``: the logits rows in all, where the caller knows it. Defaults: one case."""
    B = idx_mapping.numel()
    rows = torch.arange(B, device=idx_mapping.device)
    at = rows if cu_at is None else cu_at.long()
    cu = cu_num_logits.long()
    nl = (cu[at + 1] - cu[at]).clamp(min=0)
    r, i = _ragged(nl, int(nl.sum()) if total is None else total)
    index = (0 if out_base is None else out_base.long()[r]) + cu[at[r]] + i
    return {"expanded_idx_mapping": (index, idx_mapping.long()[r]), "expanded_local_pos": (index, i.to(torch.int32))}


def _places(counts: np.ndarray, device: torch.device | str) -> tuple[torch.Tensor, torch.Tensor]:
    """For cases of ``counts`` elements (a host array): each element's case and its index in it."""
    total = int(counts.sum())
    case = torch.repeat_interleave(torch.arange(len(counts), device=device), host_to(counts, device),
                                   output_size=total)
    return case, torch.arange(total, device=device) - host_to(np.cumsum(counts) - counts, device)[case]


def _per(case: torch.Tensor, values: np.ndarray) -> torch.Tensor:
    """A per-case host value (``values[k]``), for each element of ``case`` (each one's case)."""
    return host_to(np.asarray(values), case.device)[case]


def _base(counts: np.ndarray) -> np.ndarray:
    """Where each case's elements start in the concatenation, for cases of ``counts`` each."""
    return np.cumsum(counts) - counts


def _int32(x: torch.Tensor) -> torch.Tensor:
    """``x`` (int64) wrapped to int32, as a kernel's int32 store does (an int32 ``x`` as it is)."""
    if x.dtype == torch.int32:
        return x
    return ((x.long() + 2**31) % 2**32 - 2**31).to(torch.int32)


def post_update_num_computed_tokens(*, idx_mapping: torch.Tensor, query_start_loc: torch.Tensor,
                                    num_computed_tokens: torch.Tensor, state_base: torch.Tensor | None = None,
                                    cu_at: torch.Tensor | None = None) -> Writes:
    """§20.1 for every row ``b``: ``num_computed_tokens[state_base[b] + idx_mapping[b]] +=
    qlen_b`` (int32, wrapping), ``qlen_b`` from its case's ``query_start_loc`` at ``cu_at[b]``.
    Defaults: one case."""
    B = idx_mapping.numel()
    rows = torch.arange(B, device=idx_mapping.device)
    at = rows if cu_at is None else cu_at.long()
    q = query_start_loc.long()
    s = idx_mapping.long() + (0 if state_base is None else state_base.long())
    return {"num_computed_tokens": (s, _int32(num_computed_tokens.long()[s] + q[at + 1] - q[at]))}


def flatten_sampled(*, sampled: torch.Tensor, num_sampled: torch.Tensor, cu_num_logits: torch.Tensor,
                    width: torch.Tensor | int | None = None, sampled_base: torch.Tensor | None = None,
                    cu_at: torch.Tensor | None = None, out_base: torch.Tensor | None = None,
                    total: int | None = None) -> Writes:
    """§24.1 for every row ``b`` of its case's ``sampled`` (``width[b]`` columns, starting at
    ``sampled_base[b]`` in the flat concatenation) and ``i < num_sampled[b]``:
    ``flat_sampled[out_base[b] + cu[b] + i] = sampled[b, i]``, ``cu`` its case's at ``cu_at[b]``.
    ``total``: the elements written in all, where the caller knows it. Defaults: one case."""
    B = num_sampled.numel()
    rows = torch.arange(B, device=num_sampled.device)
    W = sampled.shape[1] if width is None else width
    W = torch.full_like(rows, int(W)) if isinstance(W, int) else W.long()
    base = rows * W if sampled_base is None else sampled_base.long()
    at = rows if cu_at is None else cu_at.long()
    ns = num_sampled.long().clamp(min=0)
    r, i = _ragged(ns, int(ns.sum()) if total is None else total)
    index = (0 if out_base is None else out_base.long()[r]) + cu_num_logits.long()[at[r]] + i
    return {"flat_sampled": (index, sampled.reshape(-1)[base[r] + i])}


def prepare_decode_inputs(*, draft_tokens: torch.Tensor, target_seq_lens: torch.Tensor, num_rejected: torch.Tensor,
                          positions: torch.Tensor, sample_src_positions: torch.Tensor, B: list[int], R: list[int],
                          K: list[int], M: list[int], advance: list[bool]) -> Writes:
    """§26.1 for ``K`` cases concatenated, case ``k`` of ``B[k]`` rows over ``R[k]``
    (``max_num_reqs``) entries, its drafts ``[R[k], K[k]]``, its ``positions`` ``R[k] + 3``
    entries, ``max_model_len = M[k]``, ``ADVANCE_DRAFT_POSITIONS = advance[k]``. Row ``b < B``:
    ``input_ids[b] = draft_tokens[b, 0]`` (int32), ``sample_src_positions[b] += 1``, ``seq =
    target_seq_lens[b] - num_rejected[b]``, advancing: ``positions[b] = min(positions[b] + 1,
    M - 1)``, ``seq = min(seq + 1, M)``; ``seq_lens[b] = seq``. Padding: ``query_start_loc[i] =
    min(i, B)`` for ``i <= R`` and ``seq_lens[i] = 0`` for ``B <= i < R``. Sizes are host lists
    (one case alone: lists of one)."""
    dev = target_seq_lens.device
    Bn, Rn, Kn = (np.asarray(x, dtype=np.int64) for x in (B, R, K))

    rc, b = _places(Bn, dev)  # the rows
    Mr, adv = _per(rc, np.asarray(M, dtype=np.int64)), _per(rc, np.asarray(advance, dtype=bool))
    ids = draft_tokens.reshape(-1)[_per(rc, np.cumsum(Rn * Kn) - Rn * Kn) + b * _per(rc, Kn)]
    seq = target_seq_lens.long() - num_rejected.long()
    seq = torch.where(adv, torch.minimum(seq + 1, Mr), seq)
    at_src = _per(rc, np.cumsum(Rn) - Rn) + b
    at_pos = _per(rc, np.cumsum(Rn + 3) - (Rn + 3)) + b
    pos = positions.long()[at_pos]
    sc, i = _places(Rn, dev)  # every seq_lens entry of every case
    row = _per(sc, np.cumsum(Bn) - Bn) + i
    inside = i < _per(sc, Bn)
    qc, j = _places(Rn + 1, dev)
    return {
        "input_ids": (torch.arange(rc.numel(), device=dev), _int32(ids.long())),
        "sample_src_positions": (at_src, sample_src_positions.long()[at_src] + 1),
        "positions": (at_pos, torch.where(adv, torch.minimum(pos + 1, Mr - 1), pos)),
        "seq_lens": (torch.arange(sc.numel(), device=dev),
                     torch.where(inside, _int32(seq[row.clamp(max=max(rc.numel() - 1, 0))]), 0).to(torch.int32)),
        "query_start_loc": (torch.arange(qc.numel(), device=dev), torch.minimum(j, _per(qc, Bn)).to(torch.int32)),
    }


def prepare_pos_seq_lens(*, idx_mapping: torch.Tensor, query_start_loc: torch.Tensor, num_computed_tokens: torch.Tensor,
                         B: list[int], R: list[int], T: list[int]) -> Writes:
    """§15.1 for cases concatenated, case ``k`` of ``B[k]`` rows, ``R[k]`` state rows
    (``max_num_reqs``: ``num_computed_tokens``' length) and ``T[k]`` tokens: row ``b``, ``c =
    num_computed_tokens[s_b]``: ``seq_lens[b] = c + qlen_b`` (int32) and ``pos[qs_b + i] = c + i``
    (an int32 sum, stored as int64) for ``i < qlen_b``; ``seq_lens[i] = 0`` for ``B <= i < R``.
    Sizes are host lists (one case alone: lists of one).

    The tokens' writes (``sum(T)`` of them, the wide part) are two running sums, no other pass
    over the tokens: token ``t`` of the concatenation (row ``r``'s ``i``-th, ``t = start_r + i``,
    of case ``k``, whose tokens start at ``Tbase_k = T[0] + ... + T[k - 1]``) has index
    ``t + (Tbase_k + qs_r - start_r)`` and value ``t + (c_r - start_r)``, each a
    per-row offset added to ``t``: the running sum of ones with, at each row's first token, the
    change of its offset from the previous row's. The value's int32 wrap is exact too: ``c_r +
    i`` passes ``2**31 - 1`` (once at most: ``c_r`` is an int32) at ``i = 2**31 - c_r``, from
    where ``2**32`` less, up to the row's end."""
    dev = idx_mapping.device
    Bn, Rn, Tn = (np.asarray(x, dtype=np.int64) for x in (B, R, T))
    n, total = int(Bn.sum()), int(Tn.sum())
    rc = torch.repeat_interleave(host_to(Bn, dev), output_size=n)  # each row's case
    ar = torch.arange(n, device=dev)
    # per case: where its state rows start, where its tokens start, its state rows' start less its rows'
    state_base, token_base, pad_shift = host_to(np.stack([_base(Rn), _base(Tn), _base(Rn) - _base(Bn)]), dev)[:, rc]
    at = ar + rc  # the row's entry of its case's query_start_loc
    q = query_start_loc.long()
    qs = q[at]
    qlen = q[at + 1] - qs
    c = num_computed_tokens.long()[state_base + idx_mapping.long()]
    end = torch.cumsum(qlen, 0)
    start = end - qlen  # the row's first token in the concatenation
    offset = torch.stack((token_base + qs, c)) - start
    steps = torch.ones((2, total + 1), dtype=torch.int64, device=dev)  # a place past the tokens: trailing empty rows
    steps.index_add_(1, start, offset - torch.nn.functional.pad(offset[:, :-1], (1, 0), value=1))
    wrap = torch.full((n,), 2**32, dtype=torch.int64, device=dev)
    steps[1].index_add_(0, start + torch.minimum(2**31 - c, qlen), wrap, alpha=-1)  # no wrap: at its end, cancelled
    steps[1].index_add_(0, end, wrap)
    pos = (torch.cumsum(steps[0, :total], 0), torch.cumsum(steps[1, :total], 0))
    seq = torch.zeros(int(Rn.sum()), dtype=torch.int32, device=dev)  # past each case's B rows: 0
    seq[ar + pad_shift] = _int32(c + qlen)
    return {"pos": pos, "seq_lens": (torch.arange(seq.numel(), device=dev), seq)}


def update_draft_inputs(*, positions: torch.Tensor, sample_src_positions: torch.Tensor, seq_lens: torch.Tensor,
                        draft_tokens: torch.Tensor, current_draft_step: torch.Tensor, hidden_states: torch.Tensor,
                        B: list[int], P: list[int], H: list[int], K: list[int], M: list[int], advance: list[bool]) -> Writes:
    """§27.1 for cases concatenated, case ``k`` of ``B[k]`` rows, ``P[k]`` entries of
    ``positions``, ``seq_lens`` and ``sample_src_positions``, hidden states ``[B[k], H[k]]``
    (float32 bits: copied), ``num_speculative_steps = K[k]``, ``max_model_len = M[k]``,
    ``ADVANCE_DRAFT_POSITIONS = advance[k]``, its ``current_draft_step`` one element. Row ``b``:
    ``output_draft_tokens[b, step] = draft_tokens[b]``; before the last step also
    ``sample_src_positions[b] += 1``, ``input_ids[b] = draft_tokens[b]`` (int32), the row's
    hidden state copied, and, advancing, ``positions[b] = min(positions[b] + 1, M - 1)``,
    ``seq_lens[b] = min(seq_lens[b] + 1, M)``. The steps are read to the host (the written
    sets depend on them: one wait for the device)."""
    dev = draft_tokens.device
    Bn, Pn, Hn, Kn, Mn = (np.asarray(x, dtype=np.int64) for x in (B, P, H, K, M))
    step = current_draft_step.reshape(-1).cpu().numpy().astype(np.int64)
    mid = step < Kn - 1
    adv = mid & np.asarray(advance, dtype=bool)

    rc, b = _places(Bn, dev)
    out: Writes = {"output_draft_tokens": (_per(rc, _base(Bn * Kn)) + b * _per(rc, Kn) + _per(rc, step), draft_tokens.long())}
    mc, mb = _places(Bn * mid, dev)  # the rows of the cases before their last step
    mrow = _per(mc, _base(Bn)) + mb
    out["input_ids"] = (mrow, _int32(draft_tokens.long()[mrow]))
    src_at = _per(mc, _base(Pn)) + mb
    out["sample_src_positions"] = (src_at, sample_src_positions.long()[src_at] + 1)
    hc, e = _places(Bn * Hn * mid, dev)  # their hidden states' elements
    at = _per(hc, _base(Bn * Hn)) + e
    out["next_input_hidden_states"] = (at, hidden_states.reshape(-1)[at])
    ac, ab = _places(Bn * adv, dev)
    at = _per(ac, _base(Pn)) + ab
    Ma = _per(ac, Mn)
    out["positions"] = (at, torch.minimum(positions.long()[at] + 1, Ma - 1))
    out["seq_lens"] = (at, torch.minimum(seq_lens.long()[at] + 1, Ma).to(torch.int32))
    return out


def target_dependent_ar_prepare_prefill_inputs(
    *, target_input_ids: torch.Tensor, target_positions: torch.Tensor, idx_mapping: torch.Tensor,
    last_sampled: torch.Tensor, next_prefill_tokens: torch.Tensor, num_sampled: torch.Tensor,
    num_rejected: torch.Tensor, query_start_loc: torch.Tensor, seq_lens: torch.Tensor, B: list[int], R: list[int],
    T: list[int], lookahead: list[int],
) -> Writes:  # fmt: skip
    """§25.1 for cases concatenated, case ``k`` of ``B[k]`` rows, ``R[k]`` state rows
    (``max_num_reqs``), ``T[k]`` tokens and ``lookahead[k]`` rows of ``next_prefill_tokens``
    (``[lookahead, R]``, row 0 read). Row ``b``: ``q = qlen_b - num_rejected[b]``, ``lti = qs_b
    + q - 1``; ``draft_input_ids[qs_b + i - 1] = target_input_ids[qs_b + i]`` for ``1 <= i < q``
    and ``draft_input_ids[lti]`` the next token (``last_sampled[s]`` truncated to int32 when the
    row sampled, else ``next_prefill_tokens[0, s]``); ``draft_positions[qs_b + i] =
    target_positions[qs_b + i]`` for ``i < q``; ``last_token_indices[b] = lti``,
    ``draft_query_start_loc[b] = qs_b``, ``draft_seq_lens[b] = seq_lens[b]``; past the batch
    ``draft_query_start_loc[i] = qe_{B-1}`` (``i <= R``), ``draft_seq_lens[i] = 0`` and
    ``last_token_indices[i] = 0`` (``i < R``); ``draft_current_step = 0``. The tokens' writes
    are masks over the concatenation of the cases' tokens (no wait for the device)."""
    dev = idx_mapping.device
    Bn, Rn, Tn, Ln = (np.asarray(x, dtype=np.int64) for x in (B, R, T, lookahead))

    rc, b = _places(Bn, dev)
    at = torch.arange(rc.numel(), device=dev) + rc  # the row's entry of its case's query_start_loc
    qsl = query_start_loc.long()
    qs, qlen = qsl[at], qsl[at + 1] - qsl[at]
    q = qlen - num_rejected.long()
    tb = _per(rc, _base(Tn))
    s = idx_mapping.long()
    nxt = torch.where(num_sampled.long() > 0, _int32(last_sampled.reshape(-1).long()[_per(rc, _base(Rn)) + s]).long(),
                      next_prefill_tokens.reshape(-1).long()[_per(rc, _base(Ln * Rn)) + s])
    # the kept tokens, a mask over the concatenation: +1 where a row starts, -1 where its kept
    # tokens end, summed; each kept token's id the next one's, a row's last its next token
    total = int(Tn.sum())
    first = tb + qs
    kept = q.clamp(min=0)
    edge = torch.zeros(total + 1, dtype=torch.int32, device=dev)
    edge.index_add_(0, first.clamp(max=total), torch.ones_like(first, dtype=torch.int32))
    edge.index_add_(0, (first + kept).clamp(max=total), torch.full_like(first, -1, dtype=torch.int32))
    written = torch.cumsum(edge[:total], 0, dtype=torch.int32) > 0
    ids = torch.zeros(total + 1, dtype=torch.int32, device=dev)
    ids[: max(total - 1, 0)] = _int32(target_input_ids.reshape(-1)[1:]) if total else ids[:0]
    ids[torch.where(kept > 0, first + kept - 1, total).clamp(max=total)] = _int32(nxt)
    lti = qs + q - 1
    sc, j = _places(Rn, dev)
    inside = j < _per(sc, Bn)
    row = (_per(sc, _base(Bn)) + j).clamp(max=max(rc.numel() - 1, 0))
    qc, jq = _places(Rn + 1, dev)
    rowq = (_per(qc, _base(Bn)) + jq).clamp(max=max(rc.numel() - 1, 0))
    end = qsl[host_to(np.cumsum(Bn + 1) - 1, dev)]  # each case's qe_{B-1}
    return {
        "draft_input_ids": (written, ids[:total]),
        "draft_positions": (written, target_positions.reshape(-1).long()),
        "last_token_indices": (torch.arange(sc.numel(), device=dev), torch.where(inside, lti[row], 0)),
        "draft_seq_lens": (torch.arange(sc.numel(), device=dev), torch.where(inside, seq_lens.long()[row], 0).to(torch.int32)),
        "draft_query_start_loc": (torch.arange(qc.numel(), device=dev),
                                  torch.where(jq < _per(qc, Bn), qs[rowq], end[qc]).to(torch.int32)),
        "draft_current_step": (torch.arange(len(Bn), device=dev), torch.zeros(len(Bn), dtype=torch.int64, device=dev)),
    }


def input_batch_prepare_prefill_inputs(*, idx_mapping: torch.Tensor, query_start_loc: torch.Tensor,
                                       all_token_ids: torch.Tensor, prefill_len: torch.Tensor,
                                       num_computed_tokens: torch.Tensor, B: list[int], R: list[int], W: list[int],
                                       T: list[int], lookahead: list[int]) -> Writes:
    """§14.1 for cases concatenated, case ``k`` of ``B[k]`` rows, ``R[k]`` state rows, a token
    table ``[R[k], W[k]]``, ``T[k]`` tokens and ``lookahead[k]`` lookahead rows (``LOOKAHEAD_BLOCK
    >= lookahead``, as in production). A row with ``c = num_computed_tokens[s] < L =
    prefill_len[s]``: ``input_ids[qs + i] = all_token_ids[s, c + i]`` for ``i < qlen`` and
    ``next_prefill_tokens[j, s] = all_token_ids[s, c + qlen + j]`` if ``c + qlen + j < L``, else
    0, for ``j < lookahead``; other rows write nothing. The written sets are counted on the host
    (one wait for the device)."""
    dev = idx_mapping.device
    Bn, Rn, Wn, Tn, Ln = (np.asarray(x, dtype=np.int64) for x in (B, R, W, T, lookahead))

    rc, _ = _places(Bn, dev)
    at = torch.arange(rc.numel(), device=dev) + rc
    q = query_start_loc.long()
    qs, qlen = q[at], q[at + 1] - q[at]
    s = idx_mapping.long()
    st = _per(rc, _base(Rn)) + s
    c, L = num_computed_tokens.long()[st], prefill_len.long()[st]
    pre = c < L
    row0 = _per(rc, _base(Rn * Wn)) + s * _per(rc, Wn)  # the row's first element of its case's table
    copied = torch.where(pre, qlen, 0)
    r, i = _ragged(copied, int(copied.sum()))
    ids = (_per(rc[r], _base(Tn)) + qs[r] + i, all_token_ids.reshape(-1)[row0[r] + c[r] + i])
    ahead = torch.where(pre, _per(rc, Ln), 0)
    r, j = _ragged(ahead, int(ahead.sum()))
    t = c[r] + qlen[r] + j
    inside = t < L[r]
    value = torch.where(inside, all_token_ids.reshape(-1)[torch.where(inside, row0[r] + t, 0)], 0)
    nxt = (_per(rc[r], _base(Ln * Rn)) + j * _per(rc[r], Rn) + s[r], value.to(torch.int32))
    return {"input_ids": ids, "next_prefill_tokens": nxt}


def post_update(*, idx_mapping: torch.Tensor, num_computed_tokens: torch.Tensor, sampled_tokens: torch.Tensor,
                num_sampled: torch.Tensor, num_rejected: torch.Tensor, all_token_ids: torch.Tensor,
                total_len: torch.Tensor, B: list[int], R: list[int], W: list[int], S: list[int],
                query_start_loc: torch.Tensor | None = None, output_bin_counts: torch.Tensor | None = None,
                V: list[int] | None = None, draft_tokens: torch.Tensor | None = None, D: list[int] | None = None
                ) -> Writes:  # fmt: skip
    """§19.1 for cases concatenated, case ``k`` of ``B[k]`` rows over ``R[k]`` state rows, a
    history ``[R[k], W[k]]``, sampled rows of ``S[k]`` columns, penalties' counts ``[R[k], V[k]]``
    and drafts ``[B[k], D[k]]`` where given (every case of a batch the same call). A row with
    ``s = idx_mapping[b] >= 0``, ``t = total_len[s]``, ``n = num_sampled[b]``: ``n > 0``:
    ``last_sampled_tokens[s] = sampled[b, n - 1]``, ``total_len[s] = t + n``; ``all_token_ids[s,
    t + i] = sampled[b, i]`` (int32) and ``output_bin_counts[s, sampled[b, i]] += 1`` for
    ``i < n``; ``num_computed_tokens[s] += qlen_b - num_rejected[b]`` (``qlen_b = 0`` without
    ``query_start_loc``; int32); ``draft_tokens_out[s, i] = draft_tokens[b, i]`` for ``i < D``.
    Masked rows (``-1``) write nothing. The rows that write are counted on the host (one wait
    for the device)."""
    dev = idx_mapping.device
    Bn, Rn, Wn, Sn = (np.asarray(x, dtype=np.int64) for x in (B, R, W, S))

    rc, b = _places(Bn, dev)
    rows = torch.arange(rc.numel(), device=dev)
    s = idx_mapping.long()
    real = s >= 0
    n = torch.where(real, num_sampled.long().clamp(min=0), 0)
    nr = num_rejected.long()
    sb = _per(rc, _base(Rn)) + s.clamp(min=0)  # the row's state entry in the concatenation
    t = total_len.long()[sb]
    dn = torch.where(real, _per(rc, np.asarray(D, dtype=np.int64)), 0) if draft_tokens is not None else torch.zeros_like(n)
    sums = torch.stack([real.long(), (n > 0).long(), n, dn]).sum(1).cpu().numpy()  # the batch's one wait for the device
    wr, _ = _ragged(real.long(), int(sums[0]))  # the real rows
    sr, _ = _ragged((n > 0).long(), int(sums[1]))  # the rows that sampled
    r, i = _ragged(n, int(sums[2]))  # each sampled token
    srow = _per(rc, _base(Bn * Sn)) + b * _per(rc, Sn)  # the row's first sampled column, flat
    token = sampled_tokens.reshape(-1).long()[srow[r] + i]
    out: Writes = {
        "last_sampled_tokens": (sb[sr], sampled_tokens.reshape(-1).long()[srow[sr] + n[sr] - 1]),
        "total_len": (sb[sr], _int32(t[sr] + n[sr])),
        "all_token_ids": (_per(rc[r], _base(Rn * Wn)) + s[r] * _per(rc[r], Wn) + t[r] + i, _int32(token)),
    }
    qlen = torch.zeros_like(n)
    if query_start_loc is not None:
        q = query_start_loc.long()
        at = rows + rc
        qlen = q[at + 1] - q[at]
    out["num_computed_tokens"] = (sb[wr], _int32(num_computed_tokens.long()[sb[wr]] + qlen[wr] - nr[wr]))
    if output_bin_counts is not None:
        Vn = np.asarray(V, dtype=np.int64)
        at = _per(rc[r], _base(Rn * Vn)) + s[r] * _per(rc[r], Vn) + token
        order = torch.sort(at).values  # each counted element's count plus how often it is counted
        times = torch.searchsorted(order, at, right=True) - torch.searchsorted(order, at)
        out["output_bin_counts"] = (at, _int32(output_bin_counts.reshape(-1)[at].long() + times))
    if draft_tokens is not None:
        Dn = np.asarray(D, dtype=np.int64)
        dr, j = _ragged(dn, int(sums[3]))
        out["draft_tokens_out"] = (_per(rc[dr], _base(Rn * Dn)) + s[dr] * _per(rc[dr], Dn) + j,
                                   draft_tokens.reshape(-1).long()[_per(rc[dr], _base(Bn * Dn)) + b[dr] * _per(rc[dr], Dn) + j])
    return out


def compute_slot_mappings(*, idx_mapping: torch.Tensor, query_start_loc: torch.Tensor, positions: torch.Tensor,
                          tables: list[torch.Tensor], block_sizes: torch.Tensor, slot_mapping_enabled: torch.Tensor,
                          dcp_sharded: torch.Tensor, B: list[int], R: list[int], T: list[int], MT: list[int],
                          W: list[list[int]], cp: list[tuple[int, int, int]], pad_id: int = -1) -> Writes:
    """§22.1 for cases concatenated, every case with the same ``G`` groups: case ``k`` of
    ``B[k]`` rows over ``R[k]`` state rows, ``T[k]`` tokens, slot mappings ``[G, MT[k]]``, group
    ``g``'s table ``[R[k], W[k][g]]`` (``tables[g]``, every case's concatenated), its block size
    and flags at ``k * G + g`` of ``block_sizes``, ``slot_mapping_enabled``, ``dcp_sharded``,
    ``cp[k] = (CP_SIZE, cp_rank, CP_INTERLEAVE)``. Every slot is written: a row's token ``t``
    (position ``p``, its row's state row ``s``): with context parallelism and a sharded group,
    ``V = bs * CP``, ``vo = p mod V``, local when ``(vo div I) mod CP == cp_rank``, ``lp = (p div V)
    * bs + (vo div (I * CP)) * I + vo mod I``; else ``lp = p``, local; ``bn = table[s, lp div bs]``;
    the slot ``bn * bs`` (an int32 product) ``+ lp mod bs`` where enabled, ``s >= 0`` and local,
    else ``pad_id``; the slots past the case's tokens ``pad_id``."""
    dev = idx_mapping.device
    G = len(tables)
    Bn, Rn, Tn, Mn = (np.asarray(x, dtype=np.int64) for x in (B, R, T, MT))
    CPn, rank, IL = (np.asarray(x, dtype=np.int64) for x in zip(*cp, strict=True)) if cp else (np.zeros(0, np.int64),) * 3
    k, nt = len(Bn), int(Tn.sum())
    rc, _ = _places(Bn, dev)
    at = torch.arange(rc.numel(), device=dev) + rc
    q = query_start_loc.long()
    # every token, once for all groups: its case and state row (a case's rows tile its tokens)
    tc = torch.repeat_interleave(torch.arange(k, device=dev), host_to(Tn, dev), output_size=nt)
    s = torch.repeat_interleave(idx_mapping.long(), q[at + 1] - q[at], output_size=nt)
    p = positions.long()
    j = torch.arange(nt, device=dev)
    # per case and group: block size, the decode context parallelism a group's slots see
    # (CP_SIZE, CP_INTERLEAVE, cp_rank; 1, 1, 0 where CP_SIZE is 1 or the group unsharded, which
    # make lp = p and every token local; the rank -1 where the group is disabled: no token
    # local), its table's rows, and where its slots start less where its tokens do
    flags = torch.stack([block_sizes.long(), slot_mapping_enabled.long(), dcp_sharded.long()]).reshape(3, k, G)
    Wn = np.asarray(W, dtype=np.int64).reshape(k, G)
    out_base = _base(G * Mn)
    # the cases' host quantities, one copy: CP_SIZE > 1, CP_SIZE, CP_INTERLEAVE, cp_rank, then
    # each group's table start, width and slots' start less tokens' start
    host = host_to(np.concatenate([np.stack([CPn > 1, CPn, IL, rank]).astype(np.int64)]
                                  + [np.stack([_base(Rn * Wn[:, h]), Wn[:, h], out_base + h * Mn - _base(Tn)])
                                     for h in range(G)]), dev)
    cp_on, cp_size, interleave, cp_rank = host[:4]
    index, value = [], []
    for h in range(G):
        bs_k, enabled_k, sharded_k = flags[:, :, h]
        shard_k = sharded_k * cp_on
        per_case = torch.stack([bs_k, torch.where(shard_k > 0, cp_size, 1), torch.where(shard_k > 0, interleave, 1),
                                torch.where(enabled_k > 0, shard_k * cp_rank, -1), *host[4 + 3 * h: 7 + 3 * h]])
        bs, C, I, rank_t, base, width, shift = per_case[:, tc]  # noqa: E741
        V = bs * C
        vo = p % V
        read = (s >= 0) & ((vo // I) % C == rank_t)
        # a read token's column lp div bs is p div V: the interleave divides the block size
        bn = tables[h].reshape(-1).long()[torch.where(read, base + s * width + p // V, 0)]
        value.append(torch.where(read, _int32(bn * bs).long() + (vo // (I * C)) * I + vo % I, pad_id))
        index.append(j + shift)
    # the slots past each case's tokens, in every group
    pc, pt = _places(np.repeat(Mn - Tn, G), dev)
    index.append(pt + host_to(np.repeat(out_base, G) + np.tile(np.arange(G), k) * np.repeat(Mn, G) + np.repeat(Tn, G), dev)[pc])
    value.append(torch.full_like(pt, pad_id))
    return {"slot_mappings": (torch.cat(index), torch.cat(value))}


def gather_block_tables(*, idx_mapping: torch.Tensor, src_block_tables: list[torch.Tensor], num_blocks: torch.Tensor,
                        num_computed_tokens: torch.Tensor, sliding_window_reach: torch.Tensor,
                        block_sizes: torch.Tensor, B: list[int], R: list[int], NR: list[int], W: list[list[int]],
                        mask: list[bool]) -> Writes:
    """§21.1 for cases concatenated, every case with the same ``G`` groups: case ``k`` of
    ``B[k]`` rows over ``R[k]`` state rows, ``NR[k]`` grid rows, ``MASK_SLIDING_WINDOW =
    mask[k]``; group ``g``'s source table ``[R[k], W[k][g]]`` (``src_block_tables[g]``, every
    case's concatenated), ``num_blocks`` ``[G, R[k]]``, ``num_computed_tokens`` ``[R[k]]``, the
    group's reach and block size at ``k * G + g``. The writes to ``dst_block_table_<g>``
    (``dst_g``, of its source's shape): a row ``b < B`` of state row ``s``, ``n = num_blocks[g,
    s]``, ``null = max(num_computed_tokens[s] - reach, 0) div bs`` where masked and ``reach >
    0``, else 0: ``dst_g[b, i] = src_g[s, i]`` for ``null <= i < n``, 0 for ``i < min(null,
    n)``; a grid row ``B <= b < NR``: all of its ``W`` entries 0; nothing else. The rows'
    blocks are counted on the host (one wait for the device)."""
    dev = idx_mapping.device
    G = len(src_block_tables)
    Bn, Rn, Nn = (np.asarray(x, dtype=np.int64) for x in (B, R, NR))
    Wn = np.asarray(W, dtype=np.int64).reshape(len(Bn), G)
    rc, b = _places(Bn, dev)
    s = idx_mapping.long()
    first = num_computed_tokens.long()[_per(rc, _base(Rn)) + s]
    masked = _per(rc, np.asarray(mask, dtype=bool))
    nb = num_blocks.reshape(-1).long()
    counts, nulls = [], []
    for g in range(G):
        counts.append(nb[_per(rc, _base(G * Rn)) + g * _per(rc, Rn) + s])
        reach = sliding_window_reach.long()[rc * G + g]
        bs = block_sizes.long()[rc * G + g]
        nulls.append(torch.where(masked & (reach > 0), (first - reach).clamp(min=0) // bs, 0))
    sums = torch.stack([n.sum() for n in counts]).cpu().numpy() if G else np.zeros(0, np.int64)  # the one wait
    out: Writes = {}
    for g in range(G):
        r, i = _ragged(counts[g], int(sums[g]))  # every entry of a row's blocks
        base = _per(rc, _base(Rn * Wn[:, g]))  # where the row's case's table starts
        width = _per(rc, Wn[:, g])
        null, src_row, dst_row = torch.stack([nulls[g], base + s * width, base + b * width])[:, r]  # one gather
        src = src_block_tables[g].reshape(-1)
        value = torch.where(i >= null, src[src_row + i], 0).to(torch.int32)
        pc, p = _places((Nn - Bn) * Wn[:, g], dev)  # every entry of the grid rows past the batch
        pad = _per(pc, _base(Rn * Wn[:, g]) + Bn * Wn[:, g]) + p
        out[f"dst_block_table_{g}"] = (torch.cat([dst_row + i, pad]),
                                        torch.cat([value, torch.zeros(pad.numel(), dtype=torch.int32, device=dev)]))
    return out
