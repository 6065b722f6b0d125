"""A port of ``eagle_prepare_next_token_padded_kernel`` to plain torch, as a porter writes it.

Vectorised over requests: one pass over the ``[num_reqs, S]`` block of sampled ids, no loop. It
follows docs/CONTRACT.md §3.1 as a porter reads it: a column is valid when its id is not -1
and below ``vocab_size``; the last valid column gives the next token, the backup is used for a
discarded request or a row without a valid column. Like most ports it reads all ``S`` columns
and takes the row stride from the tensor, so it has no use for the Triton kernel's
``BLOCK_SIZE_TOKENS`` and ``stride_sampled_token_ids``.

Fuzz it (tests/test_adapters.py does, in the CI):

    eaglefuzz fuzz --kernels examples/ports/next_token_torch.py
    eaglefuzz fuzz --kernels examples/ports/next_token_torch.py --domain extended
"""

from __future__ import annotations

import torch

from eaglefuzz.harness.adapters import grid_kernel


@grid_kernel(ignores=("BLOCK_SIZE_TOKENS", "stride_sampled_token_ids"))
def eagle_prepare_next_token_padded_kernel(
    sampled_token_ids: torch.Tensor,  # [num_reqs, S], rows may be strided
    discard_request_mask: torch.Tensor,  # [>= num_reqs] bool
    backup_next_token_ids: torch.Tensor,  # [>= num_reqs] int32
    next_token_ids: torch.Tensor,  # [num_reqs] int32, written
    valid_sampled_tokens_count: torch.Tensor,  # [num_reqs] int32, written
    vocab_size: int,
    num_sampled_tokens_per_req: int,
    num_reqs: int,
) -> None:
    ids = sampled_token_ids[:num_reqs, :num_sampled_tokens_per_req]
    valid = (ids != -1) & (ids < vocab_size)
    count = valid.sum(dim=1)
    # The last valid column: the first one from the right.
    last = ids.shape[1] - 1 - valid.flip(1).to(torch.int8).argmax(dim=1)
    picked = ids.gather(1, last.unsqueeze(1)).squeeze(1)
    discard = discard_request_mask[:num_reqs]
    backup = backup_next_token_ids[:num_reqs]
    next_token_ids[:num_reqs] = torch.where(discard | (count == 0), backup, picked)
    valid_sampled_tokens_count[:num_reqs] = torch.where(discard, torch.zeros_like(count), count).to(torch.int32)
