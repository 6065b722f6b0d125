"""Shrinking a finding: delta debugging over requests, then the target's other moves, on a budget.

A large finding (hundreds of requests, tens of thousands of tokens) must become a small
reproducer in seconds, not minutes. Under the Triton interpreter every check costs its program
instances, so the order of the attempts matters more than their number:

1. **Requests**, by delta debugging (Zeller's *ddmin*): drop each half, then keep each quarter
   alone or drop it, then eighths, ... before single requests; after a successful drop the
   granularity is kept instead of starting again from halves. Every attempt is smaller than the
   case, and the first ones are the cheapest.
2. **The target's other moves** (:meth:`~.targets.base.Target.shrink_moves`), greedily: shorten a
   request (to 1 token, by half, by a quarter, ...), drop rejected tokens, return to vLLM's own
   launch, plain scalars, zero or consecutive values.

Both repeat while either makes progress. Everything runs in this process, so compiled kernels
and the Numba oracles are reused from one attempt to the next. A time budget (and a cap on the
number of checks) bounds the whole; when it runs out, the smallest failing case found so far is
the result, and :attr:`~.check.Finding.shrink` says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .case import Case

if TYPE_CHECKING:  # the targets import this module's helpers: no import cycle at run time
    from .check import Finding
    from .journal import Journal
    from .sources import Implementations

DDMIN_SHARE = 0.6
"""Share of the remaining budget that one round of delta debugging may take, so that the
value moves (which make a large reproducer readable) get their turn."""


def keep_lists(n: int) -> Iterator[list[int]]:
    """Which of ``n`` requests to keep, in delta-debugging order, for a plain candidate list.

    Drop each half; then, per granularity (quarters, eighths, ... single requests), keep each
    chunk alone, then drop each chunk. No list is empty or keeps all ``n``; none repeats.
    """
    if n < 2:
        return
    seen: set[tuple[int, ...]] = set()
    k = 2
    while True:
        size = -(-n // k)
        chunks = [list(range(i, min(i + size, n))) for i in range(0, n, size)]
        candidates = ([] if k == 2 else chunks) + [
            [i for i in range(n) if not c[0] <= i <= c[-1]] for c in chunks
        ]
        for keep in candidates:
            key = tuple(keep)
            if 0 < len(keep) < n and key not in seen:
                seen.add(key)
                yield keep
        if size == 1:
            return
        k *= 2


def shorter(n: int) -> list[int]:
    """Shorter lengths for a request of ``n`` tokens, the biggest cut first: 1, n/2, 3n/4,
    7n/8, ..., n - 1 (a length that must stay long converges in a logarithmic number of steps)."""
    out: list[int] = []
    for m in [1, n // 2] + [n - n // (1 << k) for k in range(2, 64) if n // (1 << k) >= 1] + [n - 1]:
        if 1 <= m < n and m not in out:
            out.append(m)
    return out


class Shrinker:
    """Shrinks one finding (see the module docstring); :meth:`run` returns the result."""

    def __init__(
        self,
        finding: Finding,
        impls: Implementations,
        device: str,
        *,
        journal: Journal | None = None,
        max_checks: int = 2000,
        budget_s: float = 20.0,
    ) -> None:
        from .targets import TARGETS

        self.finding = finding
        self.impls = impls
        self.device = device
        self.journal = journal
        self.max_checks = max_checks
        self.budget_s = budget_s
        self.target = TARGETS[finding.case.kernel]
        self.tier = finding.tier
        """The finding's domain tier: candidates must lie in it (an edge divergence may shrink
        into a production case, which then becomes a contract violation)."""
        self.start = time.monotonic()
        self.deadline = self.start + budget_s
        self.checks = 0
        self.steps = 0
        self.stopped: str | None = None

    # -- one attempt --------------------------------------------------------------------

    def _spent(self, deadline: float | None = None) -> bool:
        if self.checks >= self.max_checks:
            self.stopped = f"after {self.checks} checks (the limit)"
        elif time.monotonic() >= self.deadline:
            self.stopped = f"at its time budget ({self.budget_s:g} s, $EAGLEFUZZ_SHRINK_BUDGET)"
        return self.stopped is not None or (deadline is not None and time.monotonic() >= deadline)

    def fails(self, candidate: Case, deadline: float | None = None) -> bool:
        """Whether ``candidate`` (in-contract) fails the same way; if so it becomes the finding."""
        from .check import check_case
        from .targets import ContractViolation

        if self._spent(deadline):
            return False
        try:
            self.target.tier_of(candidate, self.tier)
        except ContractViolation:
            return False
        if candidate == self.finding.case:  # no progress: never a step
            return False
        self.checks += 1
        smaller = check_case(candidate, self.impls, self.device, self.journal, domain=self.tier)
        if smaller is not None and failure(smaller) == failure(self.finding):
            self.finding = smaller
            self.steps += 1
            return True
        return False

    # -- strategies ---------------------------------------------------------------------

    def ddmin(self, pieces: Sequence[Any], deadline: float | None = None) -> bool:
        """Delta debugging over the requests ``pieces`` of the current case; whether any went."""
        base = self.finding.case
        items = list(range(len(pieces)))
        n, changed = 2, False

        def attempt(keep: list[int]) -> bool:
            return self.fails(self.target.join_requests(base, [pieces[i] for i in keep]), deadline)

        while len(items) >= 2 and not self._spent(deadline):
            size = -(-len(items) // n)
            chunks = [items[i : i + size] for i in range(0, len(items), size)]
            found = None
            if n > 2:
                found = next((c for c in chunks if attempt(c)), None)
                if found is not None:
                    items, n = found, 2
            if found is None:
                for c in chunks:
                    rest = [i for i in items if i not in set(c)]
                    if attempt(rest):
                        found, items, n = rest, rest, max(n - 1, 2)
                        break
            if found is not None:
                changed = True
                continue
            if n >= len(items):
                break
            n = min(2 * n, len(items))
        return changed

    def greedy(self, moves: Callable[[Case], Iterator[Case]]) -> bool:
        """Take the first move of the current case that still fails, repeat; whether any did."""
        changed = False
        while not self._spent():
            if not any(self.fails(c) for c in moves(self.finding.case)):
                break
            changed = True
        return changed

    def _moves(self, moves: Callable[[Case], Iterator[Case]]) -> Callable[[Case], Iterator[Case]]:
        """``moves``, and for an edge divergence the target's extended-tier moves after them."""
        if self.tier != "extended":
            return moves
        from .domains import guarded

        def both(case: Case) -> Iterator[Case]:
            yield from guarded(moves(case))
            yield from guarded(self.target.extended_shrink_candidates(case))

        return both

    def run(self) -> Finding:
        """Shrink until nothing more goes or the budget is spent; the smallest finding."""
        share = DDMIN_SHARE
        while not self._spent():
            pieces = self.target.split_requests(self.finding.case)
            if pieces is None:
                self.greedy(self._moves(self.target.shrink_candidates))
                break
            until = time.monotonic() + share * max(self.deadline - time.monotonic(), 0.0)
            dropped = len(pieces) > 1 and self.ddmin(pieces, until)
            cut = len(pieces) > 1 and time.monotonic() >= until
            moved = self.greedy(self._moves(self.target.shrink_moves))
            if not (dropped or moved or cut):
                break
            share = 1.0 if cut else DDMIN_SHARE  # a cut-short round goes on with all that is left
        if self.stopped is None:
            return self.finding
        note = (f"shrinking stopped {self.stopped} after {self.steps} step(s): "
                "this is the smallest failing case found so far")
        return replace(self.finding, shrink=note)


def failure(finding: Finding) -> str:
    """How a finding fails, whatever its tier: ``oracle disagreement``, ``hang``, ``crash`` or
    ``difference`` (a shrinking step must keep it)."""
    o = finding.outcome
    if o.oracle_disagreements:
        return "oracle disagreement"
    if getattr(o, "hang", None):
        return "hang"
    return "crash" if o.crash else "difference"
