"""The capability matrix of ``eaglefuzz list``: what each target has, read from its folder.

One row per target (in :data:`~..targets.TARGETS` order); every cell is computed from the
target's folder (its roles, :func:`~..targets.has_role`/:func:`~..targets.role`), its record and
its corpus folder ``corpus/<name>/``: nothing here names a target.

Columns (a count where the role has countable parts, 0 or ``-`` where the target lacks it):

=============== ==================================================================================
runner          the vLLM model runner whose code the target is: V1 or V2 (the record's ``runner``)
production      the production tier's generator (``cases.py``): the record's feature count
extended        the extended tier (``edges.py``): its edge count
tour            the tour of production extremes (``tour.py``): its shape count
audit           the audit's properties (``audit.py``): their count
device          device mode (``device.py``): yes / -
C++ port        the adapter of vLLM's CPU C++ port (``port.py``): yes / - / ``n/a`` where vLLM has no
                CPU op for the target's runner (Model Runner V2: ``CPU_PORT_RUNNERS``)
seeded bugs     the seeded bugs of ``bugs.py``
need extreme    of those, the ones that need a production extreme (``Mutant.extreme`` names
                which of the record's ``extremes``)
corpus cases    the regression corpus's files ``corpus/<name>/*.json``
=============== ==================================================================================

The *core* columns (:data:`CORE`) are the ones every target should have; ``device`` and
``port`` are shown but not core. A target whose record declares no ``extremes`` cannot have a
bug that needs one: its ``need extreme`` cell is ``n/a`` and no gap.
"""

from __future__ import annotations

import io
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from ..core.paths import CORPUS_DIR
from ..targetkit.base import CPU_PORT_RUNNERS
from ..targets import TARGETS, has_role, role

CORE = ("production", "extended", "tour", "audit", "bugs", "extreme_bugs", "corpus")
"""The columns every target should fill (a 0 or ``False`` there is a gap)."""

COLUMNS = ("runner", "production", "extended", "tour", "audit", "device", "port", "bugs", "extreme_bugs", "corpus")
"""Every column, in the order printed (the keys of :class:`Capabilities` and of ``--json``)."""

LEGEND = ("runner: vLLM's model runner (V1, or V2: vllm/v1/worker/gpu/); -: the target lacks it (no such file in its folder); "
          "C++ port n/a: vLLM has no CPU C++ op for it (vLLM's CPU backend replaces V1 kernels only; its V2 runner runs "
          "the Triton kernels through triton-cpu); numbers count the production tier's "
          "features, the extended tier's edges, the tour's shapes, the audit's properties, the seeded "
          "bugs and those of them that need a production extreme, the corpus's cases")

HEADINGS = {
    "runner": "runner", "production": "production", "extended": "extended", "tour": "tour", "audit": "audit",
    "device": "device", "port": "C++ port", "bugs": "seeded bugs", "extreme_bugs": "need extreme",
    "corpus": "corpus cases",
}


@dataclass(frozen=True)
class Capabilities:
    """One target's row: counts (0: the target lacks that role) and flags."""

    target: str
    runner: str
    """The vLLM model runner whose code the target is (``V1``, ``V2``: ``Target.runner``)."""
    production: int
    """Features of the production tier (0: no ``cases.py``)."""
    extended: int
    """Edges of the extended tier (0: no ``edges.py``)."""
    tour: int
    """Shapes of the tour of production extremes (0: no ``tour.py``)."""
    audit: int
    """Properties the audit checks (0: no ``audit.py``)."""
    device: bool
    port: bool
    port_applies: bool
    """Whether vLLM has a CPU C++ op for the target at all (its runner is one of
    ``CPU_PORT_RUNNERS``): without one, the port cell is ``n/a``, not a missing role."""
    bugs: int
    extreme_bugs: int
    """Seeded bugs that need a production extreme (``Mutant.extreme`` set)."""
    extremes: int
    """The production extremes the record declares (0: ``extreme_bugs`` is not applicable)."""
    corpus: int

    def gaps(self) -> list[str]:
        """The :data:`CORE` columns this target lacks, in :data:`CORE` order."""
        return [c for c in CORE if not getattr(self, c) and not (c == "extreme_bugs" and not self.extremes)]


