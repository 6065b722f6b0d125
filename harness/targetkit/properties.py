"""What a caller relies on, per target: properties checked on one implementation's outputs.

Each property is a small function of the case and what the implementation did
(:class:`Observation`) that returns ``None`` when the property holds, or one line saying where
it fails. None of them needs a second implementation: they are the guarantees vLLM's code
around each call takes for granted (an index it will gather with, a range it will slice). The
search that looks for inputs breaking them, over both domain tiers, is :mod:`..checking.audit`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.case import Case
from ..generation.strategies import Scale


@dataclass
class Observation:
    """One run of an implementation on a case.

    Kernels: ``out`` holds each output buffer as the kernel left it, ``written`` which of its
    elements the kernel wrote (told apart by two runs over different fills), ``stray`` whether
    it wrote into a guard band around the buffer; an input the kernel updates in place
    (``inout``: Model Runner V2's state) is in ``out`` as the kernel left it, ``written`` where
    it changed. Functions: ``result`` is what it returned.
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


@dataclass(frozen=True)
class HazardDraws:
    """A target's hazard draws: inputs of vLLM's real reports that lie past the extended tier
    (the audit's ``beyond`` tier; no oracle models them, the audit alone runs them).

    ``strategy(scale)``: the draws (Hypothesis); ``validate(case)``: raises
    :class:`~..core.errors.ContractViolation` for a case that is no hazard draw;
    ``hazards_of(case)``: the hazard classes ``case`` has (an input the target's tiers ignore,
    such as a caller's buffer length, makes it a hazard draw whatever the tiers accept);
    ``shrink_candidates(case)``: smaller draws, beside the target's own moves (``None``: none).
    """

    strategy: Callable[[Scale], Any]
    validate: Callable[[Case], None]
    hazards_of: Callable[[Case], frozenset[str]]
    shrink_candidates: Callable[[Case], Iterator[Case]] | None = None


class NotApplicable(Exception):  # noqa: N818 - a verdict, not an error
    """Raised by a :class:`Statistic`'s check when the source's kernels cannot be run as it
    runs them (an older interface it cannot launch): the audit says so, it is no hazard."""


@dataclass(frozen=True)
class Statistic:
    """A property no single case shows: checked over many seeds by running the source's kernels
    (``check(kernels, device, seed)``: ``kernels`` maps target names to the implementations
    under test; ``None`` when it holds, else one line saying where it fails). Deterministic for
    a ``seed``; its false-alarm rate is stated in ``says``. ``needs``: the targets whose
    implementations it runs (a source without them skips it, saying so)."""

    name: str
    says: str
    check: Callable[[Mapping[str, Any], str, int], str | None]
    needs: tuple[str, ...]
    hazard_class: str = ""
    source: str = ""


@dataclass(frozen=True)
class Audit:
    """The audit role of a target folder: its ``audit.py`` defines ``AUDIT``, one of these.

    ``properties``: what a caller relies on (:func:`completes` is added first unless given);
    ``run(case, impl, device)``: a Python-function target's call, whose result the properties
    see in :attr:`Observation.result` (a kernel is run by the audit itself: ``None``);
    ``output_specs(case)``: the buffers the audit gives a kernel when they differ from the
    record's ``output_specs`` (a caller's larger buffer; ``None``: the record's);
    ``hazards``: the target's hazard draws, if any; ``fixes``: vLLM's fixes of the target's
    hazard classes, by the report that makes each (a property's :attr:`Property.source` names
    it: ``"PR #48055"``), as text edits ``(old, new)`` of a release's source (each ``old`` found
    once), applied to that text at run time, never a copy of vLLM's code: the fixed variant
    (``tests/seeded_bugs/mutants.py`` writes it) that the hazard and its findings pass on.
    """

    properties: tuple[Property, ...]
    run: Callable[[Case, Any, str], Any] | None = None
    output_specs: Callable[[Case], Mapping[str, tuple[Any, tuple[int, ...]]]] | None = None
    hazards: HazardDraws | None = None
    fixes: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    statistics: tuple[Statistic, ...] = ()
    """Properties over many seeds (:class:`Statistic`): the audit runs each once per target."""


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

