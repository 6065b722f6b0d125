"""What a caller relies on, per target: properties checked on one implementation's outputs.

Each property is a small function of the case and what the implementation did
(:class:`Observation`) that returns ``None`` when the property holds, or one line saying where
it fails. None of them needs a second implementation: they are the guarantees vLLM's code
around each call takes for granted (an index it will gather with, a range it will slice). The
search that looks for inputs breaking them, over both domain tiers, is :mod:`..checking.audit`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.case import Case


@dataclass
class Observation:
    """One run of an implementation on a case.

    Kernels: ``out`` holds each output buffer as the kernel left it, ``written`` which of its
    elements the kernel wrote (told apart by two runs over different fills), ``stray`` whether
    it wrote into a guard band around the buffer. Functions: ``result`` is what it returned.
    ``error``: the run raised (only :func:`completes` is then checked: the raise is its
    hazard; the other properties have no outputs to look at).
    """

    out: dict[str, np.ndarray] = field(default_factory=dict)
    written: dict[str, np.ndarray] = field(default_factory=dict)
    stray: dict[str, bool] = field(default_factory=dict)
    result: Any = None
    error: str | None = None


Check = Callable[[Case, Observation], "str | None"]


@dataclass(frozen=True)
class Property:
    """A guarantee a caller relies on: ``name``, what it ``says``, and its ``check``.

    ``hazard_class``: the class of vLLM's real reports it stands for (README's hazard table;
    empty for a property of no such class), ``source``: the vLLM PR or issue of that class,
    ``rests_on``: the production precondition (docs/CONTRACT.md N.2, with its vLLM citation)
    that keeps vLLM's production inputs from breaking it, or why production reaches it.
    """

    name: str
    says: str
    check: Check
    hazard_class: str = ""
    source: str = ""
    rests_on: str = ""


COMPLETES = "call_completes"
"""The name of every target's :func:`completes` property."""


def _raised(case: Case, o: Observation) -> str | None:
    return None if o.error is None else f"the call raises {o.error}"


def completes(says: str = "the call returns without raising (every read and gather stays in its buffer)",
              *, hazard_class: str = "", source: str = "", rests_on: str = "") -> Property:
    """The property that the call returns: a run that raises (an out-of-range read or gather,
    eager ``IndexError``) breaks it, and is reported as that hazard with its case."""
    return Property(COMPLETES, says, _raised, hazard_class, source, rests_on)


def nothing_past_num_reqs(case: Case, o: Observation) -> str | None:
    for name, stray in o.stray.items():
        if stray:
            return f"{name}: a write lands outside the buffer (past num_reqs or before it)"
    return None

