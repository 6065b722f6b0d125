"""Where kernels run: compiled on a CUDA GPU, or under Triton's interpreter on the CPU.

Triton reads ``TRITON_INTERPRET`` when ``@triton.jit`` runs, i.e. when a kernel module is
imported, so :func:`select_backend` must run before any kernel module is imported; every
entry point (the pytest plugin, the CLI, the benchmark) calls it first.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from ..core.errors import UserError
from .interpreter_compat import bool_arguments, comparisons_typed_int1
from .interpreter_speed import speed_up

BACKENDS = ("auto", "cuda", "interpreter")


@dataclass(frozen=True)
class Backend:
    """The chosen backend: ``name`` is ``"cuda"`` or ``"interpreter"``; ``device`` is torch's."""

    name: str
    device: str

    @property
    def compiled(self) -> bool:
        return self.name == "cuda"


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def select_backend(requested: str = "auto") -> Backend:
    """Choose the backend and set ``TRITON_INTERPRET`` accordingly.

    ``auto`` takes CUDA when torch sees a GPU, else the interpreter. Asking for ``cuda`` on a
    machine without one is a :class:`UserError`. Once a kernel module is imported, the choice
    can no longer change in this process; asking for another one is a :class:`UserError`.
    """
    if requested not in BACKENDS:
        raise UserError(f"--backend: {requested!r} is not one of {', '.join(BACKENDS)}")
    interp_env = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    if requested == "auto":
        requested = "interpreter" if interp_env or not _cuda_available() else "cuda"
    if requested == "cuda" and not _cuda_available():
        raise UserError("--backend cuda: no CUDA GPU is visible (torch.cuda.is_available() is False)")
    want_interp = requested == "interpreter"
    already = "eaglefuzz.kernels.spec_decode_utils" in sys.modules
    if already and want_interp != interp_env:
        raise UserError(
            f"--backend {requested}: kernels were already imported with TRITON_INTERPRET="
            f"{os.environ.get('TRITON_INTERPRET', '0')}; choose the backend before importing them"
        )
    os.environ["TRITON_INTERPRET"] = "1" if want_interp else "0"
    if want_interp:

        bool_arguments()  # Triton 3.6's interpreter refuses the bool arguments vLLM passes
        comparisons_typed_int1()  # a broadcast comparison result must stay a bool mask
        speed_up()  # same results, fewer discarded checks per program instance
    return Backend(requested, "cpu" if want_interp else "cuda")
