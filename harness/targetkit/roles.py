"""The roles of a target folder: which files it may have, what each must define, and the one way
to find them.

A target is the folder ``harness/targets/<name>/``; each file of it has one role, the same in
every folder, and a role the target lacks is a file it lacks. :func:`find_role` is the only way
eaglefuzz finds a role: the record's base class (:class:`~.base.Target`) reads its own folder's
``cases``, ``tour`` and ``edges`` through it, and the registry's
:func:`~..targets.has_role` / :func:`~..targets.role` (the capability matrix, the audit, device
mode, the C++ port, the seeded bugs, the tests) are the same lookup. No record carries a role as
an attribute of its own.

:data:`ROLES` says what each role's module must define (:attr:`Role.exports`); the test of the
record interface (``tests/test_record_interface.py``) checks every folder against it.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from functools import cache
from types import ModuleType


@dataclass(frozen=True)
class Role:
    """One file role of a target folder: its module's ``name``, the names that module must
    define (``exports``), whether every target has it (``required``) and what it is for."""

    name: str
    exports: tuple[str, ...]
    required: bool
    what: str


ROLES: dict[str, Role] = {r.name: r for r in (
    Role("record", ("TARGET",), True, "the registry record: the target's Target (harness/targetkit/base.py)"),
    Role("layout", ("NAME",), True, "how a case is built from its parts (shared by the other files)"),
    Role("cases", ("body",), True, "body(chooser, scale): an ordinary production-tier case, for both drivers"),
    Role("tour", ("SHAPES",), True, "SHAPES: the shapes of the production extremes every default run checks"),
    Role("edges", ("FEATURES", "strategy", "random_case", "features_of", "shrink_candidates"), False,
         "the extended tier's generators and edges (docs/CONTRACT.md N.4); its rules: Target.extended_rules"),
    Role("audit", ("AUDIT",), False, "AUDIT: the properties a caller relies on (eaglefuzz audit)"),
    Role("device", ("DEVICE",), False, "DEVICE: device mode (--mode device), cases drawn and checked on a GPU"),
    Role("port", ("OP", "PORT"), False, "OP, PORT: vLLM's CPU C++ op and its adapter (--vllm-cpu)"),
    Role("bugs", ("BUGS",), False, "BUGS: the seeded bugs a default run must catch"),
)}
"""Every role, in the order of the folder's layers (``record`` first: it names the target)."""


RECORD_MODULE = "record"


def folder_of(module: str) -> str | None:
    """The package of the target folder whose record is module ``module`` (a record's
    ``type(record).__module__``); ``None`` for a module that is no folder's ``record.py`` (a
    test double)."""
    package, _, last = module.rpartition(".")
    return package if package and last == RECORD_MODULE else None


@cache
def _exists(folder: str, role: str) -> bool:
    try:
        return importlib.util.find_spec(f"{folder}.{role}") is not None
    except ModuleNotFoundError:
        return False


def has_file(folder: str | None, role: str) -> bool:
    """Whether the target folder ``folder`` (a package name) has ``role``'s file, found without
    importing it."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (one of {', '.join(ROLES)})")
    return folder is not None and _exists(folder, role)


def find_role(folder: str | None, role: str) -> ModuleType | None:
    """The module of ``role`` in the target folder ``folder`` (imported on first use), ``None``
    when the folder lacks that file."""
    return importlib.import_module(f"{folder}.{role}") if has_file(folder, role) else None
