"""vLLM itself as the code under test: a release wheel (``--vllm-version X.Y.Z``, spec
``vllm-release:X.Y.Z``) or the installed package (``--vllm``, spec ``vllm``).

Either way the real modules are loaded from their files, without importing vLLM (see
:mod:`.vllm_shims`): each target's own (its ``Target.module``, today
``vllm/v1/spec_decode/utils.py`` for all of them), and every target whose module defines its name
is tested; the others are not (a note says which). A release's files are fetched once with pip
(:func:`.wheels.fetch_members`) and then used offline; nothing of vLLM's enters the repository.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..core.errors import UserError
from . import wheels
from .base import Implementations, Origin, Source
from .vllm_shims import (
    MODULE,
    PLATFORM_FILES,
    REAL_FILES,
    RUNNER_V2_MODULES,
    LoadFailed,
    load_module,
)

PINNED_RELEASE = "0.33.0"
"""The release the test suite checks (``tox -e vllm`` installs it)."""

_LOADED: dict[tuple[str, str, str], tuple[ModuleType, tuple[str, ...]]] = {}


def target_modules() -> list[str]:
    """The vLLM modules the targets live in (their ``Target.module``), :data:`MODULE` first."""
    from ..targets import TARGETS  # here: the supervising process imports sources, not the targets

    return list(dict.fromkeys([MODULE, *(t.module for t in TARGETS.values())]))


def members() -> tuple[str, ...]:
    """What is taken out of a release wheel (a few hundred kB): the targets' modules, Model
    Runner V2's, and the files they run with; the wheel itself is not kept."""
    return tuple(dict.fromkeys((*target_modules(), *RUNNER_V2_MODULES, *REAL_FILES, *PLATFORM_FILES)))


def _check_version(version: str, flag: str = "--vllm-version") -> str:
    return wheels.check_release_version(flag, version, PINNED_RELEASE)


def release_files(version: str) -> Path:
    """The folder holding :func:`members` of vLLM ``version``'s wheel (fetched on first use)."""
    return wheels.fetch_members("vllm", _check_version(version), members())


def release_module_file(version: str, module: str = MODULE) -> Path:
    """vLLM ``version``'s ``module`` (``vllm/v1/spec_decode/utils.py`` by default; fetched on
    first use)."""
    path = release_files(version) / module
    if not path.is_file():
        raise UserError(f"vLLM {version}: its wheel has no {module}")
    return path


def _load(root: Path, tag: str, what: str, module: str = MODULE) -> tuple[ModuleType, tuple[str, ...]]:
    key = (str(root), tag, module)
    if key not in _LOADED:
        # A module of its own namespace: another target module's imports (the rejection sampler
        # imports vllm.v1.spec_decode.utils, a placeholder there) must not replace this one's.
        own = tag if module == MODULE else tag + "_" + re.sub(r"\W", "_", module[:-3])
        try:
            loaded, notes = load_module(root, own, module)
        except LoadFailed as exc:
            raise UserError(f"{what}: cannot load {module}: {exc}") from None
        _LOADED[key] = (loaded, tuple(notes))
    return _LOADED[key]


@dataclass(frozen=True)
class _Loaded:
    """The target modules loaded from one vLLM, by path; the loads' notes; and, for a target
    module other than the spec-decode one that could not be loaded, the one-line reason."""

    modules: dict[str, ModuleType]
    notes: tuple[str, ...]
    failed: dict[str, str]
    root: Path


def _load_modules(root: Path, tag: str, what: str, names: list[str] | None) -> _Loaded:
    """The modules of the targets ``names`` (every target's: ``None``) under ``root``. A target
    module the vLLM lacks is passed over (its targets are not defined there: vLLM 0.34.0 has no
    ``vllm/v1/spec_decode/utils.py`` left, Model Runner V2's modules before 0.12 are not there);
    one that cannot be loaded gives its targets a verdict, not the whole run, except the
    spec-decode module, which must load where it is. A vLLM with none of the target modules is
    no vLLM eaglefuzz knows (one line)."""
    from ..targets import TARGETS

    present = [m for m in target_modules() if (root / m).is_file()]
    if not present:
        raise UserError(f"{what}: has none of the modules eaglefuzz tests ({', '.join(target_modules())})")
    wanted = {TARGETS[n].module for n in (TARGETS if names is None else names)}
    modules: dict[str, ModuleType] = {}
    notes: list[str] = []
    failed: dict[str, str] = {}
    for module in present:
        if module not in wanted and module != MODULE:
            continue
        try:
            loaded, more = _load(root, tag, what, module)
        except UserError as exc:
            if module == MODULE:
                raise
            failed[module] = str(exc)
            continue
        modules[module] = loaded
        notes += [n for n in more if n not in notes]
    return _Loaded(modules, tuple(notes), failed, root)


def _defines(path: Path, name: str) -> bool:
    """Whether the module file ``path`` defines ``name`` at top level (parsed, not run; a file
    that does not parse is taken to define it)."""
    try:
        return any(d.name == name for d in module_definitions(path))
    except (SyntaxError, ValueError, OSError):
        return True


def _implementations(source: Source, loaded: _Loaded, names: list[str] | None) -> Implementations:
    from ..targets import TARGETS

    wanted = list(TARGETS) if names is None else names
    funcs = {}
    untested: dict[str, str] = {}
    for n in wanted:
        home, function = TARGETS[n].module, TARGETS[n].function
        module = loaded.modules.get(home)
        if module is not None and function in vars(module):
            funcs[n] = getattr(module, function)
        elif home in loaded.failed and _defines(loaded.root / home, function):
            untested[n] = f"{loaded.failed[home]}: {n} not tested"
    origin = {n: source.origin(n) for n in funcs}
    notes = list(loaded.notes)
    if names is None:
        absent = [n for n in TARGETS if n not in funcs and n not in untested]
        if absent:
            notes.append(f"{source.describe()} does not define {', '.join(absent)}: not tested")
    return Implementations(funcs, origin, source, tuple(notes), untested)


