"""Torch oracles for the EAGLE helper kernels, written from docs/CONTRACT.md §1, to run on the
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

import torch

__all__ = ["copy_and_expand_eagle_inputs"]

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
    padding_token_id: int,
    parallel_drafting_token_id: int,
    total_input_tokens: int,
    num_padding_slots_per_request: int,
    shift_input_ids: bool,
    tokens: int | None = None,
) -> Writes:
    """§1.1: per request ``r``, ``total = qlen + P - s`` slots from ``out_start = qs + r*(P - s)``:
    valid slots (``j < nv``), the bonus (``j == nv``), ``P - 1`` parallel-drafting slots, then the
    rejected tokens as padding; the new-token indices of the bonus and parallel slots; in shift
    mode the hidden-state mapping of every input token.

    ``tokens``: the requests' input tokens, ``query_start_loc[R] - query_start_loc[0]``, when
    the caller knows it (``T`` in the production domain); read from the device otherwise."""
    P, s, T = num_padding_slots_per_request, int(bool(shift_input_ids)), total_input_tokens
    qsl = query_start_loc.long()
    qs, nqs, qe = qsl[:-1], qsl[1:], query_end_loc.long()
    R = qe.numel()
    nv = qe - qs + 1 - s
    out_start = qs + torch.arange(R, device=qs.device) * (P - s)
    tokens = int(qsl[-1] - qsl[0]) if tokens is None else tokens
    r, j = _ragged(nqs - qs + P - s, tokens + R * (P - s))
    nv_r = nv[r]
    dest = out_start[r] + j
    valid = j < nv_r
    parallel = (j > nv_r) & (j < nv_r + P)
    rejected = j >= nv_r + P
    src = torch.clamp(qs[r] + s + j, max=T - 1)
    ids = torch.where(valid, target_token_ids[torch.where(valid, src, 0)], next_token_ids[r])
    ids = torch.where(parallel, torch.full_like(ids, parallel_drafting_token_id), ids)
    ids = torch.where(rejected, torch.full_like(ids, padding_token_id), ids)
    p0 = target_positions[qs][r]
    positions = torch.where(rejected, torch.zeros_like(p0), p0 + j.to(p0.dtype))
    kr = torch.arange(R * P, device=qs.device)  # new-token index r*P + k: the slot nv + k of request r
    writes: Writes = {
        "out_input_ids": (dest, ids.to(torch.int32)),
        "out_positions": (dest, positions),
        "out_is_rejected_token_mask": (dest, rejected),
        "out_is_masked_token_mask": (dest, parallel),
        "out_new_token_indices": (kr, (out_start + nv).repeat_interleave(P, output_size=R * P) + kr % P),
    }
    writes["out_new_token_indices"] = (kr, writes["out_new_token_indices"][1].to(torch.int32))
    if s:
        tr, tj = _ragged(nqs - qs, tokens)
        writes["out_hidden_state_mapping"] = (qs[tr] + tj, (out_start[tr] + tj).to(torch.int32))
    return writes
