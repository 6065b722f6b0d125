"""How the Python wrappers of the Numba oracles enter their loop functions.

Numba compiles one specialization per argument type, and an array's type includes whether it is
writeable: the same loop function called once with a case's (read-only) array and once with a
fresh NumPy array compiles twice (seconds each, in every process whose cache lacks it). An
:func:`entry` function passes every array argument it does not write as a read-only view, so a
wrapper's calls meet one specialization per dtype pattern, and a loop body that writes an array
it did not declare fails to compile (Numba's "Cannot modify readonly array"), not silently.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

__all__ = ["entry"]


def _read_only(a: Any) -> Any:
    if isinstance(a, np.ndarray) and a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def entry(*writes: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``numba.njit(cache=True)`` for a loop function that Python code calls: the parameters
    named in ``writes`` are passed as given, every other array argument read-only.

    Loop functions that only other loop functions call keep ``numba.njit`` (they are typed
    through their callers). The compiled dispatcher is the returned function's ``compiled``.
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        params = list(inspect.signature(fn).parameters)
        unknown = sorted(set(writes) - set(params))
        if unknown:
            raise TypeError(f"{fn.__name__}: entry(writes=...) names no parameter {unknown}")
        compiled = numba.njit(cache=True)(fn)
        read = frozenset(i for i, p in enumerate(params) if p not in writes)

        @functools.wraps(fn)
        def call(*args: Any) -> Any:
            return compiled(*(_read_only(a) if i in read else a for i, a in enumerate(args)))

        call.compiled = compiled  # type: ignore[attr-defined]
        return call

    return wrap
