"""``eaglefuzz audit``: search both domain tiers for inputs that break what a caller relies on.

The properties (each target folder's ``audit.py``: its ``AUDIT``, an
:class:`~..targetkit.properties.Audit`; :data:`PROPERTIES`) need no second implementation: each
is checked on the outputs of the implementation under test alone. For every target the search
draws cases from the production tier's strategy and from the extended tier's (:mod:`.domains`),
and from its *hazard draws* (``AUDIT.hazards``: the inputs of vLLM's real reports, classified by
their own tier, :data:`BEYOND` when they lie past the extended tier), runs the implementation on
each, and checks every property. A property that
fails is a *hazard*: it is shrunk to a minimal example (the target's shrink moves, like
findings; a production example stays in the production tier) and reported with whether the
production tier reaches it and the precondition that keeps production from it.

Every target has the property :func:`~..targetkit.properties.completes`: a run that raises
(an out-of-range gather raises ``IndexError`` eagerly) is that hazard, reported with its case,
never skipped.

A hazard is a fact about the code under test and its contract, not a difference from the
reference: on the bundled production copy every hazard is the reference's own behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed

from ..core.buffers import Guarded, filled, poison, raw
from ..core.case import Case
from ..generation.strategies import Scale, derive_seed
from ..sources import device_for
from ..targetkit.base import TritonTarget
from ..targetkit.properties import (
    COMPLETES,
    Audit,
    HazardDraws,
    NotApplicable,
    Observation,
    Property,
    completes,
)
from ..targets import TARGETS, ContractViolation, has_role, role
from .check import warm_oracles
from .domains import EXTENDED, PRODUCTION, guarded, shrink_candidates_for, strategy_for

BEYOND = "beyond"
"""The tier of a hazard draw outside the extended tier (an out-of-range read: no oracle models
it, the audit alone runs it)."""


def _with_completes(props: tuple[Property, ...]) -> tuple[Property, ...]:
    return props if any(p.name == COMPLETES for p in props) else (completes(), *props)


def audit_of(target_name: str) -> Audit | None:
    """Target ``target_name``'s audit role: its folder's ``audit.py`` ``AUDIT`` (``None``
    without one)."""
    module = role(target_name, "audit")
    return module.AUDIT if module is not None else None


PROPERTIES: dict[str, tuple[Property, ...]] = {
    name: _with_completes(audit_of(name).properties) for name in TARGETS if has_role(name, "audit")
}
"""Target -> the properties the audit checks: a view of the target folders' ``audit.py``
(each with :func:`~..targetkit.properties.completes` first, unless it gives its own)."""


def hazard_draws(target_name: str) -> HazardDraws | None:
    """The target's hazard draws (``AUDIT.hazards``); ``None`` when it has none."""
    a = audit_of(target_name)
    return a.hazards if a is not None else None


AUDIT_SCALE = Scale(max_requests=6, request_tail=12, max_query_len=24, max_programs=96)
"""Batch sizes of the audit's search: small, so minimal examples come fast on any backend."""

_FILLS = ((-0x5A5A5A5B, 0xA5), (0x5A5A5A5A, 0x5A))


def observe_device(target: Any, case: Case, device: str) -> str:
    """Where :func:`observe` runs ``case``: on ``device``, except a :data:`BEYOND` case of a torch
    function on a GPU, which runs on the CPU. Such a case gathers out of range on purpose; on a GPU
    the gather is a device-side assert, which leaves the CUDA context unusable for every later
    call (the next examples and targets would all "raise"), while on the CPU it raises at once."""
    if device != "cpu" and not isinstance(target, TritonTarget) and _tier(target, case) == BEYOND:
        return "cpu"
    return device


