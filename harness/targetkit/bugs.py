"""A seeded bug, as a target folder's ``bugs.py`` records it: a one-edit mutant of the target's
production code that the fuzzer must catch.

A mutant names its target, states its bug, and lists its edits as ``(old, new)`` text
replacements; each ``old`` occurs exactly once in the target's source. ``tests/seeded_bugs/
mutants.py`` applies them to the function as its module holds it today and writes an altered
copy that ``--kernels`` loads (so the bugs follow the production code as it changes), and
``tests/test_seeded_bugs.py`` checks that a default run catches each one.
"""

from __future__ import annotations

from dataclasses import dataclass

BUNDLED = "bundled"
"""The module of the bundled copy, ``kernels/spec_decode_utils.py``."""
PRODUCTION_TIER, EXTENDED_TIER = "production", "extended"
"""The tiers a seeded bug can belong to (:attr:`Mutant.tier`)."""
V033 = "vllm-release:0.33.0"
"""vLLM 0.33.0's module: for the targets the bundled copy predates."""


@dataclass(frozen=True)
class Mutant:
    """One seeded bug: ``edits`` turn ``target``'s production source into the buggy one.

    ``module``: where that source is, ``"bundled"`` (kernels/spec_decode_utils.py) or
    ``"vllm-release:X.Y.Z"`` (that release's module of the target, its ``Target.module``).
    ``extreme``: for a bug that only production-sized inputs expose, the feature of the
    target's ``extremes`` a case needs for it to show (empty for the others).
    ``crash``: the bug *is* a crash: on the inputs that expose it the code raises (an index
    past the table that production's clamp keeps it from, a shape that no longer matches)
    where production runs, and runs on other inputs. Only such a mutant may be caught by a
    ``crash`` finding; any other must give a ``difference`` (one that raises instead is broken).
    ``tier``: ``"production"`` for a bug that production-tier inputs expose (a contract
    violation); ``"extended"`` for one that is identical to the production code on every input
    of the production tier (docs/CONTRACT.md N.2) and differs only outside it: it is caught as
    an edge divergence of an extended run (``--domain extended``), never as a contract
    violation.
    """

    name: str
    target: str
    bug: str
    edits: tuple[tuple[str, str], ...]
    module: str = BUNDLED
    extreme: str = ""
    crash: bool = False
    tier: str = "production"
    exact_division: bool = False
    """The bug shows only where the contract fixes a quotient bit for bit (the division window
    of docs/CONTRACT.md §11.3): compiled, a division within 2 ulps may decide such an input
    either way, so the bug cannot be told from production there; it is caught under the
    interpreter (and on the CPU port), which divides exactly."""
    scale: str = ""
    """For a bug that only a production-scale case shows, the scale feature of the target it
    needs (``Target.scale_features``: a table past ``2**31`` elements, whose int32 row offsets
    wrap: the pre-fix forms of vLLM #46560 and #47383): caught by ``--mode device`` on a GPU
    with the memory for such tables, never by a run on the CPU, whose tests say so."""
    racy: bool = False
    """The mutant's programs write shared elements: on a GPU they race, so a finding need not
    reproduce the same way when replayed; it is caught under the interpreter, whose programs
    run one after another."""


def edit(old: str, new: str) -> tuple[str, str]:
    """One text replacement of a mutant: ``old`` (found exactly once) becomes ``new``."""
    return old, new
