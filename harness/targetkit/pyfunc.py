"""Shared machinery of the targets that are plain Python functions (no kernel, no buffers).

Such a function takes objects (metadata, configs) and returns a new one. Its check builds the
objects from the case, keeps snapshots of every input, calls the function, and compares each
field of the result with the oracle (values, dtype, device) and each input with its snapshot.
Differences name the field in ``array``, the element in ``index`` (``None`` for the field as a
whole) and what kind of field it is in ``region``: ``changed field``, ``unchanged field``,
``input mutated``, ``result``.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
from typing import Any

import numpy as np

from ...kernels import vllm_types
from ..core.compare import Difference
from .base import CannotTest, Target, cannot_test

CHANGED = "changed field"
UNCHANGED = "unchanged field"
MUTATED = "input mutated"
RESULT = "result"


@dataclasses.dataclass(frozen=True)
class TensorValue:
    """What a tensor field must hold: its values (dtype included) and its device type."""

    values: np.ndarray
    device: str


class PythonFunctionTarget(Target):
    """A Python function of the module: its results are compared field by field.

    ``types`` names where the vLLM classes the function works on come from: the stand-ins of
    ``kernels/vllm_types.py`` by default, or a namespace holding vLLM's own.
    """

    kind = "python function"

    def __init__(self, types: Any = None) -> None:
        self._types = types

    @property
    def types(self) -> Any:
        return self._types if self._types is not None else self.default_types()

    @staticmethod
    def default_types() -> Any:
        """The stand-in classes this target builds its inputs from."""

        return vllm_types

    def call(self, impl: Any, *args: Any) -> Any:
        """``impl(*args)``; a function that needs what is not there (an attribute or a field the
        stand-in types lack, a name its file imports from modules that do not resolve here) is
        told apart from a bug: :class:`~.base.CannotTest` (a one-line verdict, exit 2), not a
        crash finding."""
        try:
            return impl(*args)
        except AttributeError as exc:
            gap = stand_in_gap(exc)
            if gap is not None:
                raise StandInGap(f"{self.name} {gap}") from None
            raise
        except (NameError, TypeError) as exc:
            why = cannot_test(exc)
            if why is not None:
                raise CannotTest(why if isinstance(exc, NameError) else f"{self.name} {why}") from None
            raise


class StandInGap(CannotTest):
    """The function under test uses an attribute the stand-in vLLM types do not model."""


def stand_in_gap(exc: AttributeError) -> str | None:
    """``needs X.y, which the stand-in lacks; ...`` when ``exc`` is about a stand-in object."""

    obj = getattr(exc, "obj", None)
    name = getattr(exc, "name", None)
    if obj is None or name is None or type(obj).__module__ != vllm_types.__name__:
        return None
    cls = type(obj).__name__
    modelled = ", ".join(field_names(obj)) if dataclasses.is_dataclass(obj) else "-"
    return (f"needs {cls}.{name}, which the stand-in lacks (it models {modelled}); "
            "install vLLM to use its classes")


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor (none can be while torch is not imported: this
    module does not import it, so that a process that only reads cases never loads it)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def snapshot(value: Any) -> Any:
    """A copy of ``value`` that later changes to ``value`` cannot reach."""
    if is_tensor(value):
        return TensorValue(value.detach().cpu().numpy().copy(), value.device.type)
    if isinstance(value, np.ndarray):
        return value.copy()
    return copy.deepcopy(value)


def describe(value: Any) -> str:
    """A short description of ``value`` for a report (type, dtype, device, shape)."""
    if is_tensor(value):
        return f"tensor({str(value.dtype).removeprefix('torch.')}, {value.device.type}, shape {tuple(value.shape)})"
    if isinstance(value, TensorValue):
        return f"tensor({value.values.dtype}, {value.device}, shape {value.values.shape})"
    if isinstance(value, np.ndarray):
        return f"ndarray({value.dtype}, shape {value.shape})"
    return f"{value!r} ({type(value).__name__})"


def diff_value(
    name: str,
    expected: Any,
    actual: Any,
    *,
    region: str,
    versus: str,
    per_request: bool = False,
) -> list[Difference]:
    """Every difference between ``actual`` and what ``expected`` says it must be.

    ``expected``: a :class:`TensorValue` (a tensor of that dtype, device type, shape and values),
    a NumPy array (an array of that dtype, shape and values), or any other value (equal, and of
    the same type: ``True`` is not ``1``). ``per_request``: element ``i`` belongs to request ``i``.
    """

    def one(index: int | None, exp: object, act: object, what: str = "") -> Difference:
        where = f"{region} ({what})" if what else region
        request = index if per_request and index is not None else None
        return Difference(name, index, exp, act, request, where, versus)

    if isinstance(expected, TensorValue):
        if not is_tensor(actual):
            return [one(None, describe(expected), describe(actual), "type")]
        if actual.device.type != expected.device:
            return [one(None, expected.device, actual.device.type, "device")]
        return _diff_arrays(name, expected.values, actual.detach().cpu().numpy(), one)
    if isinstance(expected, np.ndarray):
        if not isinstance(actual, np.ndarray):
            return [one(None, describe(expected), describe(actual), "type")]
        return _diff_arrays(name, expected, actual, one)
    if type(actual) is not type(expected) or actual != expected:
        return [one(None, expected, actual)]
    return []


def _diff_arrays(name: str, expected: np.ndarray, actual: np.ndarray, one: Any) -> list[Difference]:
    if expected.dtype != actual.dtype:
        return [one(None, str(expected.dtype), str(actual.dtype), "dtype")]
    if expected.shape != actual.shape:
        return [one(None, expected.shape, actual.shape, "shape")]
    e, a = expected.reshape(-1), actual.reshape(-1)
    return [one(int(i), e[i].item(), a[i].item()) for i in np.flatnonzero(e != a).tolist()]


def field_names(obj: Any) -> list[str]:
    """The dataclass fields of ``obj`` (the ones ``dataclasses.replace`` carries over)."""
    return [f.name for f in dataclasses.fields(obj)]