def capabilities(name: str, corpus: Path = CORPUS_DIR) -> Capabilities:
    """Target ``name``'s row of the matrix (``corpus``: the regression corpus's folder)."""
    t = TARGETS[name]

    def found(r: str) -> Any:  # the folder's role module, or None: the registry's one lookup
        return role(name, r) if has_role(name, r) else None

    cases, edges, tour, audit, bugs = (found(r) for r in ("cases", "edges", "tour", "audit", "bugs"))
    bugs = bugs.BUGS if bugs is not None else ()
    folder = corpus / name
    return Capabilities(
        target=name,
        runner=t.runner,
        production=len(t.features) if cases is not None else 0,
        extended=len(edges.FEATURES) if edges is not None else 0,
        tour=len(tour.SHAPES) if tour is not None else 0,
        audit=len(audit.AUDIT.properties) if audit is not None else 0,
        device=has_role(name, "device"),  # the file alone: its module imports torch (`list` must not)
        port=has_role(name, "port"),
        port_applies=t.runner in CPU_PORT_RUNNERS,
        bugs=len(bugs),
        extreme_bugs=sum(1 for m in bugs if m.extreme),
        extremes=len(t.extremes),
        corpus=len(list(folder.glob("*.json"))) if folder.is_dir() else 0,
    )


def matrix(corpus: Path = CORPUS_DIR) -> list[Capabilities]:
    """Every target's row, in :data:`~..targets.TARGETS` order."""
    return [capabilities(name, corpus) for name in TARGETS]


def core_gaps(rows: list[Capabilities]) -> set[tuple[str, str]]:
    """Every ``(target, column)`` of :data:`CORE` that a row lacks."""
    return {(r.target, c) for r in rows for c in r.gaps()}


def to_json(rows: list[Capabilities]) -> dict[str, Any]:
    """The matrix as data: ``{"columns", "core", "targets": {name: {column: value, ...,
    "gaps": [...]}}}``."""
    targets = {}
    for r in rows:
        d = asdict(r)
        del d["target"]
        targets[r.target] = d | {"gaps": r.gaps()}
    return {"columns": list(COLUMNS), "core": list(CORE), "targets": targets}


def _cell(r: Capabilities, column: str) -> str:
    value = getattr(r, column)
    if column == "port" and not r.port_applies and not value:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "-"
    if column == "extreme_bugs" and not r.extremes:
        return "n/a"
    return str(value) if value else "-"


def print_matrix(rows: list[Capabilities], out: Any = None, *, width: int = 80) -> None:
    """The matrix as a table on ``out`` (a target's name is never cut: the table grows instead),
    then one line per target that lacks a core column."""
    table = Table(box=box.SIMPLE_HEAD)
    names = [r.target for r in rows]
    table.add_column("target", no_wrap=True, min_width=max(map(len, names), default=0))
    for c in COLUMNS:
        table.add_column(HEADINGS[c], justify="right", no_wrap=True)
    for r in rows:
        table.add_row(r.target, *(_cell(r, c) for c in COLUMNS))
    buf = io.StringIO()
    console = Console(file=buf, width=width, highlight=False, color_system=None)
    needed = console.measure(table, options=console.options.update_width(100_000)).maximum
    console.width = max(width, needed)  # never cut a cell: a log is wider than a terminal
    console.print(table)
    lines = ["capability matrix:", *(ln.rstrip() for ln in buf.getvalue().splitlines() if ln.strip()), LEGEND]
    lines += [f"core gaps of {r.target}: {', '.join(HEADINGS[g] for g in r.gaps())}" for r in rows if r.gaps()]
    print("\n".join(lines), file=out or sys.stdout)
