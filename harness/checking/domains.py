"""Domain tiers: which inputs a run draws, and how a finding on each is classified.

* ``production``: the harness's domain, what each target's ``validate`` accepts (vLLM's
  production inputs plus the extensions the contract's N.4 lists as *generated*). A
  difference there is a contract violation.
* ``extended`` (the default of ``eaglefuzz fuzz``): the production tier plus every input the
  contract's N.4 lists as *not generated* where the reference kernel's behaviour is still
  defined (no out-of-bounds access, no result that depends on the order of program
  instances). The oracles model the reference there too. A difference on such an input is an
  *edge divergence*: the implementation parts from the reference where production's current
  callers never go (other callers, forks and the next caller may). It is reported apart from
  contract violations, with its own exit code, and stored in the corpus with its tier. A run
  of this domain checks the production tier first, then the edges (:func:`tiers_of`).

A finding's tier is a property of its case (:meth:`~..targetkit.base.Target.tier_of`), never of
the generator that drew it: a production-tier case drawn by an extended strategy is a
production case.
"""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import strategies as st

from ..core.case import Case
from ..generation.strategies import Scale
from ..targetkit.base import EXTENDED, PRODUCTION, TIERS, Target

DOMAINS = TIERS
"""The domains a run can draw from, narrow to wide (``--domain``)."""


def strategy_for(target: Target, tier: str, scale: Scale) -> st.SearchStrategy[Case]:
    """The Hypothesis strategy of ``target`` for ``tier``."""
    return target.extended_strategy(scale) if tier == EXTENDED else target.strategy(scale)


def default_domain(mode: str) -> str:
    """The domain of a run given none: the extended one (the production tier, then the edges),
    except in device mode, which draws production cases only."""
    return PRODUCTION if mode == "device" else EXTENDED


def tiers_of(domain: str) -> tuple[str, ...]:
    """The tiers a run of ``domain`` checks, in the order it checks them: the production tier
    alone, or (the extended domain, ``eaglefuzz fuzz``'s default) the production tier first
    and then the extended tier's edges, each with its own examples (or its share of the time).

    A target's run ends at its first contract violation (unless ``--keep-going``): its edges
    are not searched then. An edge divergence ends the edges' search likewise; the production
    tier was searched in full before it, so a run that reports only edge divergences kept the
    contract on every production example it drew.
    """
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r} (known: {', '.join(DOMAINS)})")
    return DOMAINS[: DOMAINS.index(domain) + 1]


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
