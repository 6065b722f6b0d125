"""Adapters: fuzz an implementation that is not a Triton kernel with one small file.

The harness launches every kernel target the way vLLM does: ``kernel[grid](*args,
**constexprs)`` with the Triton kernel's arguments in its order (``harness/targets/*.py``'s
``parameters``). Anything indexable that way is a kernel to eaglefuzz, so a port only has to
look like one. :func:`grid_kernel` makes a plain function look like one::

    # my_port.py -- run with: eaglefuzz fuzz --kernels my_port.py [--domain extended]
    from eaglefuzz.harness.adapters import grid_kernel

    @grid_kernel(ignores=("BLOCK_SIZE_TOKENS",))
    def eagle_prepare_next_token_padded_kernel(sampled_token_ids, discard_request_mask, ...):
        ...  # write the outputs in place, as the kernel does

The function is named like the kernel (or ``name=`` says which), takes the kernel's
parameters by name (with or without the ``_ptr`` suffix), writes the output tensors in place
and returns nothing. Parameters it does not need (a tile size, a stride it reads from the
tensor itself) are listed in ``ignores``; any other missing or unknown parameter is an error
when the file loads, so a port cannot silently drop an argument. A parameter named ``grid``
receives the launch grid (a port that honours padded or partial grids needs it; most do not).
``numpy=True`` hands the function NumPy arrays instead of tensors (views of the same memory on
the CPU; on a GPU, host copies that are copied back after the call). ``variant=`` declares one of
the target's older interfaces instead of its own (a target's ``variants``: for example
``eagle_prepare_inputs_padded_kernel``'s ``"without num_rejected_tokens"``): the function then
takes that interface's parameters, and the harness launches it, compares it and names it in its
reports as that variant (the outputs the variant lacks are neither given nor compared).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..targets import TARGETS

GRID = "grid"


class GridKernel:
    """``kernel[grid](*args, **constexprs)`` -> ``fn(**named)``: a plain function launched like
    a Triton kernel. ``parameters`` are the Triton kernel's (the interface check reads them)."""

    def __init__(self, fn: Callable[..., Any], name: str, parameters: Sequence[str], binding: dict[str, str],
                 wants_grid: bool, numpy: bool) -> None:
        self.fn = fn
        self.__name__ = name
        self.__wrapped__ = fn
        self.parameters = tuple(parameters)
        self._binding = binding  # kernel parameter -> the function's name for it (ignored: absent)
        self._wants_grid = wants_grid
        self._numpy = numpy

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def launch(*args: Any, **kwargs: Any) -> None:
            self._launch(grid, args, kwargs)

        return launch

    def _launch(self, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if len(args) > len(self.parameters):
            raise TypeError(f"{self.__name__}: {len(args)} arguments, the kernel takes {len(self.parameters)}")
        values = dict(zip(self.parameters, args, strict=False))
        for k, v in kwargs.items():
            if k not in self.parameters:
                raise TypeError(f"{self.__name__}: unknown argument {k}")
            if k in values:
                raise TypeError(f"{self.__name__}: {k} given twice")
            values[k] = v
        missing = [p for p in self.parameters if p not in values]
        if missing:
            raise TypeError(f"{self.__name__}: missing arguments {', '.join(missing)}")
        call = {ours: values[p] for p, ours in self._binding.items()}
        if self._wants_grid:
            call[GRID] = tuple(grid) if isinstance(grid, tuple | list) else (grid,)
        if not self._numpy:
            self.fn(**call)
            return
        self._call_numpy(call)

    def _call_numpy(self, call: dict[str, Any]) -> None:
        import torch

        host: dict[str, Any] = {}
        back: list[tuple[torch.Tensor, torch.Tensor]] = []
        for k, v in call.items():
            if isinstance(v, torch.Tensor):
                if v.device.type == "cpu":
                    host[k] = v.numpy()
                else:
                    h = v.cpu()
                    back.append((v, h))
                    host[k] = h.numpy()
            else:
                host[k] = v
        self.fn(**host)
        for dev, h in back:
            dev.copy_(h)

    def __repr__(self) -> str:
        return f"<grid_kernel {self.__name__} -> {getattr(self.fn, '__qualname__', self.fn)}>"


def grid_kernel(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    ignores: Sequence[str] = (),
    numpy: bool = False,
    variant: str | None = None,
) -> Any:
    """A plain function as a kernel target's implementation (see the module's docstring).

    Usable as ``@grid_kernel``, ``@grid_kernel(...)`` or ``grid_kernel(fn, name=...)``.
    ``name``: the kernel target (default: the function's name); ``ignores``: kernel
    parameters the function does not take; ``numpy``: pass NumPy arrays; ``variant``: the
    name of one of the target's ``variants``, whose parameters the function takes instead of
    the target's own. Raises ``TypeError`` naming every parameter that does not line up (and a
    variant the target has not).
    """
    if fn is None:
        return lambda f: grid_kernel(f, name=name, ignores=ignores, numpy=numpy, variant=variant)

    target = name or fn.__name__
    if target not in TARGETS or TARGETS[target].kind != "triton kernel" or TARGETS[target].parameters is None:
        kernels = [n for n, t in TARGETS.items() if t.kind == "triton kernel"]
        raise TypeError(f"grid_kernel({fn.__name__}): {target!r} is not a kernel target (name= one of {', '.join(kernels)})")
    if variant is None:
        params = tuple(TARGETS[target].parameters or ())
    elif variant in TARGETS[target].variants:
        params = tuple(TARGETS[target].variants[variant].parameters)
    else:
        known = ", ".join(repr(v) for v in TARGETS[target].variants) or "none"
        raise TypeError(f"grid_kernel({fn.__name__}): {target} has no variant {variant!r} (its variants: {known})")
    ours = [p.name for p in inspect.signature(fn).parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    wants_grid = GRID in ours
    binding: dict[str, str] = {}
    problems = []
    for p in params:
        match = [q for q in ours if q in (p, p.removesuffix("_ptr"))]
        if p in ignores:
            if match:
                problems.append(f"{p} is both taken and ignored")
            continue
        if not match:
            problems.append(f"takes no {p} (nor {p.removesuffix('_ptr')}); list it in ignores= if it is not needed")
        else:
            binding[p] = match[0]
    unknown = [q for q in ours if q != GRID and q not in binding.values()]
    if unknown:
        problems.append(f"takes {', '.join(unknown)}, which {target} has not (its parameters: {', '.join(params)})")
    bad_ignores = [p for p in ignores if p not in params]
    if bad_ignores:
        problems.append(f"ignores {', '.join(bad_ignores)}, which {target} has not")
    if problems:
        raise TypeError(f"grid_kernel({fn.__name__}) for {target}: " + "; ".join(problems))
    return GridKernel(fn, target, params, binding, wants_grid, numpy)
