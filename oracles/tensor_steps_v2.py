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

import torch

__all__ = ["get_num_sampled_and_rejected"]

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
