"""Load vLLM's own ``vllm/v1/spec_decode/utils.py`` without importing vLLM.

The module imports vLLM internals that need vLLM's dependencies (and, for some, a GPU). It is
loaded here from its real file, under a private package name (``_eaglefuzz_vllm_<tag>``, so a
real installed ``vllm`` is never shadowed), with an ``__import__`` of its own: every
``import vllm.X`` the file (or a file loaded with it) makes is answered from a namespace
private to that load. Nothing is put in ``sys.modules`` under the name ``vllm``.

In that namespace:

- :data:`REAL_FILES`: files taken from the same vLLM (wheel or installed package) and run as
  they are: the module under test, ``vllm/envs.py`` and, since 0.30, the warmup machinery
  (``jit_warmup.py``, ``jit_warmup_triton_helper.py``) whose
  ``triton_kernel_dispatcher_with_warmup`` wraps the kernels' launchers;
- the stand-ins below (:data:`SHIMS`), each a few lines, for what cannot be imported here.
  They are not vLLM code: they give the names the files import, with the values vLLM's own
  modules would give on this machine;
- any other ``vllm.*`` name: a placeholder that fails, naming itself, when used for anything but
  an annotation (said in the load's notes).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import functools
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from ...kernels import vllm_types
from ...kernels.vllm_types import CommonAttentionMetadata

MODULE = "vllm/v1/spec_decode/utils.py"
"""The module under test, as a path inside a wheel or a site-packages folder."""

REAL_FILES = (
    "vllm/envs.py",
    "vllm/model_executor/warmup/jit_warmup.py",
    "vllm/model_executor/warmup/jit_warmup_triton_helper.py",
    "vllm/v1/worker/gpu/buffer_utils.py",
    "vllm/v1/worker/gpu/sample/gumbel.py",
    "vllm/v1/worker/gpu/sample/watermark.py",
    "vllm/v1/watermarking/prfs/philox.py",
    "vllm/v1/watermarking/prfs/base.py",
    "vllm/v1/spec_decode/fly.py",
)
"""vLLM files run as they are when the module (or one of them) imports them. Model Runner V2's
``buffer_utils.py`` holds ``_load_ptr``, the ``@triton.jit`` helper its block-table kernels call
(a pointer read from a table of data pointers): vLLM's own, never a stand-in. Its verification
(``spec_decode/rejection_sampler_utils.py``) calls ``@triton.jit`` helpers of ``sample/gumbel.py``
(the murmur3 noise, ``gumbel_block_argmax``, ``tl_rand32``, ``spec_step_seed``) and of
``sample/watermark.py`` (``philox_gumbel_block_argmax``, with the constants of
``watermarking/prfs/philox.py``), and imports ``compute_fly_entropy`` from
``v1/spec_decode/fly.py``: vLLM's own too, so that a compiled kernel resolves every function it
names. A release without one of them gets a placeholder, as for any other name."""

RUNNER_V2_MODULES = (
    "vllm/v1/worker/gpu/input_batch.py",
    "vllm/v1/worker/gpu/block_table.py",
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py",
    "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py",
    "vllm/v1/worker/gpu/sample/gumbel.py",
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py",
)
"""Model Runner V2's modules whose Triton kernels eaglefuzz tests (docs/CONTRACT.md §14-§27: the
step's input and bookkeeping kernels; §28-§35: its verification, ``sample/gumbel.py`` and
``spec_decode/rejection_sampler_utils.py``), taken out of a release wheel with the V1 modules."""

PLATFORM_FILES = ("vllm/platforms/interface.py", "vllm/platforms/cpu.py", "vllm/platforms/cuda.py")
"""Read (not run) for the platform's ``simple_compile_backend``."""

_real_import = builtins.__import__


