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
