"""Triton 3.6's interpreter refuses a ``bool`` argument (the H200 image's Triton): the harness
makes it take one, as later Tritons do, instead of reporting every copy_and_expand case as a
crash of the kernel (seen on the H200: 31 false crash findings before the fix)."""

from __future__ import annotations

import numpy as np
import pytest


def test_an_interpreter_that_refuses_bool_arguments_is_made_to_take_them(monkeypatch):
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from triton.runtime import interpreter as interp

    from eaglefuzz.harness.sources.interpreter_compat import bool_arguments

    original = interp._implicit_cvt

    def like_triton_3_6(arg):  # noqa: ANN001, ANN202 - a bool is an int there: int32 data typed int1
        if isinstance(arg, bool):
            raise ValueError("numpy data itemsize (32 bits) exceeds dtype primitive_bitwidth (1 bits) for triton type int1")
        return original(arg)

    monkeypatch.setattr(interp, "_implicit_cvt", like_triton_3_6)
    assert bool_arguments() is True
    flag = interp._implicit_cvt(True)
    assert flag.type == tl.int1 and flag.handle.data.dtype == np.bool_ and bool(flag.handle.data[0]) is True
    seven = interp._implicit_cvt(7)
    assert seven.handle.data.dtype == np.int32 and int(seven.handle.data[0]) == 7
    assert bool_arguments() is False  # idempotent
    assert triton.__version__


def test_an_interpreter_that_takes_bool_arguments_is_left_alone(monkeypatch):
    pytest.importorskip("triton")
    from triton.runtime import interpreter as interp

    from eaglefuzz.harness.sources.interpreter_compat import bool_arguments

    def takes_them(arg):  # noqa: ANN001, ANN202
        return arg

    monkeypatch.setattr(interp, "_implicit_cvt", takes_them)
    assert bool_arguments() is False
    assert interp._implicit_cvt is takes_them


def test_a_broadcast_comparison_stays_a_bool_mask(backend):
    """Triton's interpreter typed ``a != b`` like ``a`` (int8 for a bool tensor's load), so a
    scalar comparison broadcast to a block became int8 data and a load masked by it failed
    ("mask has unsupported dtype"): vLLM's ``_compute_slot_mappings_kernel`` under decode context
    parallelism. The backend's set-up types comparisons ``int1``, as compiled Triton does."""
    if backend.device != "cpu":
        pytest.skip("an interpreter patch")
    import torch
    import triton
    import triton.language as tl

    from eaglefuzz.harness.sources.interpreter_compat import comparisons_typed_int1

    @triton.jit
    def kernel(flag_ptr, out_ptr):
        flag = tl.load(flag_ptr)
        offs = tl.arange(0, 4)
        mask = ~flag | (offs % 2 == 1)
        tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=mask, other=0) + 1)

    out = torch.tensor([10, 20, 30, 40])
    kernel[(1,)](torch.tensor([True]), out)
    assert out.tolist() == [1, 21, 1, 41]
    assert comparisons_typed_int1() is False  # done by the backend's set-up; idempotent


_LIBDEVICE = None


def test_interpreted_libdevice_computes_log1p_with_numpy():
    """vLLM's ``_resample_kernel`` calls ``tldevice.log1p``; libdevice has no bodies, so the
    interpreter needs the stand-in: NumPy's ``log1p`` in the block's dtype."""
    import os

    import numpy as np
    import pytest

    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("compiled: the interpreter is not used")
    import torch
    import triton
    import triton.language as tl

    from eaglefuzz.harness.sources.interpreter_compat import libdevice_for_interpreter

    global _LIBDEVICE
    _LIBDEVICE = libdevice_for_interpreter()  # a jit function reads its module's globals

    @triton.jit
    def kernel(x_ptr, y_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        tl.store(y_ptr + i, _LIBDEVICE.log1p(-tl.load(x_ptr + i)))

    x = torch.tensor([0.0, 0.5, 1e-8, 0.999999], dtype=torch.float32)
    y = torch.zeros(4, dtype=torch.float32)
    kernel[(1,)](x, y, N=4)
    assert y.numpy().tobytes() == np.log1p(-x.numpy()).tobytes()