class Unavailable:
    """A ``vllm.*`` name eaglefuzz has no stand-in for: fine in an annotation, an error if used."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise ImportError(f"{self._name} is not available to eaglefuzz (no stand-in for it)")

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Unavailable(f"{self._name}.{attr}")

    def __repr__(self) -> str:
        return f"<unavailable {self._name}>"

    # An annotation evaluated when its function is defined (a module without ``from __future__
    # import annotations``, vLLM 0.14-0.19's rejection sampler): ``X | None``, ``X[int]``.
    def __or__(self, other: Any) -> Unavailable:
        return Unavailable(f"{self._name} | {other!r}")

    def __ror__(self, other: Any) -> Unavailable:
        return Unavailable(f"{other!r} | {self._name}")

    def __getitem__(self, item: Any) -> Unavailable:
        return Unavailable(f"{self._name}[{item!r}]")

    # A class derived from a placeholder (Model Runner V2's ``class
    # TargetDependentARSpeculator(DraftModelSpeculator)``): defined, but never instantiated.
    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (_placeholder_base(self._name),)


def _placeholder_base(name: str) -> type:
    """A base class standing for the placeholder ``name``: a subclass can be defined (its module
    loads) but not instantiated."""

    def refuse(cls: type, *args: Any, **kwargs: Any) -> Any:
        raise ImportError(f"{name} is not available to eaglefuzz (no stand-in for it): "
                          f"{cls.__name__} derives from it")

    return type(f"Unavailable[{name}]", (), {"__new__": refuse, "__module__": __name__})


def _placeholders(module: str) -> Callable[[str], Unavailable]:
    """A module ``__getattr__`` handing out :class:`Unavailable` names (not dunders: tools that
    scan ``sys.modules`` read ``__file__`` and the like)."""

    def get(attr: str) -> Unavailable:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Unavailable(f"{module}.{attr}")

    return get


class _Platform:
    """Stand-in for ``vllm.platforms.current_platform``: the CPU platform under the Triton
    interpreter, else CUDA; ``simple_compile_backend`` as that vLLM's platform classes give it
    (``"inductor"`` in every release so far)."""

    def __init__(self, device_type: str, simple_compile_backend: str) -> None:
        self.device_type = self.device_name = self.dispatch_key = device_type
        self.simple_compile_backend = simple_compile_backend

    def is_cuda(self) -> bool:
        return self.device_type == "cuda"

    def is_cuda_alike(self) -> bool:
        return self.device_type == "cuda"

    def is_cpu(self) -> bool:
        return self.device_type == "cpu"

    def is_rocm(self) -> bool:
        return False

    def is_xpu(self) -> bool:
        return False

    def get_compile_backend(self) -> str:
        return self.simple_compile_backend

    def __repr__(self) -> str:
        return f"<eaglefuzz stand-in for vLLM's {self.device_type} platform>"


def platform_compile_backend(root: Path, device_type: str) -> str:
    """``simple_compile_backend`` of vLLM's platform class for ``device_type`` (its override in
    ``platforms/<cpu|cuda>.py``, else the default of ``platforms/interface.py``), read from
    the files under ``root``; ``"inductor"`` when they are not there."""
    for rel in (f"vllm/platforms/{device_type}.py", "vllm/platforms/interface.py"):
        try:
            tree = ast.parse((root / rel).read_text())
        except (OSError, SyntaxError, ValueError):
            continue
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for node in cls.body:
                target = node.target if isinstance(node, ast.AnnAssign) else (
                    node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
                value = getattr(node, "value", None)
                if (isinstance(target, ast.Name) and target.id == "simple_compile_backend"
                        and isinstance(value, ast.Constant) and isinstance(value.value, str)):
                    return value.value
    return "inductor"


def _device_type() -> str:
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# -- the stand-ins: vLLM name -> a function filling the module ------------------------------


def _triton_utils(m: ModuleType, load: VllmLoad) -> None:
    import triton
    import triton.language as tl

    m.triton, m.tl, m.HAS_TRITON = triton, tl, True
    m.LOG2E, m.LOGE2 = 1.4426950408889634, 0.6931471805599453
    try:
        import triton.language.extra.libdevice as tldevice

        m.tldevice = tldevice
        if os.environ.get("TRITON_INTERPRET") == "1":
            from .interpreter_compat import libdevice_for_interpreter

            m.tldevice = libdevice_for_interpreter()  # libdevice has no bodies to interpret
    except ImportError:
        pass


def _platforms(m: ModuleType, load: VllmLoad) -> None:
    device = _device_type()
    m.current_platform = _Platform(device, platform_compile_backend(load.root, device))


def _attention_metadata(m: ModuleType, load: VllmLoad) -> None:

    m.CommonAttentionMetadata = CommonAttentionMetadata
    m.PAD_SLOT_ID = -1  # vllm/v1/attention/backends/utils.py: the slot of a token that writes no KV


def _math_utils(m: ModuleType, load: VllmLoad) -> None:
    m.cdiv = lambda a, b: -(a // -b)  # ceiling division of ints, as vLLM's
    m.next_power_of_2 = lambda n: 1 if n < 1 else 1 << (n - 1).bit_length()
    m.round_up = lambda x, y: ((x + y - 1) // y) * y


def _config(m: ModuleType, load: VllmLoad) -> None:

    for name in vllm_types.__all__:
        setattr(m, name, getattr(vllm_types, name))
    # vLLM's config ``replace`` is ``dataclasses.replace`` made to work with pydantic
    # dataclasses; the stand-ins are plain dataclasses.
    m.replace = dataclasses.replace


def _sampling_params(m: ModuleType, load: VllmLoad) -> None:
    class SamplingParams:
        """Stand-in: named only in an annotation of a function that is not a target."""

    m.SamplingParams = SamplingParams


def _distributed(m: ModuleType, load: VllmLoad) -> None:
    m.is_global_first_rank = lambda: True  # one process


def _logger(m: ModuleType, load: VllmLoad) -> None:
    m.init_logger = logging.getLogger


class _Envs(ModuleType):
    """Stand-in for ``vllm.envs`` when the release's own file does not run here: every
    variable unset (vLLM's default), a thread count of one for warmup compilation."""

    VLLM_TRITON_JIT_WARMUP_NUM_THREADS = 1

    def __getattr__(self, name: str) -> Any:
        if name.startswith("VLLM_"):
            return None
        raise AttributeError(name)


SHIMS: dict[str, Callable[[ModuleType, VllmLoad], None]] = {
    "vllm.triton_utils": _triton_utils,
    "vllm.platforms": _platforms,
    "vllm.v1.attention.backends.utils": _attention_metadata,
    "vllm.v1.attention.backend": _attention_metadata,
    "vllm.config": _config,
    "vllm.sampling_params": _sampling_params,
    "vllm.distributed": _distributed,
    "vllm.logger": _logger,
    "vllm.utils.math_utils": _math_utils,
}
"""What the loaded files import from vLLM that cannot be imported here, and its stand-in."""


class LoadFailed(Exception):
    """vLLM's module (or a file it imports) raised while loading; the message says where."""


class VllmLoad:
    """One load of vLLM's module from ``root`` (a folder holding ``vllm/...``): its private
    namespace, the modules made so far, and notes (placeholders handed out)."""

    def __init__(self, root: Path, tag: str, module: str = MODULE) -> None:
        self.root = root
        self.prefix = f"_eaglefuzz_vllm_{tag}"
        self.modules: dict[str, ModuleType] = {}
        self.notes: list[str] = []
        self.placeholders: list[str] = []
        """The ``vllm.*`` modules without a stand-in whose names were handed out as placeholders."""
        self.builtins = dict(builtins.__dict__, __import__=self.import_)
        self._files = {f[:-3].replace("/", "."): f for f in REAL_FILES}
        known = [*SHIMS, *self._files, module[:-3].replace("/", ".")]
        self._packages = {n.rsplit(".", i)[0] for n in known for i in range(1, n.count(".") + 1)}

    def _known(self, name: str) -> bool:
        return name in SHIMS or name in self._files or name in self._packages

    def private(self, name: str) -> str:
        """The private module name of vLLM module ``name``."""
        return self.prefix + name[len("vllm"):]

    def import_(self, name: str, globals: dict[str, Any] | None = None, locals: Any = None,
                fromlist: Any = (), level: int = 0) -> Any:
        """``__import__`` of the loaded files: ``vllm`` names from this load, the rest as usual."""
        if level:
            package = (globals or {}).get("__package__") or ""
            if not (package == self.prefix or package.startswith(self.prefix + ".")):
                return _real_import(name, globals, locals, fromlist, level)
            base = ("vllm" + package[len(self.prefix):]).rsplit(".", level - 1)[0]
            name, level = (f"{base}.{name}" if name else base), 0
        if name != "vllm" and not name.startswith("vllm."):
            return _real_import(name, globals, locals, fromlist, level)
        module = self.module(name)
        if not fromlist:
            return self.module("vllm")
        for item in fromlist:
            if item != "*" and item not in module.__dict__ and self._known(f"{name}.{item}"):
                self.module(f"{name}.{item}")  # ``from vllm import envs``: a submodule
        return module

    def module(self, name: str) -> ModuleType:
        """vLLM module ``name`` in this load (made on first use)."""
        if name in self.modules:
            return self.modules[name]
        parent, _, leaf = name.rpartition(".")
        if parent:
            self.module(parent)
        if name in self.modules:  # made while making its parent
            return self.modules[name]
        module = self._make(name)
        self.modules[name] = module
        if parent:
            setattr(self.modules[parent], leaf, module)
        return module

    def _make(self, name: str) -> ModuleType:
        rel = self._files.get(name, "")
        if rel and (self.root / rel).is_file():
            try:
                return self.run_file(name, self.root / rel)
            except LoadFailed:
                if name != "vllm.envs":
                    raise
                self.notes.append(f"{rel} of this vLLM does not run here: its variables are taken as unset")
                return self._register(name, _Envs(self.private(name)))
        if name == "vllm.envs":
            return self._register(name, _Envs(self.private(name)))
        m = ModuleType(self.private(name))
        if name in SHIMS:
            m.__doc__ = f"eaglefuzz's stand-in for {name} (see eaglefuzz.harness.sources.vllm_shims)"
            SHIMS[name](m, self)
        elif name in self._packages or name == "vllm":
            m.__path__ = []  # a package, so that its submodules can be imported
            m.__getattr__ = _placeholders(name)  # type: ignore[attr-defined] # ``from vllm.utils import random_uuid``
        else:
            self.placeholders.append(name)
            m.__getattr__ = _placeholders(name)  # type: ignore[attr-defined]
        m.__package__ = m.__name__ if hasattr(m, "__path__") else m.__name__.rpartition(".")[0]
        return self._register(name, m)

    def _register(self, name: str, m: ModuleType) -> ModuleType:
        # Registered under the private name: dataclasses and typing look modules up there.
        sys.modules[self.private(name)] = m
        return m

    def run_file(self, name: str, path: Path) -> ModuleType:
        """Run vLLM file ``path`` as module ``name`` of this load (its imports redirected)."""
        private = self.private(name)
        spec = importlib.util.spec_from_file_location(private, path)
        assert spec is not None and spec.loader is not None
        m = importlib.util.module_from_spec(spec)
        m.__builtins__ = self.builtins  # type: ignore[attr-defined]
        self.modules[name] = m
        sys.modules[private] = m
        try:
            spec.loader.exec_module(m)
        except Exception as exc:
            del self.modules[name]
            sys.modules.pop(private, None)
            if isinstance(exc, LoadFailed):
                raise
            where = _innermost_line(exc, path)
            raise LoadFailed(f"{where}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from exc
        return m


def _innermost_line(exc: BaseException, path: Path) -> str:
    """``file:line`` of the deepest frame of ``exc`` inside a vLLM file (``path`` if none)."""
    where = str(path)
    tb = exc.__traceback__
    while tb is not None:
        f = tb.tb_frame.f_code.co_filename
        if "/vllm/" in f:
            where = f"{f}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


class LazyCompiled:
    """``torch.compile(fn, **options)`` compiled on its first call. Loading a vLLM module that
    decorates a function with ``torch.compile`` then costs nothing (importing TorchDynamo and
    Inductor takes seconds) unless that function runs. ``_torchdynamo_orig_callable`` is the
    undecorated function, as on what ``torch.compile`` returns."""

    def __init__(self, fn: Any, options: dict[str, Any]) -> None:
        functools.update_wrapper(self, fn)
        self._torchdynamo_orig_callable = fn
        self._options = options
        self._compiled: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._compiled is None:
            import torch

            self._compiled = torch.compile(self._torchdynamo_orig_callable, **self._options)
        return self._compiled(*args, **kwargs)


@contextlib.contextmanager
def _lazy_torch_compile() -> Iterator[None]:
    """``torch.compile`` returns :class:`LazyCompiled` objects while the body runs."""
    import torch

    real = torch.compile

    def lazy(model: Any = None, **options: Any) -> Any:
        return (lambda fn: LazyCompiled(fn, options)) if model is None else LazyCompiled(model, options)

    torch.compile = lazy
    try:
        yield
    finally:
        torch.compile = real


def load_module(root: Path, tag: str, module: str = MODULE) -> tuple[ModuleType, list[str]]:
    """vLLM's ``module`` under ``root`` (a path such as ``vllm/v1/spec_decode/utils.py``: a
    target's ``Target.module``), loaded as described above; and the load's notes. Raises
    :class:`LoadFailed` (one line) when a file raises."""
    load = VllmLoad(root, tag, module)
    name = module[:-3].replace("/", ".")
    parent = name.rpartition(".")[0]
    load.module(parent)
    with _lazy_torch_compile():
        loaded = load.run_file(name, root / module)
    setattr(load.modules[parent], name.rpartition(".")[2], loaded)
    if load.placeholders:  # one line per load: a module importing many (the rejection sampler's) says so once
        leaves = [p for p in load.placeholders if not any(q.startswith(p + ".") for q in load.placeholders)]
        load.notes.append(f"{module}: {', '.join(leaves)} {'has' if len(leaves) == 1 else 'have'} no stand-in in "
                          f"eaglefuzz: {'its' if len(leaves) == 1 else 'their'} names are placeholders")
    return loaded, load.notes
