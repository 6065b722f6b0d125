"""What a *source* is: where the code under test comes from, named in every report.

A source yields :class:`Implementations`: the targets it defines, each with an
:class:`Origin` (the file and function it was taken from). Sources are the bundled production
copy (``kernels/``), a user's file (``--kernels``), the installed vLLM, a vLLM release wheel,
vLLM's CPU C++ port, or an adapter; each kind lives in one module of this package and
registers itself in :data:`~eaglefuzz.harness.sources.KINDS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

PRODUCTION_KINDS = frozenset({"bundled", "vllm-release"})
"""The kinds of source that hold production code (:attr:`Source.production`)."""


@dataclass(frozen=True)
class Origin:
    """Where one target's implementation came from: ``source`` describes the source (e.g.
    "bundled production copy"), ``file`` the file read, ``function`` the name in it."""

    source: str
    file: str
    function: str
    spec: str = ""
    """The spec of the source it came from (for reproducers and replay commands); empty for an
    implementation that came from no source (one a test made up)."""
    variant: str | None = None
    """The target's older interface the function has (:attr:`Target.variants`), if any."""
    params: str = ""
    """The values its extra parameters are bound to (``a=1, b=True``; :mod:`.binding`), if any."""

    @property
    def production(self) -> bool:
        """Whether the implementation is production code (the bundled copy or a vLLM release),
        whose findings belong in the regression corpus."""
        spec = self.spec
        while spec.startswith("bound:"):  # a source with bound parameters: its inner source's
            spec = spec.partition(";")[2]
        return spec.partition(":")[0] in PRODUCTION_KINDS

    def describe(self) -> str:
        """One phrase for reports: ``file::function (source)``, and ``[variant: name]``."""
        variant = f" [variant: {self.variant}]" if self.variant else ""
        params = f" [with {self.params}]" if self.params else ""
        return f"{self.file}::{self.function} ({self.source}){variant}{params}"

    def __str__(self) -> str:
        return self.describe()


@dataclass(frozen=True)
class Implementations:
    """Target name -> implementation, each with its :class:`Origin`, from one ``source``.

    ``funcs`` holds only what was loaded; a target absent from it is not tested.
    """

    funcs: Mapping[str, Any]
    origin: Mapping[str, Origin]
    source: Source | None = None
    notes: tuple[str, ...] = field(default=())
    """Lines the run prints before anything runs (e.g. targets a file does not define)."""
    untested: Mapping[str, str] = field(default_factory=dict)
    """Targets the source defines that cannot be tested, each with its one-line verdict (an
    interface other than the contract's): not in ``funcs``; a run says each and exits 2."""

    def __getitem__(self, name: str) -> Any:
        return self.funcs[name]

    def __contains__(self, name: object) -> bool:
        return name in self.funcs

    def __iter__(self) -> Iterator[str]:
        return iter(self.funcs)

    def describe(self, name: str) -> str:
        return f"{name}: {self.origin[name].describe()}"


class Source(ABC):
    """One place the code under test comes from.

    ``spec`` is a canonical one-line text that :func:`~eaglefuzz.harness.sources.parse_source`
    turns back into an equal source (it travels to worker processes and into reproducers).
    ``production`` says whether findings about it belong in the regression corpus
    (``corpus/``) or in a findings folder outside the checkout.
    """

    kind: str
    production: bool = False
    device: str | None = None
    """The device the implementations need whatever the backend (a CPU port: ``cpu``)."""

    @property
    @abstractmethod
    def spec(self) -> str:
        """``kind`` or ``kind:argument``, e.g. ``bundled``, ``file:/abs/utils.py``."""

    @abstractmethod
    def describe(self) -> str:
        """One line naming the source (and its version) for reports."""

    @abstractmethod
    def load(self, names: list[str] | None = None) -> Implementations:
        """The implementations this source defines (``names``: only those, when given).

        Raises :class:`~eaglefuzz.harness.core.errors.UserError` (one line) when the source cannot
        be loaded. The interfaces are checked by :func:`~eaglefuzz.harness.sources.implementations_for`.
        """

    def origin(self, name: str) -> Origin:
        """Where target ``name`` comes from in this source (without running anything)."""
        return self.load([name]).origin[name]

    @abstractmethod
    def cli_args(self) -> list[str]:
        """The command-line options that select this source again (empty for the default)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Source) and other.spec == self.spec

    def __hash__(self) -> int:
        return hash(self.spec)

    def __repr__(self) -> str:
        return f"<source {self.spec}>"
