"""Domain tiers: which inputs a run draws, and how a finding on each is classified.

* ``production`` (the default): the harness's domain, what each target's ``validate`` accepts
  (vLLM's production inputs plus the extensions the contract's N.4 lists as *generated*). A
  difference there is a contract violation.
* ``extended``: the production tier plus every input the contract's N.4 lists as *not
  generated* where the reference kernel's behaviour is still defined (no out-of-bounds access,
  no result that depends on the order of program instances). The oracles model the reference
  there too. A difference on such an input is an *edge divergence*: the implementation parts
  from the reference where production never goes. It is reported apart from contract
  violations, with its own exit code, and stored in the corpus with its tier.

A finding's tier is a property of its case (:meth:`~..targetkit.base.Target.tier_of`), never of
the generator that drew it: a production-tier case drawn by an extended strategy is a
production case.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from hypothesis import strategies as st

from ..core.case import Case
from ..generation.strategies import Scale
from ..targetkit.base import EXTENDED, PRODUCTION, TIERS, Target

DOMAINS = TIERS
"""The domains a run can draw from, narrow to wide (``--domain``)."""


def strategy_for(target: Target, tier: str, scale: Scale) -> st.SearchStrategy[Case]:
    """The Hypothesis strategy of ``target`` for ``tier``."""
    return target.extended_strategy(scale) if tier == EXTENDED else target.strategy(scale)


def case_for(target: Target, tier: str, rng: np.random.Generator, scale: Scale) -> Case:
    """One NumPy-drawn case of ``target`` for ``tier`` (bulk mode)."""
    return target.extended_case(rng, scale) if tier == EXTENDED else target.random_case(rng, scale)


def tier_for_step(domain: str, step: int, extended_done: bool) -> str:
    """The tier that bulk example ``step`` draws from (a Hypothesis chunk: :func:`tier_shares`).

    In the extended domain, odd examples draw edges and even ones production cases, so half of
    the run checks the production tier however many edges diverge; after an edge divergence
    (``extended_done``: a run that stops at its first finding) every step draws production
    cases, so a run that reports only edge divergences has spent its budget looking for
    contract violations too. With ``--keep-going`` the edges keep being drawn, and each
    distinct way of diverging is reported once.
    """
    if domain != EXTENDED or extended_done:
        return PRODUCTION
    return EXTENDED if step % 2 else PRODUCTION


def tier_shares(domain: str, size: int, extended_done: bool) -> list[tuple[str, int]]:
    """How a Hypothesis chunk of ``size`` examples is shared among the tiers, in order.

    In the extended domain the first half of every chunk (rounded up) draws production cases
    and the rest edges, so a run of any length of two examples or more checks both tiers from
    its first chunk on, half each (``--examples 10``: 5 and 5); after an edge divergence
    (``extended_done``, as for :func:`tier_for_step`) the whole chunk is production.
    """
    if domain != EXTENDED or extended_done:
        return [(PRODUCTION, size)]
    return [(PRODUCTION, size - size // 2), (EXTENDED, size // 2)]


def guarded(moves: Iterator[Case]) -> Iterator[Case]:
    """``moves`` until one of them fails to apply: a production move written for production
    cases may not fit an edge case (an empty request, a negative count); it ends early then."""
    while True:
        try:
            candidate = next(moves)
        except StopIteration:
            return
        except (ValueError, IndexError, KeyError, TypeError, OverflowError, ZeroDivisionError):
            return
        yield candidate


def shrink_candidates_for(target: Target, case: Case, tier: str) -> Iterator[Case]:
    """Smaller variants of ``case`` for a finding of ``tier``: the target's
    ``shrink_candidates``, and in the extended tier its edge moves too."""
    yield from guarded(target.shrink_candidates(case))
    if tier == EXTENDED:
        yield from guarded(target.extended_shrink_candidates(case))
