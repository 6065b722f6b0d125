"""Extra parameters of a fork's function, bound to values, so that it takes the contract's interface.

Forks add parameters to these functions (vLLM forks: context-parallel ranks on
``eagle_step_slot_mapping_metadata_kernel``, a ``SAMPLE_FROM_ANCHOR`` flag on
``copy_and_expand_dflash_inputs_kernel``, an ``update_num_accepted_tokens`` switch). When every
extra parameter has a value -- given with ``--param NAME=VALUE``, else its own default -- the
implementation is wrapped (:func:`bind`): the wrapper takes the contract's parameters, as the
harness launches it (positionally or by name), and calls the implementation with every
argument by name, the extra ones with their values. Reports name the values
(:attr:`~.base.Origin.params`).

The values travel with the source (:class:`BoundSource`, spec ``bound:NAME=VALUE,...;SPEC``), so
worker processes, reproducers and replay commands bind the same ones.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import keyword
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import UserError
from .base import Implementations, Origin, Source

KIND = "bound"

Value = bool | int | float | None


def parse_params(items: Sequence[str], what: str = "--param") -> dict[str, Value]:
    """``NAME=VALUE`` items as a mapping; VALUE a Python literal: an int, a float, True,
    False or None. Raises :class:`UserError` (one line) naming a malformed item."""
    out: dict[str, Value] = {}
    for item in items:
        name, eq, text = item.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier() or keyword.iskeyword(name):
            raise UserError(f"{what} {item}: expected NAME=VALUE, e.g. dcp_rank=0")
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            value = ...
        if value is ... or not (value is None or isinstance(value, bool | int | float)):
            raise UserError(f"{what} {item}: the value must be an int, a float, True, False or None")
        if name in out and out[name] != value:
            raise UserError(f"{what} {name}: given twice with different values")
        out[name] = value
    return out


def format_params(params: Mapping[str, Value]) -> str:
    """``a=1, b=True`` (the order given)."""
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def param_args(params: Mapping[str, Value]) -> list[str]:
    """The command-line options that bind ``params`` again."""
    return [a for k, v in params.items() for a in ("--param", f"{k}={v!r}")]


def _signature(impl: Any) -> inspect.Signature | None:
    fn = getattr(impl, "_torchdynamo_orig_callable", None) or getattr(impl, "fn", None) or impl
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def defaults_of(impl: Any) -> dict[str, Any]:
    """The parameters of ``impl`` that have defaults, with them (a Triton kernel's
    ``NAME: tl.constexpr = False`` included)."""
    sig = _signature(impl)
    if sig is None:
        return {}
    return {p.name: p.default for p in sig.parameters.values() if p.default is not p.empty}


def _named(name: str, contract: Sequence[str], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    if len(args) > len(contract):
        raise TypeError(f"{name}: {len(args)} arguments, the contract's interface has {len(contract)}")
    values = dict(zip(contract, args, strict=False))
    for k, v in kwargs.items():
        if k in values:
            raise TypeError(f"{name}: {k} given twice")
        values[k] = v
    return values


class BoundKernel:
    """``kernel[grid](contract's arguments)`` -> ``impl[grid](**every argument, **values)``."""

    def __init__(self, impl: Any, contract: Sequence[str], values: Mapping[str, Any]) -> None:
        self.impl = impl
        self.parameters = tuple(contract)
        self.values = dict(values)
        self.__name__ = getattr(impl, "__name__", "kernel")
        self.__wrapped__ = impl

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> Any:
            return self.impl[grid](**_named(self.__name__, self.parameters, args, kwargs), **self.values)

        return launch

    def __repr__(self) -> str:
        return f"<{self.__name__} with {format_params(self.values)}>"


class BoundFunction:
    """``fn(contract's arguments)`` -> ``impl(**every argument, **values)``; a function vLLM
    decorates with ``torch.compile`` keeps its undecorated form
    (``_torchdynamo_orig_callable``), bound alike."""

    def __init__(self, impl: Any, contract: Sequence[str], values: Mapping[str, Any]) -> None:
        self.impl = impl
        self.parameters = tuple(contract)
        self.values = dict(values)
        self.__name__ = getattr(impl, "__name__", "function")
        self.__wrapped__ = impl
        orig = getattr(impl, "_torchdynamo_orig_callable", None)
        if callable(orig):
            self._torchdynamo_orig_callable = BoundFunction(orig, contract, values)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.impl(**_named(self.__name__, self.parameters, args, kwargs), **self.values)

    def __repr__(self) -> str:
        return f"<{self.__name__} with {format_params(self.values)}>"


def bind(impl: Any, contract: Sequence[str], values: Mapping[str, Any], *, kernel: bool) -> Any:
    """``impl`` taking the contract's parameters ``contract``, its extra ones bound to
    ``values``: launched as ``impl[grid](...)`` when ``kernel``, else called."""
    return (BoundKernel if kernel else BoundFunction)(impl, contract, values)


@dataclass(frozen=True)
class Resolution:
    """What :func:`resolve` made of a function's extra parameters: ``impl`` bound to ``values``
    and a note saying so, or (``impl`` ``None``: some have no value) a hint saying how to bind them."""

    impl: Any
    values: dict[str, Any]
    said: str


def resolve(name: str, impl: Any, contract: Sequence[str], extra: Sequence[str], params: Mapping[str, Value],
            *, kernel: bool, path: Path | None) -> Resolution:
    """Bind target ``name``'s ``impl``, whose parameters are ``contract`` plus ``extra``, when
    every extra one has a value in ``params`` or a default of its own; else say how to run it,
    with the defaults of the file's other functions (``path``) where they have them."""
    defaults = defaults_of(impl)
    values = {p: params[p] if p in params else defaults[p] for p in extra if p in params or p in defaults}
    if len(values) == len(extra):
        own = {p: v for p, v in values.items() if p not in params}
        given = {p: v for p, v in values.items() if p in params}
        said = "; ".join(x for x in (f"its defaults {format_params(own)}" if own else "",
                                     f"--param {format_params(given)}" if given else "") if x)
        note = (f"{name}: extra parameters {', '.join(extra)} beyond the contract's, tested with {said}"
                + ("; --param NAME=VALUE tests another value" if own else ""))
        return Resolution(bind(impl, contract, values, kernel=kernel), values, note)
    lacking = [p for p in extra if p not in values]
    found, where = suggested_values(path, name, lacking)
    if len(found) == len(lacking):
        hint = f"to test it with the defaults of {where} in that file: " + " ".join(param_args(found))
    else:
        hint = ("to test it, bind them to the values that make it the contract's: "
                + " ".join(f"--param {p}=VALUE" for p in lacking))
    return Resolution(None, values, hint)


def suggested_values(path: Path | None, function: str, names: Sequence[str]) -> tuple[dict[str, Value], str]:
    """Values for the extra parameters ``names`` of ``function`` taken from the defaults of
    same-named parameters of the other functions in the file ``path`` (a fork's launcher that
    calls the kernel usually has them, e.g. ``dcp_world_size: int = 1``), those that call
    ``function`` first; and where they come from (``""`` when none)."""
    if path is None:
        return {}, ""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return {}, ""
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name != function]
    calls = [f for f in funcs if any(isinstance(x, ast.Name) and x.id == function for x in ast.walk(f))]
    found: dict[str, Value] = {}
    where: list[str] = []
    for f in calls + [f for f in funcs if f not in calls]:
        a = f.args
        positional = a.posonlyargs + a.args
        pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults, strict=True))
        pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
        took = False
        for arg, default in pairs:
            if arg.arg in names and arg.arg not in found:
                try:
                    value = ast.literal_eval(default)
                except ValueError:
                    continue
                if value is None or isinstance(value, bool | int | float):
                    found[arg.arg] = value
                    took = True
        if took:
            where.append(f"{f.name} (line {f.lineno})")
    return found, ", ".join(where)


