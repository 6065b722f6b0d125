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
