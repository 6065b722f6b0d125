"""What checking one case costs: its launch, its buffers, and how long it may run.

The limits themselves (:class:`~..core.limits.Limits`, ``EAGLEFUZZ_LIMITS``, ``--limits``) are
:mod:`..core.limits`; this module measures a case against them through its target (program
instances, output buffers), so a corpus file that would keep the interpreter busy for weeks is
refused before anything runs, and every supervised case gets a time limit past which it is a
hang.
"""

from __future__ import annotations

from ..core.case import Case
from ..core.limits import LimitExceeded, Limits, check_shape, current, exceeded
from ..targets import TARGETS

__all__ = ["LimitExceeded", "check_cost", "limits_needed", "time_limit"]

TIMEOUT_BASE_S = 30.0
"""Every case's time allowance before its size counts (compiling a specialization, first use)."""
INTERPRETER_PROGRAM_S = 0.05
"""Allowance per program instance under the interpreter (about 12 times the ~4 ms measured)."""
COMPILED_PROGRAM_S = 1e-6
ELEMENT_S = 1e-5
"""Allowance per input and output element (oracles, buffers, comparison)."""



def check_cost(case: Case, limits: Limits | None = None, *, interpreter: bool = False) -> None:
    """Raise :class:`LimitExceeded` when ``case`` (in-contract) would cost more than allowed:
    its launch's program instances (more strictly under the interpreter), its arrays and the
    output buffers it needs."""
    lim = limits or current()
    target = TARGETS[case.kernel]
    for name, a in case.arrays.items():
        check_shape(name, list(a.shape), lim)
    programs = target.programs(case)
    if programs > lim.grid:
        raise exceeded(target.grid_field, "a launch of", programs, "programs", "grid", lim.grid)
    if interpreter and programs > lim.interpreter_programs:
        raise exceeded(target.grid_field, "under the Triton interpreter, a launch of", programs, "programs",
                    "interpreter_programs", lim.interpreter_programs)
    total = sum(a.nbytes for a in case.arrays.values()) + target.output_bytes(case)
    if total > lim.case_bytes:
        raise exceeded("arrays", "inputs and outputs of", total, "bytes", "case_bytes", lim.case_bytes)


def limits_needed(case: Case) -> str | None:
    """The ``--limits`` a case past the default limits needs to be loaded and run (a
    production-scale case: tables of billions of elements), as ``NAME=N,...``; ``None`` within
    them. A finding's replay commands carry it."""
    from ..core.limits import DEFAULTS

    target = TARGETS[case.kernel]
    need = {
        "array_elements": max((int(a.size) for a in case.arrays.values()), default=0),
        "case_bytes": sum(int(a.nbytes) for a in case.arrays.values()) + target.output_bytes(case),
        "grid": target.programs(case),
    }
    over = [f"{k}={v}" for k, v in need.items() if v > getattr(DEFAULTS, k)]
    return ",".join(over) or None


def time_limit(case: Case, *, compiled: bool, limits: Limits | None = None) -> float:
    """Seconds ``case`` may run (its check: oracles, launch, comparison) before it is a hang.

    ``case_timeout`` when set; else ``timeout_scale`` x (a base of 30 s, plus 50 ms per
    program instance under the interpreter or 1 µs compiled, plus 10 µs per element).
    """
    lim = limits or current()
    if lim.case_timeout > 0:
        return lim.case_timeout
    target = TARGETS[case.kernel]
    elements = sum(a.size for a in case.arrays.values()) + target.output_bytes(case) // 4
    per_program = COMPILED_PROGRAM_S if compiled else INTERPRETER_PROGRAM_S
    return lim.timeout_scale * (TIMEOUT_BASE_S + per_program * target.programs(case) + ELEMENT_S * elements)

