"""Fuzzing loops: Hypothesis-driven (shrinking, minimal reproducers) and bulk random batches.

Both run in chunks with seeds derived from one base seed, so that a run is reproducible from
its seed and can stop after a number of examples or a time budget at a chunk boundary.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from hypothesis import Phase, given, settings
from hypothesis import seed as hseed

from .case import Case
from .check import DifferenceFound, Finding, check_case
from .domains import EXTENDED, PRODUCTION, case_for, shrink_moves, strategy_for, tier_for_step
from .journal import Journal
from .profiles import PROFILES
from .sources import Implementations
from .strategies import Scale, derive_seed
from .targets import TARGETS

CHUNK = 25


@dataclass
class Stats:
    """What a run of one target did: examples checked, output elements verified, features."""

    examples: int = 0
    tokens: int = 0
    features: set[str] = field(default_factory=set)
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    unshrunk: Finding | None = None
    """A finding not yet shrunk (shrinking in progress): kept so an interrupt cannot lose it."""
    edges: set[str] = field(default_factory=set)
    """Edges of the extended tier reached (:attr:`~.targets.base.Target.extended_features`)."""
    tiers: dict[str, int] = field(default_factory=dict)
    """Examples checked per tier (the case's own tier, not the generator's)."""
    edge_keys: set[tuple] = field(default_factory=set)
    """Signatures (:func:`~.replay.signature`) of the edge divergences found: with
    ``--keep-going`` a case that diverges the same way again is passed over, not re-reported."""

    def record(self, target_name: str, case: Case, domain: str = PRODUCTION) -> None:
        target = TARGETS[target_name]
        self.examples += 1
        self.tokens += target.output_tokens(case)
        tier = target.tier_of(case, domain) if domain == EXTENDED else PRODUCTION
        self.tiers[tier] = self.tiers.get(tier, 0) + 1
        if tier == PRODUCTION:
            self.features |= target.features_of(case)
        else:
            self.edges |= target.extended_features_of(case)

    @property
    def contract_findings(self) -> list[Finding]:
        """The findings that are not edge divergences."""
        return [f for f in self.findings if not f.is_edge]


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
    journal: Journal | None = None,
    tier: str = PRODUCTION,
) -> Finding | None:
    """Run ``max_examples`` Hypothesis examples of target ``name`` drawn from ``tier``'s
    strategy; the shrunk finding, if any."""
    target = TARGETS[name]
    stats = stats if stats is not None else Stats()
    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)

    @settings(PROFILES["ci"], max_examples=max_examples, database=None, phases=phases)
    @hseed(seed)
    @given(strategy_for(target, tier, scale))
    def run(case: Case) -> None:
        stats.record(name, case, tier)
        finding = check_case(case, impls, device, journal, domain=tier)
        if finding is not None and finding.is_edge and _seen(stats, finding):
            finding = None
        if finding is not None and stats.unshrunk is None:
            stats.unshrunk = finding
        if on_progress is not None:
            on_progress(stats)
        if finding is not None:
            raise DifferenceFound(finding)

    try:
        run()
    except DifferenceFound as exc:
        # Hypothesis shrinks the draws; the target's own moves (drop any request, shorten one)
        # then reach what fixed-size draws cannot.
        return shrink_finding(exc.finding, impls, device, journal=journal) if shrink else exc.finding
    return None


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
    journal: Journal | None = None,
    stats: Stats | None = None,
    domain: str = PRODUCTION,
) -> Stats:
    """Fuzz target ``name`` until ``examples`` are checked or ``time_budget`` seconds pass.

    Chunk ``i`` runs with seed ``derive_seed(seed, name, i)`` (in the production domain; the
    extended domain adds the tier to the key) and draws from the tier
    :func:`~.domains.tier_for_step` gives; ``chunk_offset``/``chunk_step``
    select a disjoint share of the chunks (sharding across machines). ``stats`` (filled in
    place) lets a caller see what was found when an interrupt cuts the run short.
    """
    stats = stats if stats is not None else Stats()

    def chunk(i: int, remaining: int | None) -> Finding | None:
        tier = tier_for_step(domain, i, stop_on_finding and any(f.is_edge for f in stats.findings))
        key = (name, i) if domain == PRODUCTION else (name, tier, i)
        return hypothesis_chunk(
            name, impls, device, scale, seed=derive_seed(seed, *key),
            max_examples=CHUNK if remaining is None else min(CHUNK, remaining), shrink=shrink,
            stats=stats, on_progress=on_progress, journal=journal, tier=tier,
        )

    return _loop(stats, chunk, examples, time_budget, stop_on_finding, chunk_offset, chunk_step)


def _loop(
    stats: Stats,
    step: Callable[[int, int | None], Finding | None],
    examples: int | None,
    time_budget: float | None,
    stop_on_finding: bool,
    offset: int,
    stride: int,
) -> Stats:
    """Run ``step(i, examples left)`` for ``i = offset, offset + stride, ...`` until the
    examples or the time budget are spent, or (with ``stop_on_finding``) a step finds a
    contract violation. An edge divergence does not stop the run: the steps after it draw
    production cases only (:func:`~.domains.tier_for_step`)."""
    start = time.monotonic()
    i = offset
    while (examples is None or stats.examples < examples) and (
        time_budget is None or time.monotonic() - start < time_budget
    ):
        remaining = None if examples is None else examples - stats.examples
        elapsed = time.monotonic() - start
        if time_budget is not None and stats.examples and elapsed > 0:
            # Size the next step to the time left at the rate seen so far, so a budget is
            # overshot by about one example rather than one whole chunk.
            fits = max(1, int((time_budget - elapsed) * stats.examples / elapsed))
            remaining = fits if remaining is None else min(remaining, fits)
        finding = step(i, remaining)
        i += stride
        if finding is not None:
            stats.findings.append(finding)
            if finding.is_edge:
                from .replay import signature

                stats.edge_keys |= {signature(f) for f in (finding, stats.unshrunk) if f is not None}
            stats.unshrunk = None
        stats.seconds = time.monotonic() - start
        if finding is not None and stop_on_finding and not finding.is_edge:
            break
    stats.seconds = time.monotonic() - start
    return stats


def shrink_finding(
    finding: Finding, impls: Implementations, device: str, *, max_checks: int = 400, journal: Journal | None = None
) -> Finding:
    """Greedily shrink a finding: take the first smaller variant that still fails, repeat.

    Variants come from the target's ``shrink_candidates`` (drop requests, shorten them,
    simplify values and launch parameters), and for an edge divergence its
    ``extended_shrink_candidates`` too; a variant outside the finding's tier is passed over.
    A contract violation stays in the production tier; an edge divergence may shrink into a
    production case that still fails the same way, which makes it a contract violation.
    """
    from .targets import ContractViolation

    target = TARGETS[finding.case.kernel]
    checks = 0
    improved = True

    def failure(f: Finding) -> str:
        o = f.outcome
        return "oracle disagreement" if o.oracle_disagreements else "crash" if o.crash else "difference"

    while improved and checks < max_checks:
        improved = False
        for candidate in shrink_moves(target, finding.case, finding.tier):
            if checks >= max_checks:
                break
            try:
                target.tier_of(candidate, finding.tier)
            except ContractViolation:
                continue
            checks += 1
            smaller = check_case(candidate, impls, device, journal, domain=finding.tier)
            if smaller is not None and failure(smaller) == failure(finding):
                finding = smaller
                improved = True
                break
    return finding


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
    journal: Journal | None = None,
    stats: Stats | None = None,
    domain: str = PRODUCTION,
) -> Stats:
    """Like :func:`fuzz_target`, with cases drawn by the target's NumPy generator.

    Example ``i`` is drawn from ``derive_seed(seed, name, "bulk", i)`` (the extended domain
    adds the tier to the key); shards take every ``chunk_step``-th example from
    ``chunk_offset``. Findings are shrunk by :func:`shrink_finding`.
    """
    target = TARGETS[name]
    stats = stats if stats is not None else Stats()

    def one(i: int, remaining: int | None) -> Finding | None:
        tier = tier_for_step(domain, i, stop_on_finding and any(f.is_edge for f in stats.findings))
        key = (name, "bulk", i) if domain == PRODUCTION else (name, "bulk", tier, i)
        case = case_for(target, tier, np.random.default_rng(derive_seed(seed, *key)), scale)
        stats.record(name, case, tier)
        finding = check_case(case, impls, device, journal, domain=tier)
        if finding is not None and finding.is_edge and _seen(stats, finding):
            finding = None
        if finding is not None:
            stats.unshrunk = finding
            if on_progress is not None:
                on_progress(stats)
            finding = shrink_finding(finding, impls, device, journal=journal) if shrink else finding
        if on_progress is not None:
            on_progress(stats)
        return finding

    return _loop(stats, one, examples, time_budget, stop_on_finding, chunk_offset, chunk_step)


def _seen(stats: Stats, finding: Finding) -> bool:
    """Whether an edge divergence like ``finding`` was already reported in this run."""
    from .replay import signature

    return signature(finding) in stats.edge_keys