def observe(target_name: str, case: Case, impl: Any, device: str) -> Observation:
    """Run ``impl`` on ``case`` (on :func:`observe_device`) and record what it did (see
    :class:`Observation`)."""
    target = TARGETS[target_name]
    device = observe_device(target, case, device)
    try:
        if isinstance(target, TritonTarget):
            return _observe_kernel(target, case, impl, device)
        return Observation(result=audit_of(target_name).run(case, impl, device))
    except Exception as exc:  # noqa: BLE001 - a failing implementation is reported, not raised
        return Observation(error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")


def _observe_kernel(target: TritonTarget, case: Case, impl: Any, device: str) -> Observation:
    import torch

    a = audit_of(target.name)
    specs = (a.output_specs if a is not None and a.output_specs is not None else target.output_specs)(case)
    runs = []
    for fill, fill_bool in _FILLS:  # an element is written when both runs agree on it
        bufs = {n: Guarded(a.dtype, a.shape, device, poison(a.dtype), content=a) for n, a in case.arrays.items()}
        for n, (dt, shape) in specs.items():
            bufs[n] = Guarded(dt, shape, device, fill_bool if dt == np.bool_ else fill)
        with np.errstate(all="ignore"):  # the interpreter's NumPy ops on IEEE cases (p / subnormal q), as in a check
            target.launch(impl, {n: b.view for n, b in bufs.items()}, case)
        if device != "cpu":
            torch.cuda.synchronize()
        runs.append({n: (bufs[n].read(), bufs[n].guard) for n in (*specs, *target.inout) if n in bufs})
        del bufs  # a production-scale case's tables are gigabytes: one run's at a time
    o = Observation()
    for n, (_, shape) in specs.items():
        (a, g), (b, _) = runs[0][n], runs[1][n]
        w = raw(a) == raw(b)
        size = a.size - 2 * g
        o.out[n] = a[g : g + size].reshape(shape)
        o.written[n] = w[g : g + size].reshape(shape)
        o.stray[n] = bool(w[:g].any() or w[g + size :].any())
    for n in target.inout & set(case.arrays):  # state updated in place: as the first run left it; written = changed
        (a, g), given = runs[0][n], case.arrays[n]
        o.out[n] = a[g : g + given.size].reshape(given.shape)
        o.written[n] = raw(o.out[n]) != raw(given)
        o.stray[n] = bool((raw(a[:g]) != raw(filled(given.dtype, (g,), poison(given.dtype)))).any()
                          or (raw(a[g + given.size :]) != raw(filled(given.dtype, (g,), poison(given.dtype)))).any())
    return o


def violation(prop: Property, case: Case, o: Observation) -> str | None:
    """Where ``prop`` fails on ``o`` (``None``: it holds). A run that raised breaks
    :func:`~..targetkit.properties.completes` and leaves the others unchecked."""
    if o.error is not None and prop.name != COMPLETES:
        return None
    return prop.check(case, o)


EXAMPLE_BEGIN = "# --- minimal example: paste into a file; python runs it and prints the case ---"
"""The first line of a hazard's example block (a Python comment: the block runs as pasted)."""
EXAMPLE_END = "# --- end of minimal example ---"


def example_source(case: Case) -> str:
    """Python source that rebuilds ``case`` as ``case`` and prints it: a hazard's minimal example."""
    src = case.to_python()
    names = "Case, sparse" if "sparse((" in src else "Case"
    return f"import numpy as np\nfrom eaglefuzz.harness.case import {names}\n\ncase = " + src + "\nprint(case)"


@dataclass
class Hazard:
    """A property that some input breaks, with its minimal example."""

    target: str
    prop: Property
    case: Case
    tier: str
    detail: str
    reachable_in_production: bool
    searched: dict[str, int]
    """Examples checked per tier; ``violating``: how many of them broke the property."""
    violating: dict[str, int]
    edges: frozenset[str] = frozenset()

    def report(self) -> str:
        prod = self.searched.get(PRODUCTION, 0)
        others = "; ".join(f"{self.violating.get(t, 0)} of {self.searched[t]} {t}-tier ones do"
                           for t in (EXTENDED, BEYOND) if self.searched.get(t))
        reach = (
            f"yes ({self.violating.get(PRODUCTION, 0)} of {prod} production-tier examples break it)"
            if self.reachable_in_production
            else f"no (none of {prod} production-tier examples breaks it" + (f"; {others}" if others else "") + ")"
        )
        lines = [f"hazard: {self.target}: {self.prop.name}"]
        if self.prop.hazard_class:
            lines.append(f"  class: {self.prop.hazard_class}" + (f" ({self.prop.source})" if self.prop.source else ""))
        lines += [
            f"  a caller relies on: {self.prop.says}",
            f"  broken: {self.detail}",
            f"  production can reach it: {reach}",
        ]
        if self.prop.rests_on:
            lines.append(f"  {'production' if self.reachable_in_production else 'it rests on'}: {self.prop.rests_on}")
        lines += [
            f"  minimal example ({self.tier} tier"
            + (f"; {'hazard draws' if self.tier == BEYOND else 'edges'}: {', '.join(sorted(self.edges))}" if self.edges else "")
            + "):",
            EXAMPLE_BEGIN,
            *example_source(self.case).splitlines(),
            EXAMPLE_END,
        ]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target, "property": self.prop.name, "says": self.prop.says, "detail": self.detail,
            "hazard_class": self.prop.hazard_class, "source": self.prop.source, "rests_on": self.prop.rests_on,
            "tier": self.tier, "reachable_in_production": self.reachable_in_production,
            "edges": sorted(self.edges), "searched": self.searched, "violating": self.violating,
            "example": self.case.to_python(),
        }


