"""The bundled production copy: ``kernels/spec_decode_utils.py`` (the offline default)."""

from __future__ import annotations

import ast
from pathlib import Path

from .base import Implementations, Origin, Source

FILE = "kernels/spec_decode_utils.py"
PATH = Path(__file__).resolve().parents[2] / FILE
"""The bundled module's file (in a checkout and in an installed wheel alike)."""
DESCRIPTION = "bundled production copy"
MODULE = "vllm/v1/spec_decode/utils.py"
"""The vLLM module the bundled copy is a copy of: the targets of other modules are not in it."""


class BundledSource(Source):
    """vLLM's module as the project started from it (the five original targets)."""

    kind = "bundled"
    production = True

    @property
    def spec(self) -> str:
        return "bundled"

    def describe(self) -> str:
        return f"{DESCRIPTION} ({FILE})"

    def cli_args(self) -> list[str]:
        return []

    def origin(self, name: str) -> Origin:
        from ..targets import TARGETS

        return Origin(DESCRIPTION, FILE, TARGETS[name].function, self.spec)

    def defined(self) -> list[str]:
        """The targets the bundled copy defines, read from its file without importing it (no
        torch, no Triton: what ``eaglefuzz list`` needs)."""
        from ..targets import TARGETS

        tree = ast.parse(PATH.read_text(), filename=str(PATH))
        top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        return [n for n, t in TARGETS.items() if t.function in top and t.module == MODULE]

    def load(self, names: list[str] | None = None) -> Implementations:
        from ...kernels import spec_decode_utils
        from ..targets import TARGETS

        wanted = [n for n in (TARGETS if names is None else names) if TARGETS[n].module == MODULE]
        funcs = {n: getattr(spec_decode_utils, TARGETS[n].function) for n in wanted
                 if hasattr(spec_decode_utils, TARGETS[n].function)}
        origin = {n: self.origin(n) for n in funcs}
        return Implementations(funcs, origin, self)


def from_spec(argument: str | None) -> BundledSource:
    return BundledSource()