class BoundSource(Source):
    """Another source whose implementations get ``params`` for their extra parameters."""

    kind = KIND

    def __init__(self, inner: Source, params: Mapping[str, Value]) -> None:
        self.inner = inner
        self.params = dict(params)
        self.production = inner.production
        self.device = inner.device

    def __getattr__(self, name: str) -> Any:  # what the inner source offers (its path, module file)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def spec(self) -> str:
        return f"{KIND}:{','.join(f'{k}={v!r}' for k, v in self.params.items())};{self.inner.spec}"

    def describe(self) -> str:
        return f"{self.inner.describe()}, with {format_params(self.params)}"

    def cli_args(self) -> list[str]:
        return [*self.inner.cli_args(), *param_args(self.params)]

    def origin(self, name: str) -> Origin:
        return dataclasses.replace(self.inner.origin(name), spec=self.spec)

    def load(self, names: list[str] | None = None) -> Implementations:
        impls = self.inner.load(names)
        origin = {n: dataclasses.replace(o, spec=self.spec) for n, o in impls.origin.items()}
        return Implementations(impls.funcs, origin, self, impls.notes, impls.untested)


def from_spec(argument: str | None, parse_source: Callable[[str], Source]) -> Source:
    """``NAME=VALUE,...;SPEC`` -> the source SPEC (made by ``parse_source``, the registry of
    source kinds) with those values."""
    text, sep, inner = (argument or "").partition(";")
    if not sep or not inner:
        raise UserError(f"source bound:{argument}: expected bound:NAME=VALUE,...;SPEC")
    return BoundSource(parse_source(inner), parse_params([p for p in text.split(",") if p], "source bound:"))