@dataclass
class TargetAudit:
    """What the audit of one target found."""

    target: str
    searched: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    """Examples whose run raised (each breaks ``call_completes``: a hazard, never skipped)."""
    hazards: list[Hazard] = field(default_factory=list)
    holds: list[str] = field(default_factory=list)
    statistics_failed: list[str] = field(default_factory=list)
    """A statistic (``AUDIT.statistics``) that fails: its report lines."""
    statistics_skipped: list[str] = field(default_factory=list)


def _tier(target: Any, case: Case) -> str | None:
    """``case``'s tier: production, extended, :data:`BEYOND` (a hazard draw past the extended
    tier), or ``None`` when it lies in none of them. A case with a hazard draw's own input (one
    its hazard draws' ``hazards_of`` names, such as a caller's buffer length that the target
    itself ignores) is a beyond-tier case whatever the target's tiers accept."""
    draws = hazard_draws(target.name)
    if draws is None or not draws.hazards_of(case):
        try:
            return target.tier_of(case, EXTENDED)
        except ContractViolation:
            if draws is None:
                return None
    try:
        draws.validate(case)
    except ContractViolation:
        return None
    return BEYOND


def _draw(target_name: str, tier: str, scale: Scale, examples: int, seed: int) -> list[Case]:
    """``examples`` cases of ``tier`` (fewer only when its strategy has no more distinct ones):
    the extended tier's strategy also draws production cases, which are passed over, so that
    "N examples per tier" is what each tier gets. ``hazard``: the hazard draws, whatever their
    tier."""
    cases: list[Case] = []
    target = TARGETS[target_name]
    if tier == "hazard":
        strategy = hazard_draws(target_name).strategy(scale).filter(lambda c: _tier(target, c) is not None)
    else:
        strategy = strategy_for(target, tier, scale).filter(lambda c: _tier(target, c) == tier)

    @settings(max_examples=examples, phases=[Phase.generate], database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @hseed(derive_seed(seed, "audit", target_name, tier))
    @given(strategy)
    def collect(case: Case) -> None:
        cases.append(case)

    collect()
    return cases


def size_key(case: Case) -> tuple[int, int, int]:
    """How big a case is: its array elements, the length of its source text, then the sum of
    its integer scalars and launch parameters in magnitude."""
    ints = [v for v in (*case.scalars.values(), *case.launch.values()) if isinstance(v, int)]
    return sum(int(a.size) for a in case.arrays.values()), len(case.to_python()), sum(abs(int(v)) for v in ints)


def shrink_hazard(target_name: str, prop: Property, case: Case, tier: str, impl: Any, device: str,
                  *, max_checks: int = 200) -> tuple[Case, str]:
    """The smallest variant of ``case`` (in ``tier``) that still breaks ``prop``, and where."""
    target = TARGETS[target_name]
    detail = violation(prop, case, observe(target_name, case, impl, device)) or ""
    order = (PRODUCTION, EXTENDED, BEYOND)
    checks, improved = 0, True
    while improved and checks < max_checks:
        improved = False
        for candidate in _shrink_moves(target, case, tier):
            if checks >= max_checks:
                break
            if size_key(candidate) >= size_key(case):
                continue  # only strictly smaller: no move and its inverse taking turns
            got = _tier(target, candidate)
            if got is None or order.index(got) > order.index(tier):
                continue  # a minimal example stays in its tier (or a narrower one)
            checks += 1
            found = violation(prop, candidate, observe(target_name, candidate, impl, device))
            if found is not None:
                case, detail, improved = candidate, found, True
                break
    return case, detail


def _shrink_moves(target: Any, case: Case, tier: str) -> Any:
    """The shrink moves of a finding of ``tier``; a :data:`BEYOND` one also has its hazard
    draws' ``shrink_candidates``."""
    if tier != BEYOND:
        yield from shrink_candidates_for(target, case, tier)
        return
    yield from shrink_candidates_for(target, case, EXTENDED)
    draws = hazard_draws(target.name)
    if draws.shrink_candidates is not None:
        yield from guarded(draws.shrink_candidates(case))


def _scale_draws(target_name: str, device: str, seed: int) -> list[Case]:
    """The target's minimal production-scale cases (a flat index past ``2**31``: its device
    module's :meth:`~..targetkit.device.DeviceTarget.scale_minimal`) where ``device`` can hold
    them (:func:`~..targetkit.scale.unreachable`); none elsewhere."""
    from ..targetkit.scale import unreachable

    if not has_role(target_name, "device") or unreachable("device", device) is not None:
        return []
    dt = role(target_name, "device").DEVICE
    if not dt.scale:
        return []
    return dt.scale_minimal(dt.scale_case(np.random.default_rng(derive_seed(seed, "audit-scale", target_name))))


def audit_statistics(target_name: str, kernels: Any, device: str, seed: int = 0) -> tuple[list[str], list[str], list[str]]:
    """Run the target's statistics (``AUDIT.statistics``) on ``kernels`` (target name ->
    implementation): ``(held, failed lines, skipped lines)``."""
    a = audit_of(target_name)
    held: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    for st in () if a is None else a.statistics:
        have = {n: _lookup(kernels, n) for n in st.needs}
        missing = [n for n, k in have.items() if k is None]
        source = getattr(kernels, "source", None)
        if missing and source is not None:  # an audit of some targets: the others' kernels from the same source,
            more = source.load(missing).funcs  # as the source defines them (the statistic checks their interfaces)
            have |= {n: more[n] for n in missing if n in more}
            missing = [n for n, k in have.items() if k is None]
        if missing:
            skipped.append(f"{target_name}: {st.name}: the source lacks {', '.join(missing)}")
            continue
        try:
            found = st.check(have, device, seed)
        except NotApplicable as exc:
            skipped.append(f"{target_name}: {st.name}: {exc}")
            continue
        if found is None:
            held.append(st.name)
        else:
            cls = f" [{st.hazard_class}{' (' + st.source + ')' if st.source else ''}]" if st.hazard_class else ""
            failed.append(f"hazard: {target_name}: {st.name}{cls}\n  a caller relies on: {st.says}\n  broken: {found}")
    return held, failed, skipped


def _lookup(kernels: Any, name: str) -> Any:
    try:
        return kernels[name]
    except (KeyError, TypeError, LookupError):
        return None


def audit_target(target_name: str, impl: Any, device: str, *, scale: Scale = AUDIT_SCALE,
                 examples: int = 60, seed: int = 0,
                 on_progress: Callable[[str, int], None] | None = None, kernels: Any = None) -> TargetAudit:
    """Search both tiers of ``target_name`` for inputs that break its properties;
    ``on_progress(target, examples checked)`` after each example. ``kernels`` (target name ->
    implementation): the source's, for the target's statistics (``AUDIT.statistics``)."""
    target = TARGETS[target_name]
    props = PROPERTIES.get(target_name, ())
    result = TargetAudit(target_name)
    first: dict[str, dict[str, Case]] = {PRODUCTION: {}, EXTENDED: {}, BEYOND: {}}
    violating: dict[str, dict[str, int]] = {p.name: {} for p in props}
    draws = [PRODUCTION] + ([EXTENDED] if target.extended_features else [])
    draws += ["hazard"] if hazard_draws(target_name) is not None else []
    for draw in draws:
        for case in _draw(target_name, draw, scale, examples, seed):
            tier = draw if draw != "hazard" else _tier(target, case)
            result.searched[tier] = result.searched.get(tier, 0) + 1
            o = observe(target_name, case, impl, device)
            if o.error is not None:
                result.errors += 1
            for p in props:
                if violation(p, case, o) is not None:
                    violating[p.name][tier] = violating[p.name].get(tier, 0) + 1
                    first[tier].setdefault(p.name, case)
            if on_progress is not None:
                on_progress(target_name, sum(result.searched.values()))
    scale_cases = _scale_draws(target_name, device, seed)
    for case in scale_cases:  # production-scale cases (a GPU with room for them): minimal already
        result.searched[PRODUCTION] = result.searched.get(PRODUCTION, 0) + 1
        o = observe(target_name, case, impl, device)
        result.errors += o.error is not None
        for p in props:
            if violation(p, case, o) is not None:
                violating[p.name][PRODUCTION] = violating[p.name].get(PRODUCTION, 0) + 1
                first[PRODUCTION].setdefault(p.name, case)
        if on_progress is not None:
            on_progress(target_name, sum(result.searched.values()))
    if kernels is not None:
        held, failed, skipped = audit_statistics(target_name, kernels, device, seed)
        result.holds += held
        result.statistics_failed += failed
        result.statistics_skipped += skipped
    for p in props:
        tier = next((t for t in (PRODUCTION, EXTENDED, BEYOND) if p.name in first[t]), None)
        if tier is None:
            result.holds.append(p.name)
            continue
        if any(first[tier][p.name] is c for c in scale_cases):  # one row past 2**31, plain values: nothing to shrink
            case = first[tier][p.name]
            detail = violation(p, case, observe(target_name, case, impl, device)) or ""
        else:
            case, detail = shrink_hazard(target_name, p, first[tier][p.name], tier, impl, device)
        found = _tier(target, case) or tier
        edges = target.extended_features_of(case) if found == EXTENDED else frozenset()
        if found == BEYOND:
            edges = hazard_draws(target_name).hazards_of(case)
        result.hazards.append(Hazard(
            target_name, p, case, found, detail, tier == PRODUCTION,
            dict(result.searched), violating[p.name], edges,
        ))
    return result


def audit(names: Sequence[str], impls: Any, device: str, *, scale: Scale = AUDIT_SCALE, examples: int = 60,
          seed: int = 0, on_progress: Callable[[str, int], None] | None = None) -> list[TargetAudit]:
    """:func:`audit_target` for each of ``names`` that has properties (:data:`PROPERTIES`), with
    its implementation in ``impls``, on the device its source runs on."""

    device = device_for(getattr(impls, "source", None), device)
    untested = [n for n in getattr(impls, "untested", {}) if audit_of(n) is not None and audit_of(n).statistics]
    names = [n for n in names if n in PROPERTIES]
    warm_oracles(names)
    results = [audit_target(n, impls[n], device, scale=scale, examples=examples, seed=seed, on_progress=on_progress,
                            kernels=impls)
               for n in names]
    for n in untested:  # another interface: no case of it runs, but a statistic may run its kernels (by name)
        r = TargetAudit(n)
        held, r.statistics_failed, r.statistics_skipped = audit_statistics(n, _Raw(impls), device, seed)
        r.holds += held
        results.append(r)
    return results


class _Raw:
    """The source's kernels as it defines them, whatever their interface (a statistic checks it)."""

    def __init__(self, impls: Any) -> None:
        self.source = impls.source

    def __getitem__(self, name: str) -> Any:
        raise KeyError(name)