class VllmReleaseSource(Source):
    """A vLLM release's module, from its wheel on the package index; production code."""

    kind = "vllm-release"
    production = True

    def __init__(self, version: str) -> None:
        self.version = _check_version(version)

    @property
    def spec(self) -> str:
        return f"vllm-release:{self.version}"

    def describe(self) -> str:
        return f"vLLM {self.version} release wheel"

    def cli_args(self) -> list[str]:
        return ["--vllm-version", self.version]

    def origin(self, name: str) -> Origin:
        from ..targets import TARGETS

        return Origin(f"vLLM {self.version} release wheel", TARGETS[name].module, TARGETS[name].function, self.spec)

    def module_file(self) -> Path:
        """The release's first target module: the spec-decode module where it has one."""
        return self.module_files()[0]

    def module_files(self) -> list[Path]:
        """The targets' modules that this release has (the spec-decode module first)."""
        root = release_files(self.version)
        present = [root / m for m in target_modules() if (root / m).is_file()]
        if not present:
            raise UserError(f"vLLM {self.version}: its wheel has none of the modules eaglefuzz tests "
                            f"({', '.join(target_modules())})")
        return present

    def load(self, names: list[str] | None = None) -> Implementations:
        loaded = _load_modules(release_files(self.version), "r" + re.sub(r"\W", "_", self.version),
                               f"vLLM {self.version}", names)
        return _implementations(self, loaded, names)


@dataclass(frozen=True)
class Installed:
    """Where the installed vLLM's module is, and its version."""

    version: str
    module_file: Path


def find_installed() -> Installed:
    """The installed ``vllm`` distribution's module file, found without importing vLLM.

    Raises :class:`UserError` (one line) when vLLM is not installed or lacks the module.
    """
    try:
        dist = importlib.metadata.distribution("vllm")
    except importlib.metadata.PackageNotFoundError:
        raise UserError("--vllm: vLLM is not installed in this Python (pip install vllm, or "
                        f"test a release wheel with --vllm-version {PINNED_RELEASE})") from None
    version = dist.version
    path = Path(str(dist.locate_file(MODULE)))
    if not path.is_file():
        spec = importlib.util.find_spec("vllm")  # the top-level package: vLLM is not imported
        for folder in (spec.submodule_search_locations or []) if spec else []:
            candidate = Path(folder) / MODULE.removeprefix("vllm/")
            if candidate.is_file():
                path = candidate
                break
    if not path.is_file():
        raise UserError(f"--vllm: the installed vLLM {version} has no {MODULE}")
    return Installed(version, path.resolve())


class InstalledVllmSource(Source):
    """The module of the vLLM installed in this Python (a release, or a user's own build:
    findings go to a findings folder, not ``corpus/``)."""

    kind = "vllm"
    production = False

    def __init__(self) -> None:
        self._found: Installed | None = None

    @property
    def found(self) -> Installed:
        if self._found is None:
            self._found = find_installed()
        return self._found

    @property
    def spec(self) -> str:
        return "vllm"

    def describe(self) -> str:
        return f"installed vLLM {self.found.version} ({self.found.module_file})"

    def cli_args(self) -> list[str]:
        return ["--vllm"]

    def origin(self, name: str) -> Origin:
        from ..targets import TARGETS

        path = self.found.module_file.parents[3] / TARGETS[name].module
        return Origin(f"installed vLLM {self.found.version}", str(path), TARGETS[name].function, self.spec)

    def module_file(self) -> Path:
        return self.found.module_file

    def module_files(self) -> list[Path]:
        """The targets' modules that the installed vLLM has (the spec-decode module first)."""
        root = self.found.module_file.parents[3]
        return [root / m for m in target_modules() if (root / m).is_file()]

    def load(self, names: list[str] | None = None) -> Implementations:
        path = self.found.module_file
        tag = "i" + hashlib.sha256(f"{path}:{self.found.version}".encode()).hexdigest()[:10]
        loaded = _load_modules(path.parents[3], tag, f"installed vLLM {self.found.version}", names)
        return _implementations(self, loaded, names)


def release_from_spec(argument: str | None) -> VllmReleaseSource:
    if not argument:
        raise UserError(f"source vllm-release: needs a version (vllm-release:{PINNED_RELEASE})")
    return VllmReleaseSource(argument)


def installed_from_spec(argument: str | None) -> InstalledVllmSource:
    if argument:
        raise UserError(f"source vllm takes no argument (got {argument!r}); for a release use "
                        f"vllm-release:{argument}")
    return InstalledVllmSource()


@dataclass(frozen=True)
class Definition:
    """A function the module defines at top level."""

    name: str
    kind: str
    """``triton kernel``, ``kernel dispatcher`` (vLLM's ``triton_kernel_dispatcher_with_warmup``),
    ``compiled function`` (``torch.compile``) or ``python function``."""
    line: int

    @property
    def private(self) -> bool:
        return self.name.startswith("_")


def _kind(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    names = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
    if any(n.endswith("jit") for n in names):
        return "triton kernel"
    if any("dispatcher" in n for n in names):
        return "kernel dispatcher"
    if any(n.endswith("compile") for n in names):
        return "compiled function"
    return "python function"


def module_definitions(path: Path) -> list[Definition]:
    """Every top-level function of the module file ``path`` (Triton kernels included), in file
    order; parsed, not run."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [Definition(n.name, _kind(n), n.lineno) for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
