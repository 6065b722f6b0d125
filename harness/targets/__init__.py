"""The registry: one folder per target, discovered, in the order of docs/CONTRACT.md's sections.

A target is the folder ``harness/targets/<name>/`` named like the target. Each
file of the folder has one role, the same in every folder; a role the target lacks is a file
it lacks:

========== =====================================================================================
record.py  ``TARGET``, the registry record: a :class:`~..targetkit.base.Target` (name, model
           runner, vLLM module and function, contract section, parameters, variants, inputs and
           outputs, features, extremes, oracles, the tiers' rules, launch, oracle call, locate,
           shrink moves)
layout.py  ``NAME``; how a case is built from its parts and split into requests
cases.py   ``body(chooser, scale)``: the production tier's generator, one body for the
           Hypothesis and the bulk driver
tour.py    ``SHAPES``: the shapes of the production extremes that every default run checks
edges.py   the extended tier's generators and edges (docs/CONTRACT.md N.4)
audit.py   ``AUDIT``: the properties a caller relies on (``eaglefuzz audit``)
device.py  ``DEVICE``: device mode (``--mode device``), cases drawn and checked on a GPU
port.py    ``PORT``: the adapter of vLLM's CPU C++ port (``--vllm-cpu``)
bugs.py    ``BUGS``: the target's seeded bugs (tests/seeded_bugs/mutants.py collects them)
========== =====================================================================================

A record is the interface of :class:`~..targetkit.base.Target` (docs/DESIGN.md, "The record
interface"). Its ``name`` is its folder's; its ``runner``, ``module`` and ``function`` say whose
code it tests, and no two targets test the same function of the same module.

Adding a target is adding its folder (docs/ADDING_A_TARGET.md): nothing here names one. The
other registries (audit properties, device targets, port adapters, seeded bugs) are views of
the folders' roles, found one way (:func:`role`, :func:`~..targetkit.roles.find_role`).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from ..targetkit.base import ContractViolation, Outcome, Target
from ..targetkit.roles import ROLES as _ROLES
from ..targetkit.roles import find_role, has_file

ROLES = tuple(_ROLES)
"""The files a target folder may have, each with its one role (:data:`~..targetkit.roles.ROLES`
says what each defines)."""


def _discover() -> dict[str, Target]:
    found: list[Target] = []
    for info in pkgutil.iter_modules(__path__):
        if not info.ispkg:
            continue
        target = importlib.import_module(f"{__name__}.{info.name}.record").TARGET
        if target.name != info.name:
            raise RuntimeError(f"harness/targets/{info.name}/record.py: TARGET is {target.name!r}; "
                               "a target's folder is named like the target")
        found.append(target)
    tested: dict[tuple[str, str], str] = {}
    for t in found:
        other = tested.setdefault((t.module, t.function), t.name)
        if other != t.name:
            raise RuntimeError(f"harness/targets/{t.name}/record.py: {t.module}::{t.function} is "
                               f"already target {other}'s; one target per function of a module")
    return {t.name: t for t in sorted(found, key=lambda t: t.section)}


TARGETS: dict[str, Target] = _discover()
"""Every target by name, in the order of their docs/CONTRACT.md sections."""


def has_role(name: str, role: str) -> bool:
    """Whether target ``name``'s folder has ``role``'s file (found without importing it)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (one of {', '.join(ROLES)})")
    if name not in TARGETS:
        raise KeyError(name)
    return has_file(TARGETS[name].folder, role)


def role(name: str, role: str) -> ModuleType | None:
    """The module of target ``name``'s ``role`` (imported on first use), ``None`` when its folder
    lacks that file."""
    return find_role(TARGETS[name].folder, role) if has_role(name, role) else None


__all__ = ["ROLES", "TARGETS", "ContractViolation", "Outcome", "Target", "has_role", "role"]
