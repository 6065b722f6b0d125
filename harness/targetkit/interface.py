"""The interface check: an implementation must take the contract's parameters.

A kernel from another vLLM release or a fork may have other parameters (vLLM 0.12/0.13's
``eagle_prepare_inputs_padded_kernel`` has no ``num_rejected_tokens_gpu_ptr``; forks add flags
or outputs). Launching it anyway would fail or misbehave on every case and be reported as a
bug finding; it is an interface mismatch, said in one line per target before any example runs.
The verdict is the target's: the other targets of the file are tested.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from ..core.errors import UserError

UNRESOLVED = "__eaglefuzz_unresolved__"
"""A module global of a ``--kernels`` file taken apart without its imports (:mod:`~..sources.file`):
name -> why the module lacks it (an import of the file, a definition not taken out). A run that
needs one is its target's "could not be tested" verdict (:func:`~.base.cannot_test`)."""
SOURCE_FILE = "__eaglefuzz_source__"
"""A module global of such a module: the file it was taken from."""


class InterfaceMismatch(UserError):
    """Implementations whose parameters are not those of their targets' contract, and nothing
    else to test: one line per target (each line is one verdict)."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, "\n".join(" ".join(line.split()) for line in message.splitlines() if line.strip()))


def parameters_of(impl: Any) -> list[str] | None:
    """The parameter names of ``impl``, or ``None`` when they cannot be known.

    A Triton ``JITFunction`` lists them in ``arg_names``; a Python function (also behind
    ``torch.compile`` or ``functools.wraps``) through :func:`inspect.signature`; an object that
    only supports ``kernel[grid](...)`` (a port's wrapper) may declare ``parameters``.
    """
    declared = getattr(impl, "parameters", None)
    if isinstance(declared, list | tuple) and all(isinstance(p, str) for p in declared):
        return list(declared)
    names = getattr(impl, "arg_names", None)
    if isinstance(names, list | tuple) and all(isinstance(p, str) for p in names):
        return list(names)
    fn = getattr(impl, "_torchdynamo_orig_callable", impl)
    if not callable(fn) or isinstance(fn, type):
        return None
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [
        p.name for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def differences(impl: Any, expected: Sequence[str] | None) -> tuple[list[str], list[str]] | None:
    """``(missing, extra)``: the contract's parameters ``impl`` lacks and those it adds;
    ``None`` when its parameters are the contract's or cannot be known."""
    if expected is None:
        return None
    actual = parameters_of(impl)
    if actual is None or list(actual) == list(expected):
        return None
    return [p for p in expected if p not in actual], [p for p in actual if p not in expected]


def interface_problem(
    target: str, impl: Any, expected: Sequence[str] | None, where: str, hint: str = ""
) -> str | None:
    """One line saying how ``impl``'s parameters differ from ``expected`` (and ``hint``, how
    to test it anyway); ``None`` when they match or cannot be known."""
    diff = differences(impl, expected)
    if diff is None:
        return None
    missing, extra = diff
    parts = []
    if missing:
        parts.append("missing " + ", ".join(missing))
    if extra:
        parts.append("extra " + ", ".join(extra))
    if not parts:
        parts.append("the same names in another order: " + ", ".join(parameters_of(impl) or ()))
    return (
        f"{where}: {target} has another interface than the contract's "
        f"({'; '.join(parts)}): not a bug finding, {target} not tested" + (f"; {hint}" if hint else "")
    )
