"""PORT: eagle_prepare_inputs_padded_kernel written in plain torch on the CPU (not a bug).

Like vLLM's CPU backend, which replaces a Triton kernel with a C++ op behind the same call,
this port is an object indexable as ``kernel[grid](*args)``: the harness launches it exactly
as it launches the Triton kernel, so a port is fuzzed against the same oracles.
tests/test_seeded_bugs.py expects it to pass.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

IS_PORT = True


class _PreparePaddedPort:
    """``port[grid](cu, valid, query_start_loc, token_indices_out, num_rejected_out, num_reqs)``."""

    __name__ = "eagle_prepare_inputs_padded_kernel"

    def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., None]:
        if len(grid) != 1:
            raise ValueError(f"eagle_prepare_inputs_padded_kernel takes a 1-D grid, got {grid!r}")
        return self._run

    @staticmethod
    def _run(
        cu_num_draft_tokens: torch.Tensor,
        valid_sampled_tokens_count: torch.Tensor,
        query_start_loc: torch.Tensor,
        token_indices_to_sample: torch.Tensor,
        num_rejected_tokens: torch.Tensor,
        num_reqs: int,
    ) -> None:
        # Programs r >= num_reqs of a padded grid write nothing: only the first num_reqs
        # entries are read or written, whatever the grid.
        n = int(num_reqs)
        cu = cu_num_draft_tokens[:n].to(torch.int64)
        prev = torch.cat([cu.new_zeros(1), cu[:-1]])
        drafts = cu - prev  # cu is an inclusive cumulative sum
        valid = valid_sampled_tokens_count[:n].to(torch.int64)
        rejected = torch.where(drafts > 0, drafts + 1 - valid, torch.zeros_like(drafts))
        last = query_start_loc[1 : n + 1].to(torch.int64) - 1
        token_indices_to_sample[:n].copy_((last - rejected).to(torch.int32))
        num_rejected_tokens[:n].copy_(rejected.to(torch.int32))


eagle_prepare_inputs_padded_kernel = _PreparePaddedPort()
