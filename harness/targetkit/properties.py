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
    ``error``: the run raised (the properties are then not checked).
    """

    out: dict[str, np.ndarray] = field(default_factory=dict)
    written: dict[str, np.ndarray] = field(default_factory=dict)
    stray: dict[str, bool] = field(default_factory=dict)
    result: Any = None
    error: str | None = None


Check = Callable[[Case, Observation], "str | None"]


@dataclass(frozen=True)
class Property:
    """A guarantee a caller relies on: ``name``, what it ``says``, and its ``check``."""

    name: str
    says: str
    check: Check


def nothing_past_num_reqs(case: Case, o: Observation) -> str | None:
    for name, stray in o.stray.items():
        if stray:
            return f"{name}: a write lands outside the buffer (past num_reqs or before it)"
    return None

