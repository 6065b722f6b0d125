"""Fuzzing loops: Hypothesis-driven (shrinking, minimal reproducers) and bulk random batches.

Both run in chunks with seeds derived from one base seed, so that a run is reproducible from
its seed and can stop after a number of examples or a time budget at a chunk boundary.

Both run the target's tour of production extremes (:meth:`Target.extreme_cases`, one
cheap-but-large case per shape, cheapest first) at fixed places (:func:`tour_slots`): the
shapes the scale affords in its draws open the run (the first examples of chunk 0), the
costlier ones (under the interpreter, launches of a thousand programs and more, seconds each)
open chunk 1, so that a bug any ordinary case shows is not kept waiting behind them; in bulk
mode the same example indices. A shard runs them when it owns those chunks or examples.

Findings are shrunk within a time budget (:func:`default_shrink_budget`, ``$EAGLEFUZZ_SHRINK_BUDGET``
seconds): Hypothesis's own shrinker first (up to half of it, for cases it drew), then delta
debugging over the requests (drop halves, then quarters, ... before single requests), then the
target's other moves (shorten requests by halving, simplify values and launch parameters).
When the budget runs out, the smallest failing case found so far is reported, and says so.

In the extended domain (:mod:`.domains`, ``eaglefuzz fuzz``'s default) a target's run checks
its production tier first, with all of its examples (the same cases as a run of the production
domain), and then its extended tier, with as many examples drawn from the target's extended
strategy (:func:`~.domains.tiers_of`); a finding's tier is its case's. A contract violation
ends the target's run (its edges are not searched); an edge divergence ends the search of its
edges. With ``--keep-going`` both go on, and each distinct way of failing is reported once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from hypothesis import Phase, given, settings
from hypothesis import seed as hseed

from ..core.case import Case
from ..core.profiles import PROFILES
from ..generation.strategies import Scale, affordable, derive_seed, is_tour_case
from ..sources import Implementations
from ..targets import TARGETS
from .check import CaseJournal, DifferenceFound, Finding, check_case, signature
from .domains import EXTENDED, PRODUCTION, strategy_for, tiers_of
from .shrinking import Shrinker, failure

CHUNK = 25


def default_shrink_budget() -> float:
    """Seconds a finding may spend being shrunk (Hypothesis's shrinker and ours together):
    ``$EAGLEFUZZ_SHRINK_BUDGET`` (20 by default), read when it is needed, never at import (a
    warm server's workers take each command's)."""
    return float(os.environ.get("EAGLEFUZZ_SHRINK_BUDGET", "20"))


@dataclass
class Stats:
    """What a run of one target did: examples checked, output elements verified, features."""

    examples: int = 0
    """Cases drawn and checked (the tour's and the strategies'); a shrink attempt is not one."""
    shrink_attempts: int = 0
    """Smaller cases checked while shrinking a finding (Hypothesis's shrinker and ours)."""
    tokens: int = 0
    features: set[str] = field(default_factory=set)
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    unshrunk: Finding | None = None
    """A finding not yet shrunk (shrinking in progress): kept so an interrupt cannot lose it."""
    smallest: Finding | None = None
    """While :attr:`unshrunk` is being shrunk, the smallest case that fails the same way so far
    (``None`` until a step succeeds): what an interrupt reports."""
    stages: dict[str, float] = field(default_factory=dict)
    """Device mode: seconds spent per stage (:data:`~.device_mode.engine.STAGES`)."""
    cross_checked: int = 0
    """Device mode: cases also checked against the NumPy and Numba oracles."""
    warmup: float = 0.0
    """Device mode: seconds of the first examples, where Triton compiles the kernel."""
    batches: list[tuple[int, int]] = field(default_factory=list)
    """Device mode, where the run was asked to keep them (a benchmark's): the batches checked, in
    order, each its index in the run and the cases asked of it (:func:`~.device_mode.engine.batch_of`
    draws it again: the kernel alone launches exactly the cases the run checked)."""
    oom_retries: int = 0
    """Device mode: batches drawn and checked again after the GPU ran out of memory (lanes
    sharing one GPU: :func:`~.device_mode.memory.fitting`)."""
    toured: set[str] = field(default_factory=set)
    """Ordinary (not extreme) features that cases of the tour's shapes reached: not counted in
    :attr:`features`, which holds the ordinary features the generator body's cases reached and
    the production extremes reached by any case (the tour's are there for them)."""
    edges: set[str] = field(default_factory=set)
    """Edges of the extended tier reached (:attr:`~..targetkit.base.Target.extended_features`)."""
    tiers: dict[str, int] = field(default_factory=dict)
    """Examples checked per tier (the case's own tier, not the generator's)."""
    searched: list[str] = field(default_factory=list)
    """The tiers whose search ran, in order (:func:`~.domains.tiers_of`; a contract violation
    ends a run before its extended tier)."""
    keys: dict[tuple, Finding] = field(default_factory=dict)
    """Signatures (:func:`~.check.signature`) of the findings reported (of each as found and
    as shrunk), with the finding: a later case that fails the same way (an edge divergence,
    or any finding with ``--keep-going``) is counted for it, not reported again."""
    again: dict[int, int] = field(default_factory=dict)
    """``id`` of a finding -> how many later cases failed the same way."""

    def record(self, target_name: str, case: Case, domain: str = PRODUCTION) -> None:
        target = TARGETS[target_name]
        self.examples += 1
        self.tokens += target.output_tokens(case)
        tier = target.tier_of(case, domain) if domain == EXTENDED else PRODUCTION
        self.tiers[tier] = self.tiers.get(tier, 0) + 1
        if tier == PRODUCTION:
            self.reach(target_name, case)
        else:
            self.edges |= target.extended_features_of(case)

    def reach(self, target_name: str, case: Case) -> None:
        """Count the production features ``case`` reaches: all of them for a case the generator
        body drew; for one built from a tour's shape (:func:`is_tour_case`), its production
        extremes in :attr:`features` and its ordinary features in :attr:`toured` only."""
        target = TARGETS[target_name]
        reached = target.features_of(case)
        if is_tour_case(case):
            self.toured |= reached - set(target.extremes)
            reached = reached & set(target.extremes)
        self.features |= reached

    @property
    def contract_findings(self) -> list[Finding]:
        """The findings that are not edge divergences."""
        return [f for f in self.findings if not f.is_edge]

    def seen(self, finding: Finding, *, count: bool = True) -> bool:
        """Whether a finding like ``finding`` was already reported in this run; if so and
        ``count``, it is counted for that one (:meth:`met`)."""
        first = self.keys.get(signature(finding))
        if first is None:
            return False
        if count:
            self.again[id(first)] = self.again.get(id(first), 0) + 1
        return True

    def met(self, finding: Finding) -> int:
        """How many cases of this run failed the way ``finding`` does (itself included)."""
        return 1 + self.again.get(id(finding), 0)

    def add(self, finding: Finding) -> Finding:
        """Report ``finding`` (its case as found was :attr:`unshrunk`): later cases that fail
        the same way are counted for it. A finding that shrank into one already reported (the
        same outputs and regions differ: the same minimal case, as a rule) is not reported
        again: it is counted for that one, which is returned. The features (or edges) of the
        reported case count as reached."""
        first = self.keys.get(signature(finding))
        if first is None:
            self.findings.append(finding)
            first = finding
            self._reached(finding)
        else:
            self.again[id(first)] = self.again.get(id(first), 0) + 1
        for f in (finding, self.unshrunk):
            if f is not None:
                self.keys.setdefault(signature(f), first)
        self.unshrunk = self.smallest = None
        return first

    def _reached(self, finding: Finding) -> None:
        target = TARGETS[finding.case.kernel]
        if finding.tier == PRODUCTION:
            self.reach(finding.case.kernel, finding.case)
        else:
            self.edges |= target.extended_features_of(finding.case)



class _HypothesisShareSpent(BaseException):
    """Raised in a Hypothesis run once its share of the shrink budget is spent: a BaseException,
    so that Hypothesis does not take it for a failure of its own and stops at once."""

def hypothesis_chunk(
    name: str,
    impls: Implementations,
    device: str,
    scale: Scale,
    *,
    seed: int,
    max_examples: int,
    shrink: bool = True,
    stats: Stats | None = None,
    on_progress: Callable[[Stats], None] | None = None,
    journal: CaseJournal | None = None,
    shrink_budget: float | None = None,
    tier: str = PRODUCTION,
) -> Finding | None:
    """Run ``max_examples`` Hypothesis examples of target ``name`` drawn from ``tier``'s
    strategy; the shrunk finding, if any."""
    target = TARGETS[name]
    stats = stats if stats is not None else Stats()
    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    budget = default_shrink_budget() if shrink_budget is None else shrink_budget
    latest: list[Finding] = []  # the last failing case: the smallest Hypothesis has accepted
    first_failure: list[float] = []

    # One finding per run: Hypothesis would otherwise group the failures it tells apart by the
    # line that raised into an ExceptionGroup.
    @settings(PROFILES["ci"], max_examples=max_examples, database=None, phases=phases,
              report_multiple_bugs=False)
    @hseed(seed)
    @given(strategy_for(target, tier, scale))
    def run(case: Case) -> None:
        if first_failure and time.monotonic() - first_failure[0] > budget / 2:
            # Hypothesis's share of the shrink budget is spent. Its shrinker redraws every
            # candidate from the strategy (tens of ms for a large batch), so candidates that
            # merely pass unchecked could still take minutes: end it here.
            raise _HypothesisShareSpent
        if first_failure:  # Hypothesis's shrinking phase (it draws no new example after a failure)
            stats.shrink_attempts += 1
        else:
            stats.record(name, case, tier)
        finding = check_case(case, impls, device, journal, domain=tier)
        if finding is not None and stats.seen(finding, count=not first_failure):
            # a shrink candidate that fails like a finding already reported is passed over, so
            # that the shrinker keeps to the new way of failing
            finding = None
        if finding is not None and stats.unshrunk is None:
            stats.unshrunk = finding
        elif finding is not None and failure(finding) == failure(stats.unshrunk):  # Hypothesis's shrinker's
            stats.smallest = finding
        if on_progress is not None:
            on_progress(stats)
        if finding is not None:
            if not first_failure:
                first_failure.append(time.monotonic())
            latest[:] = [finding]
            if finding.fatal:  # no case can run after it here, not even Hypothesis's replay
                raise _HypothesisShareSpent
            raise DifferenceFound(finding)

    try:
        run()
    except (DifferenceFound, _HypothesisShareSpent) as exc:
        # Hypothesis shrinks the draws; the target's own moves (drop any request, shorten one)
        # then reach what fixed-size draws cannot.
        found = exc.finding if isinstance(exc, DifferenceFound) else latest[0]
        if not shrink:
            return found
        left = budget - (time.monotonic() - first_failure[0]) if first_failure else budget
        return shrink_finding(found, impls, device, journal=journal, budget_s=max(left, budget / 4), stats=stats)
    return None


def tour_step(
    name: str,
    impls: Implementations,
    device: str,
    case: Case,
    *,
    stats: Stats,
    shrink: bool,
    on_progress: Callable[[Stats], None] | None,
    journal: CaseJournal | None,
    tier: str = PRODUCTION,
) -> Finding | None:
    """Check one case outside Hypothesis (a tour case or a bulk example, drawn for ``tier``);
    shrink a finding."""
    stats.record(name, case, tier)
    finding = check_case(case, impls, device, journal, domain=tier)
    if finding is not None and stats.seen(finding):
        finding = None
    if finding is not None:
        stats.unshrunk = finding
        if on_progress is not None:
            on_progress(stats)
        finding = shrink_finding(finding, impls, device, journal=journal, stats=stats) if shrink else finding
    if on_progress is not None:
        on_progress(stats)
    return finding


def tour(name: str, scale: Scale, seed: int) -> list[Case]:
    """The tour of production extremes of a run of ``name`` with base seed ``seed``, cheapest
    first (where each case runs: :func:`tour_slots`)."""
    target = TARGETS[name]
    return target.extreme_cases(np.random.default_rng(derive_seed(seed, name, "tour")), scale)


def tour_slots(name: str, scale: Scale) -> list[int]:
    """The example index at which each case of :func:`tour` runs.

    The shapes that ``scale`` affords in its Hypothesis draws (:func:`~..generation.strategies.affordable`:
    on a GPU all of them) come first, at ``0, 1, ...``; the others, at ``CHUNK, CHUNK + 1, ...``
    (the start of chunk 1). So a default run (100 examples) still reaches every extreme, and a
    short one, or a bug that an ordinary case shows, does not pay for a thousand-program launch
    under the interpreter first.
    """
    shapes = TARGETS[name].shapes
    n = len(affordable(shapes, scale))
    return list(range(n)) + [CHUNK + k for k in range(len(shapes) - n)]


def fuzz_target(
    name: str,
    impls: Implementations,
    device: str,
    scale: Scale,
    *,
    seed: int = 0,
    examples: int | None = 100,
    time_budget: float | None = None,
    shrink: bool = True,
    stop_on_finding: bool = True,
    on_progress: Callable[[Stats], None] | None = None,
    chunk_offset: int = 0,
    chunk_step: int = 1,
    journal: CaseJournal | None = None,
    stats: Stats | None = None,
    domain: str = PRODUCTION,
    tiers: Sequence[str] | None = None,
) -> Stats:
    """Fuzz target ``name``: each tier of ``domain`` in turn (:func:`~.domains.tiers_of`:
    production, then in the extended domain the extended tier), ``examples`` examples each, or
    an even share of ``time_budget`` seconds each (a tier that ends early leaves its time to
    the next); ``tiers`` names the tiers to run instead (a caller that needs only the extended
    tier's search: the same cases as that part of a run of the extended domain).

    Chunk ``i`` of the production tier runs with seed ``derive_seed(seed, name, i)`` (so the
    production tier of any domain draws the same cases), chunk ``i`` of the extended tier with
    ``derive_seed(seed, name, "extended", i)``; chunks 0 and 1 of the production tier open
    with the cases of the tour of production extremes (:func:`tour`) that :func:`tour_slots`
    puts there. ``chunk_offset``/``chunk_step`` select a disjoint share of the chunks (sharding
    across machines). ``stats`` (filled in place) lets a caller see what was found when an
    interrupt cuts the run short. With ``stop_on_finding`` the first finding ends the run (a
    contract violation: the extended tier is not searched).
    """
    stats = stats if stats is not None else Stats()
    tour_chunks: dict[int, list[Case]] = {}
    for slot, case in zip(tour_slots(name, scale), tour(name, scale, seed), strict=True):
        tour_chunks.setdefault(slot // CHUNK, []).append(case)

    def production(i: int, remaining: int | None) -> Finding | None:
        share = CHUNK if remaining is None else min(CHUNK, remaining)
        for case in tour_chunks.get(i, [])[:share]:  # the tour's cases open the chunk
            finding = tour_step(name, impls, device, case, stats=stats, shrink=shrink,
                                on_progress=on_progress, journal=journal)
            share -= 1
            if finding is not None:
                return finding
        if share <= 0:
            return None
        return hypothesis_chunk(name, impls, device, scale, seed=derive_seed(seed, name, i), max_examples=share,
                                shrink=shrink, stats=stats, on_progress=on_progress, journal=journal)

    def extended(i: int, remaining: int | None) -> Finding | None:
        share = CHUNK if remaining is None else min(CHUNK, remaining)
        return hypothesis_chunk(name, impls, device, scale, seed=derive_seed(seed, name, EXTENDED, i),
                                max_examples=share, shrink=shrink, stats=stats, on_progress=on_progress,
                                journal=journal, tier=EXTENDED)

    steps = {PRODUCTION: production, EXTENDED: extended}
    return _tiers(stats, [(t, steps[t]) for t in (tiers or tiers_of(domain))], examples, time_budget,
                  stop_on_finding, chunk_offset, chunk_step)


def _tiers(
    stats: Stats,
    steps: list[tuple[str, Callable[[int, int | None], Finding | None]]],
    examples: int | None,
    time_budget: float | None,
    stop_on_finding: bool,
    offset: int,
    stride: int,
) -> Stats:
    """Run each tier's step in turn (:func:`_loop`), ``examples`` each or an even share of
    ``time_budget`` (what one leaves goes to the next); a finding that ends the run
    (:func:`_loop`) ends it before the next tier. :attr:`Stats.searched` lists the tiers run."""
    start = time.monotonic()
    for k, (tier, step) in enumerate(steps):
        if stats.findings and (stop_on_finding or any(f.fatal for f in stats.findings)):
            break
        left = None if time_budget is None else start + time_budget * (k + 1) / len(steps) - time.monotonic()
        if left is not None and left <= 0:
            continue
        stats.searched.append(tier)
        _loop(stats, step, examples, left, stop_on_finding, offset, stride)
    stats.seconds = time.monotonic() - start
    return stats


def _loop(
    stats: Stats,
    step: Callable[[int, int | None], Finding | None],
    examples: int | None,
    time_budget: float | None,
    stop_on_finding: bool,
    offset: int,
    stride: int,
) -> Stats:
    """Run ``step(i, examples left)`` for ``i = offset, offset + stride, ...`` until ``examples``
    more examples are checked or the time budget is spent, or a step finds something that
    ends the run: with ``stop_on_finding`` any finding, else a fatal one (the device is lost)."""
    start = time.monotonic()
    base, seconds = stats.examples, stats.seconds
    i = offset
    while (examples is None or stats.examples - base < examples) and (
        time_budget is None or time.monotonic() - start < time_budget
    ):
        remaining = None if examples is None else examples - (stats.examples - base)
        elapsed = time.monotonic() - start
        if time_budget is not None and stats.examples > base and elapsed > 0:
            # Size the next step to the time left at the rate seen so far, so a budget is
            # overshot by about one example rather than one whole chunk.
            fits = max(1, int((time_budget - elapsed) * (stats.examples - base) / elapsed))
            remaining = fits if remaining is None else min(remaining, fits)
        finding = step(i, remaining)
        i += stride
        if finding is not None:
            stats.add(finding)
        stats.seconds = seconds + time.monotonic() - start
        if finding is not None and (finding.fatal or stop_on_finding):
            break
    return stats


def shrink_finding(
    finding: Finding,
    impls: Implementations,
    device: str,
    *,
    max_checks: int = 2000,
    journal: CaseJournal | None = None,
    budget_s: float | None = None,
    stats: Stats | None = None,
) -> Finding:
    """Shrink a finding to a small case that still fails the same way, within ``budget_s``.

    For a target that splits its cases into requests (:meth:`Target.split_requests`), delta
    debugging over the requests first (:func:`.shrinking.ddmin`), then greedily the target's
    other moves (:meth:`Target.shrink_moves`: shorten requests, simplify values and launch
    parameters), repeated while either makes progress. Other targets: greedily their
    ``shrink_candidates``; for an edge divergence the target's ``extended_shrink_candidates``
    too. A variant outside the finding's tier is passed over (an edge divergence may shrink
    into a production case that still fails the same way: a contract violation). Everything runs in
    this process (compiled kernels and oracles are reused). When the budget (default
    :func:`default_shrink_budget`) or ``max_checks`` runs out, the smallest failing case so far is
    returned, with :attr:`Finding.shrink` saying so. The checks are counted in ``stats``
    (:attr:`Stats.shrink_attempts`).
    """
    if finding.fatal:  # no candidate can run in this process

        return replace(finding, shrink="not shrunk: the device became unusable (a sticky CUDA error); "
                       "the CLI shrinks such a case in fresh processes")

    def step(smaller: Finding) -> None:
        if stats is not None:
            stats.smallest = smaller

    shrinker = Shrinker(finding, impls, device, journal=journal, max_checks=max_checks,
                        budget_s=default_shrink_budget() if budget_s is None else budget_s, on_step=step)
    try:
        return shrinker.run()
    finally:
        if stats is not None:
            stats.shrink_attempts += shrinker.checks


def bulk_fuzz_target(
    name: str,
    impls: Implementations,
    device: str,
    scale: Scale,
    *,
    seed: int = 0,
    examples: int | None = 100,
    time_budget: float | None = None,
    shrink: bool = True,
    stop_on_finding: bool = True,
    on_progress: Callable[[Stats], None] | None = None,
    chunk_offset: int = 0,
    chunk_step: int = 1,
    journal: CaseJournal | None = None,
    stats: Stats | None = None,
    domain: str = PRODUCTION,
    tiers: Sequence[str] | None = None,
) -> Stats:
    """Like :func:`fuzz_target`, with cases drawn by the target's NumPy generator.

    Example ``i`` of the production tier is drawn from ``derive_seed(seed, name, "bulk", i)``:
    those at :func:`tour_slots` are the tour of production extremes (one case of each of the
    target's shapes), the others come from the target's ``random_case``. Example ``i`` of the
    extended tier is the target's ``extended_case`` drawn from ``derive_seed(seed, name,
    "bulk", "extended", i)``. Shards take every ``chunk_step``-th example from
    ``chunk_offset``. Findings are shrunk by :func:`shrink_finding`.
    """
    target = TARGETS[name]
    stats = stats if stats is not None else Stats()
    shape_at = {slot: shape for slot, shape in zip(tour_slots(name, scale), target.shapes, strict=True)}

    def production(i: int, remaining: int | None) -> Finding | None:
        rng = np.random.default_rng(derive_seed(seed, name, "bulk", i))
        case = shape_at[i].case(rng, scale) if i in shape_at else target.random_case(rng, scale)
        return tour_step(name, impls, device, case, stats=stats, shrink=shrink,
                         on_progress=on_progress, journal=journal)

    def extended(i: int, remaining: int | None) -> Finding | None:
        rng = np.random.default_rng(derive_seed(seed, name, "bulk", EXTENDED, i))
        return tour_step(name, impls, device, target.extended_case(rng, scale), stats=stats, shrink=shrink,
                         on_progress=on_progress, journal=journal, tier=EXTENDED)

    steps = {PRODUCTION: production, EXTENDED: extended}
    return _tiers(stats, [(t, steps[t]) for t in (tiers or tiers_of(domain))], examples, time_budget,
                  stop_on_finding, chunk_offset, chunk_step)
