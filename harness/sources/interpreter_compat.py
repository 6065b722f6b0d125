"""Make older Tritons' interpreter take the arguments vLLM's launches pass.

Triton 3.6's interpreter (the one on the lent H200's image) turns a Python ``bool`` argument
into an int32 value typed ``int1``, which its own size check then refuses ("numpy data itemsize
(32 bits) exceeds dtype primitive_bitwidth (1 bits) for triton type int1"): every launch of
``copy_and_expand_eagle_inputs_kernel`` (``shift_input_ids`` is a ``bool``, as vLLM passes it)
fails under it, and a harness that reported that as the kernel's crash would be wrong. Later
Tritons pass a ``bool`` as a one-byte ``int1`` value; :func:`bool_arguments` makes an older
interpreter do the same. Compiled runs are not affected.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def bool_arguments() -> bool:
    """Let the interpreter take ``bool`` arguments (idempotent); whether a change was needed."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as interp
    except ImportError:  # pragma: no cover - no triton
        return False
    convert = getattr(interp, "_implicit_cvt", None)
    if not callable(convert) or getattr(convert, "_eaglefuzz_bool", False):
        return False
    try:
        convert(True)
        return False  # this Triton takes bool arguments as they are
    except ValueError:
        pass

    def implicit_cvt(arg):  # noqa: ANN001, ANN202 - Triton's own signature
        if isinstance(arg, bool):
            return tl.tensor(interp.TensorHandle(np.array([arg], dtype=np.bool_), tl.int1), tl.int1)
        return convert(arg)

    implicit_cvt._eaglefuzz_bool = True  # type: ignore[attr-defined]
    interp._implicit_cvt = implicit_cvt
    return True


def comparisons_typed_int1() -> bool:
    """Type the interpreter's comparison results ``int1``, as compiled Triton does (idempotent);
    whether a change was made.

    Triton's interpreter (3.6 to 3.9 at least) computes ``a != b`` through its binary-operation
    helper, which types the result like its left operand: a comparison of int8 values holds
    NumPy bools typed ``int8``. Broadcasting such a scalar to a block (``create_splat``) then
    makes int8 data, and a load masked by it fails with "mask has unsupported dtype". vLLM's
    ``_compute_slot_mappings_kernel`` does exactly that under decode context parallelism
    (``~sharded | is_local``, ``sharded`` loaded from a bool tensor), so every such launch
    failed under the interpreter while the compiled kernel runs. Compiled runs are not affected.
    """
    try:
        import triton.language as tl
        from triton.runtime import interpreter as interp
    except ImportError:  # pragma: no cover - no triton
        return False
    builder = getattr(interp, "InterpreterBuilder", None)
    binary = getattr(builder, "binary_op", None)
    if binary is None or getattr(binary, "_eaglefuzz_int1", False):
        return False

    def binary_op(self, lhs, rhs, op):  # noqa: ANN001, ANN202 - Triton's own signature
        out = binary(self, lhs, rhs, op)
        if out.data.dtype == np.bool_ and out.dtype != tl.int1:
            return interp.TensorHandle(out.data, tl.int1)
        return out

    binary_op._eaglefuzz_int1 = True  # type: ignore[attr-defined]
    builder.binary_op = binary_op
    return True


INTERPRETED_LIBDEVICE = ("log1p", "expm1", "exp", "log", "log2", "exp2", "sqrt", "tanh")
"""The libdevice functions :func:`libdevice_for_interpreter` computes with NumPy."""


def tldevice() -> Any:
    """What vLLM's ``tldevice`` (``vllm.triton_utils``) is here: Triton's libdevice, or under the
    interpreter (``TRITON_INTERPRET=1``) :func:`libdevice_for_interpreter`; ``None`` without
    libdevice. A file of Model Runner V2's verification taken without its imports (``--kernels``,
    a seeded bug) gets this name."""
    import os

    try:
        import triton.language.extra.libdevice as libdevice
    except ImportError:  # pragma: no cover - a Triton without libdevice
        return None
    return libdevice_for_interpreter() if os.environ.get("TRITON_INTERPRET") == "1" else libdevice


def libdevice_for_interpreter() -> Any:
    """``triton.language.extra.libdevice`` as the interpreter can run it.

    vLLM imports libdevice as ``tldevice`` (``vllm.triton_utils``), and Model Runner V2's
    ``_resample_kernel`` calls ``tldevice.log1p``. libdevice's functions have no body: a compiled
    kernel links them by name, and the interpreter (Triton 3.6 to 3.9 at least) maps only
    ``triton.language``'s own math to NumPy, so under it ``tldevice.log1p(x)`` is ``None`` and the
    kernel fails on its next operation. This namespace gives :data:`INTERPRETED_LIBDEVICE` as
    NumPy's functions of the block's data in its own dtype (as the interpreter computes
    ``tl.log``), and every other name as libdevice's. Only for interpreted runs: a compiled
    kernel must see libdevice itself."""
    import types

    import triton.language as tl
    import triton.language.extra.libdevice as libdevice
    from triton.runtime.interpreter import TensorHandle

    ns = types.SimpleNamespace(**{k: v for k, v in vars(libdevice).items() if not k.startswith("__")})

    def elementwise(fn: Any) -> Any:
        def apply(arg0: Any, _semantic: Any = None) -> Any:  # noqa: ARG001 - Triton passes _semantic
            data = arg0.handle.data
            with np.errstate(all="ignore"):
                out = fn(data).astype(data.dtype, copy=False)
            return tl.tensor(TensorHandle(out, arg0.handle.dtype), arg0.type)

        return apply

    for name in INTERPRETED_LIBDEVICE:
        setattr(ns, name, elementwise(getattr(np, name)))
    ns.__name__ = "eaglefuzz.interpreted_libdevice"
    return ns
