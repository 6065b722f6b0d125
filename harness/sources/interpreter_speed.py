"""Make Triton's interpreter cheaper per program instance, without changing what it computes.

Under the interpreter (``TRITON_INTERPRET=1``) the cost of a launch is its program instances:
every ``tl`` operation of every program goes through Triton's Python front end. Two parts of
that front end do work whose result the interpreter throws away:

- *Integer overflow sanitizing.* For every int32 ``+``, ``-`` and ``*`` the front end recomputes
  the operation in int64 and builds a range check for ``device_assert``; the interpreter's
  options have ``debug=False``, so ``device_assert`` returns before looking at the check. The
  values the kernel sees are the same either way. With the sanitizer off, a program of
  ``copy_and_expand_eagle_inputs_kernel`` runs about 1.5x faster.
- *The NumPy dtype of a Triton dtype.* ``_get_np_dtype`` builds a 19-entry dict on every call
  (dozens per program); a memo returns the same answers.
- *Re-patching the language for nested calls.* Every call of a ``@triton.jit`` helper inside a
  kernel (``tl.sum``, ``tl.max``: three per program of ``eagle_prepare_next_token_padded_kernel``)
  walks every member of ``triton.language`` again to swap in the interpreter's versions, which
  the enclosing launch (or the first such call in it) already swapped in. Within one launch, a
  repeated patch of the same modules is skipped; the launch's own restore works as before.

:func:`speed_up` applies both when the running Triton has the pieces exactly as expected and
``debug`` is off, and leaves Triton alone otherwise. Compiled (CUDA) runs are not affected.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

import numpy as np

_applied = False


def speed_up() -> bool:
    """Apply the two savings to Triton's interpreter (idempotent); whether they are in place."""
    global _applied
    if _applied:
        return True
    try:
        import triton.language as tl
        from triton.runtime import interpreter as interp
    except ImportError:  # pragma: no cover - no triton: nothing to speed up
        return False
    builder = getattr(interp, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or not dataclasses.is_dataclass(options) or getattr(options, "debug", True):
        return False
    if getattr(options, "sanitize_overflow", False):
        builder.options = dataclasses.replace(options, sanitize_overflow=False)
    original = getattr(interp, "_get_np_dtype", None)
    if callable(original) and not getattr(original, "_eaglefuzz_memo", False):
        interp._get_np_dtype = _memo_np_dtype(original, tl, np)
    patch = getattr(interp, "_patch_lang", None)
    if callable(patch) and not getattr(patch, "_eaglefuzz_memo", False):
        interp._patch_lang = _once_per_launch(patch, tl)
    _applied = True
    return True


class _NoChanges:
    def restore(self) -> None:
        pass


def _once_per_launch(original: Any, tl: Any) -> Any:
    """``original`` (patch the language modules a function sees), skipped when the modules are
    already patched in the launch in progress: the first patch of a launch owns the launch, and
    its ``restore`` ends it."""

    state: dict[str, Any] = {"owner": None, "modules": set()}

    def modules_of(fn: Any) -> frozenset[int]:
        return frozenset(
            id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and (v is tl or v is tl.core)
        )

    def patch_lang(fn: Any) -> Any:
        mods = modules_of(fn)
        if state["owner"] is not None and mods <= state["modules"]:
            return _NoChanges()
        scope = original(fn)
        if state["owner"] is None:
            restore = scope.restore

            def end_launch() -> None:
                state["owner"] = None
                state["modules"] = set()
                restore()

            scope.restore = end_launch
            state["owner"] = scope
        state["modules"] |= mods
        return scope

    patch_lang._eaglefuzz_memo = True  # type: ignore[attr-defined]
    return patch_lang


def _memo_np_dtype(original: Any, tl: Any, np: Any) -> Any:
    """``original`` (Triton dtype -> NumPy dtype), memoised on the scalar element type."""
    uint64 = np.dtype(np.uint64)

    @functools.cache
    def scalar(dtype: Any) -> Any:
        return original(dtype)

    def np_dtype(tt_dtype: Any) -> Any:
        if isinstance(tt_dtype, tl.pointer_type):
            return uint64
        if isinstance(tt_dtype, tl.block_type):
            element = tt_dtype.element_ty
            return uint64 if isinstance(element, tl.pointer_type) else _cached(element)
        return _cached(tt_dtype)

    def _cached(dtype: Any) -> Any:
        try:
            return scalar(dtype)
        except TypeError:  # unhashable: not a plain dtype, ask Triton itself
            return original(dtype)

    np_dtype._eaglefuzz_memo = True  # type: ignore[attr-defined]
    return np_dtype
