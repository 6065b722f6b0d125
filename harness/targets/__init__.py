"""The registry: one folder per target, discovered, in the order of docs/CONTRACT.md's sections.

A target is the folder ``harness/targets/<name>/`` named like the target (its vLLM name). Each
file of the folder has one role, the same in every folder; a role the target lacks is a file
it lacks:

========== =====================================================================================
record.py  the registry record: ``TARGET``, the :class:`~..targetkit.base.Target` (name, contract
           section, vLLM module, parameters, variants, inputs and outputs, features, extremes,
           launch, oracle call, locate, shrink moves)
layout.py  how a case is built from its parts and split into requests (shared by the others)
cases.py   the production tier's generator, one body for the Hypothesis and the bulk driver
tour.py    the shapes of the production extremes that every default run checks
edges.py   the extended tier (docs/CONTRACT.md N.4)
audit.py   the properties a caller relies on (``eaglefuzz audit``)
device.py  device mode (``--mode device``): cases drawn and checked on a GPU
port.py    the adapter of vLLM's CPU C++ port (``--vllm-cpu``)
bugs.py    the target's seeded bugs (tests/seeded_bugs/mutants.py collects them)
========== =====================================================================================

Adding a target is adding its folder (docs/ADDING_A_TARGET.md): nothing here names one. The
other registries (audit properties, device targets, port adapters, seeded bugs) are views of
the folders' roles (:func:`role`).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from types import ModuleType

from ..targetkit.base import ContractViolation, Outcome, Target

ROLES = ("record", "layout", "cases", "tour", "edges", "audit", "device", "port", "bugs")
"""The files a target folder may have, each with its one role."""



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
    return {t.name: t for t in sorted(found, key=lambda t: t.section)}


TARGETS: dict[str, Target] = _discover()
"""Every target by name, in the order of their docs/CONTRACT.md sections."""


def has_role(name: str, role: str) -> bool:
    """Whether target ``name``'s folder has ``role``'s file (found without importing it)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (one of {', '.join(ROLES)})")
    if name not in TARGETS:
        raise KeyError(name)
    try:
        return importlib.util.find_spec(f"{__name__}.{name}.{role}") is not None
    except ModuleNotFoundError:  # a target not in a folder of its own
        return False


def role(name: str, role: str) -> ModuleType | None:
    """The module of target ``name``'s ``role`` (imported on first use), ``None`` when its folder
    lacks that file."""
    return importlib.import_module(f"{__name__}.{name}.{role}") if has_role(name, role) else None


__all__ = ["ROLES", "TARGETS", "ContractViolation", "Outcome", "Target", "has_role", "role"]
