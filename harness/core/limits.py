"""What one case may cost, bounded before anything runs; and how long it may run.

A corpus file is input from outside: ``"grid_size": 1000000000`` passes the contract (a grid
may be padded) and would keep the Triton interpreter busy for weeks. Loading a case therefore
checks its cost against limits (a :class:`LimitExceeded` names the field, the figure and the
limit, and says how to raise it), and every case that runs under a supervisor gets a time
limit (:func:`~..checking.costs.time_limit`), scaled to its size and the backend: a case that exceeds it is a
*hang* finding.

Limits come from ``EAGLEFUZZ_LIMITS`` (``name=value,...``; the ``--limits`` and
``--case-timeout`` options set it, so worker processes see the same). Names and defaults are in
:data:`DEFAULTS`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

from .errors import ContractViolation, UserError

ENV = "EAGLEFUZZ_LIMITS"


@dataclass(frozen=True)
class Limits:
    """The limits in force; see :data:`DOCS` for what each one bounds."""

    grid: int = 1 << 24
    interpreter_programs: int = 1 << 14
    array_elements: int = 1 << 22
    case_bytes: int = 256 << 20
    file_bytes: int = 64 << 20
    case_timeout: float = 0.0
    timeout_scale: float = 1.0


DEFAULTS = Limits()
DOCS: dict[str, str] = {
    "grid": "program instances of one launch (any backend)",
    "interpreter_programs": "program instances of one launch under the Triton interpreter (~4 ms each on a CPU)",
    "array_elements": "elements of one array of a case",
    "case_bytes": "bytes of a case's input arrays and the output buffers it needs, together",
    "file_bytes": "bytes of one corpus file, checked before it is parsed",
    "case_timeout": "seconds one case may run before it is a hang finding; 0: computed from its size",
    "timeout_scale": "factor applied to the computed time limit",
}

class LimitExceeded(ContractViolation):
    """A case that would cost more than the limits allow (a :class:`ContractViolation`, so it is
    reported like one: file, field, rule)."""


def parse(spec: str, base: Limits = DEFAULTS, *, where: str = ENV) -> Limits:
    """``base`` with the ``name=value`` pairs of ``spec`` (comma-separated) applied."""
    out = base
    kinds = {f.name: f.type for f in fields(Limits)}
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        name, eq, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not eq or name not in kinds:
            raise UserError(f"{where}: {item!r}: expected NAME=VALUE with NAME one of {', '.join(kinds)}")
        integer = kinds[name] in (int, "int")
        try:
            number: float = int(value) if integer else float(value)
        except ValueError:
            what = "an integer" if integer else "a number"
            raise UserError(f"{where}: {name}: {value.strip()!r} is not {what}") from None
        if number < 0 or (number == 0 and name != "case_timeout"):
            raise UserError(f"{where}: {name}: must be positive, not {value.strip()}")
        out = replace(out, **{name: number})
    return out


def current() -> Limits:
    """The limits in force in this process (``EAGLEFUZZ_LIMITS`` over :data:`DEFAULTS`)."""
    return parse(os.environ.get(ENV, ""))


def configure(spec: str | None = None, *, case_timeout: float | None = None, where: str = "--limits") -> Limits:
    """Apply ``spec`` (and ``case_timeout``) to the limits in force, for this process and the
    worker processes it starts (through ``EAGLEFUZZ_LIMITS``)."""
    limits = current()
    if spec:
        limits = parse(spec, limits, where=where)
    if case_timeout is not None:
        limits = replace(limits, case_timeout=float(case_timeout))
    changed = [f"{f.name}={getattr(limits, f.name)}" for f in fields(Limits)
               if getattr(limits, f.name) != getattr(DEFAULTS, f.name)]
    os.environ[ENV] = ",".join(changed)
    return limits


def exceeded(field: str, what: str, value: int, unit: str, name: str, limit: int) -> LimitExceeded:
    """The :class:`LimitExceeded` of ``field``: ``what value unit`` is over limit ``name``."""
    return LimitExceeded(
        field,
        f"{what} {value} {unit} exceeds the limit of {limit} ({name}; raise it with "
        f"--limits {name}=N or {ENV}={name}=N)",
    )


def check_file_size(size: int, limits: Limits | None = None) -> None:
    """A corpus file of ``size`` bytes may be parsed."""
    lim = limits or current()
    if size > lim.file_bytes:
        raise exceeded("(file)", "a file of", size, "bytes", "file_bytes", lim.file_bytes)


def check_shape(name: str, shape: list[int], limits: Limits | None = None) -> None:
    """An array of ``shape`` may be read (checked before its data)."""
    lim = limits or current()
    n = 1
    for d in shape:
        n *= d
    if n > lim.array_elements:
        raise exceeded(f"arrays.{name}.shape", "an array of", n, "elements", "array_elements", lim.array_elements)
