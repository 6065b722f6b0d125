"""Shrinking a finding: simple values, delta debugging over requests, then the target's other
moves, on a budget.

A large finding (hundreds of requests, tens of thousands of tokens) must become a small
reproducer in seconds, not minutes. Under the Triton interpreter every check costs its program
instances (a case of a thousand requests: seconds), so the order of the attempts matters more
than their number:

1. **Values** of a batch of more than 64 requests (:func:`value_changes`), whole-case changes:
   every request like one request (the first that differs, else the first or the last), every
   array of the case one value (zeros, ones, one of its own values) or consecutive values. All
   of them are tried at once (one check), else every request alike alone. A bug that needs
   more than 1024 requests keeps its requests, but they become alike and their arrays print
   as ``np.full``, ``np.arange`` or ``np.tile`` (:meth:`~..core.case.Case.to_python`): a reproducer
   of a few lines. The rest of their delta debugging (halves of the changes, ... down to
   single changes, each with its alternatives in turn), and all of it for a smaller case,
   comes after 2 and 3, on a case as small as they made it.
2. **Requests**, by delta debugging (Zeller's *ddmin*): drop each half, then keep each quarter
   alone or drop it, then eighths, ... before single requests; after a successful drop the
   granularity is kept instead of starting again from halves. Every attempt is smaller than the
   case, and the first ones are the cheapest.
3. **The target's other moves** (:meth:`~..targetkit.base.Target.shrink_moves`), greedily: shorten a
   request (to 1 token, by half, by a quarter, ...), drop rejected tokens, return to vLLM's own
   launch, plain scalars, zero or consecutive values. When every request is alike, each move of
   one request is made to all of them at once (one check instead of one per request).

They repeat while any makes progress. Then, for a case whose values are still large (a tour
case of production extremes: ids near 2**31, positions past 2**24, 14 drafts over a 14 x 1000
table), 4. **a simpler case drawn afresh** (:meth:`Shrinker.redraw`): Hypothesis searches the
tier's strategy at a small scale for a case that fails the same way (the same kind, the same
outputs differ) and shrinks it toward zeros and short lists; taken if it is simpler
(:func:`complexity`), and shrunk again by 1-3. No candidate is checked twice (requests that are alike
make many drops the same case). Everything runs in this process, so compiled kernels and the
Numba oracles are reused from one attempt to the next. A time budget (and a cap on the number
of checks) bounds the whole; when it runs out, the smallest failing case found so far is the
result, and :attr:`~.check.Finding.shrink` says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..core.case import Case
from ..generation.strategies import Scale
from ..sources import Implementations
from ..targetkit.base import Target
from ..targets import TARGETS, ContractViolation
from . import check
from .check import CaseJournal, Finding
from .corpus import case_hash
from .domains import guarded

Change = list[Callable[[Case], Case]]
"""One whole-case simplification: its alternatives, simplest first; each maps a case to a
simpler one (it may raise or leave the contract: that alternative is then passed over)."""

MOVE_ERRORS = (ValueError, IndexError, KeyError, TypeError, OverflowError, ZeroDivisionError)
"""What a move may raise on a case it does not fit (it is passed over)."""

MANY_REQUESTS = "many_requests"
"""The feature of a batch of more than 64 requests (every target with requests tracks it):
one whose values are simplified before any request is dropped."""

DDMIN_SHARE = 0.6
"""Share of the remaining budget that one round of delta debugging may take, so that the
value moves (which make a large reproducer readable) get their turn."""

REDRAW_SCALE = Scale(max_requests=4, request_tail=4, max_query_len=8, max_programs=64)
"""The batch sizes of :meth:`Shrinker.redraw`'s search: small cases, cheap under the interpreter."""
REDRAW_EXAMPLES = 200
"""The cases :meth:`Shrinker.redraw` draws at most before Hypothesis shrinks the first that fails."""
SIMPLE_VALUES = 1 << 16
SIMPLE_ELEMENTS = 256
"""A case whose integers are all below :data:`SIMPLE_VALUES` in magnitude and whose arrays hold
:data:`SIMPLE_ELEMENTS` elements or fewer in all is simple enough: it is not redrawn."""


def complexity(case: Case) -> int:
    """How much a person must read and think about in ``case``: one per array element, and the
    binary digits of every integer (of its arrays, scalars and launch parameters). Smaller is
    simpler: five small numbers beat four near 2**31."""
    total = 0
    for a in case.arrays.values():
        total += int(a.size)
        if a.dtype.kind in "iu" and a.size:
            flat = np.abs(a.astype(np.int64, copy=False).reshape(-1)).astype(np.float64)
            total += int(np.ceil(np.log2(flat + 1)).sum())
    for v in (*case.scalars.values(), *case.launch.values()):
        if isinstance(v, int) and not isinstance(v, bool):
            total += abs(v).bit_length()
    return total


def simple(case: Case) -> bool:
    """Whether ``case`` is small in elements and in values (see :data:`SIMPLE_VALUES`)."""
    ints = [v for v in (*case.scalars.values(), *case.launch.values()) if isinstance(v, int)]
    ints += [int(np.abs(a.astype(np.int64, copy=False)).max()) for a in case.arrays.values()
             if a.dtype.kind in "iu" and a.size]
    return (sum(int(a.size) for a in case.arrays.values()) <= SIMPLE_ELEMENTS
            and all(abs(v) < SIMPLE_VALUES for v in ints))


class _Spent(BaseException):
    """Raised inside :meth:`Shrinker.redraw`'s Hypothesis run at its deadline: a BaseException,
    so that Hypothesis stops at once instead of taking it for a failure."""


class _Same(Exception):
    """Raised inside :meth:`Shrinker.redraw`'s Hypothesis run by a case that fails the same way."""


def value_changes(target: Target, case: Case, request: int | None = None) -> list[Change]:
    """The whole-case simplifications of ``case`` (see the module docstring), in the order they
    are composed: every request like request ``request`` (the first that differs; else the
    first, else the last: :meth:`~..targetkit.base.Target.alike`), then one change
    per array of the case (all zeros, all ones, every element or row like the one of
    ``request``, like the first, the minimum, the maximum; consecutive values from 0 or from
    the first)."""
    picks = [0, -1] if request is None else [request, 0, -1]
    changes: list[Change] = [[_like_request(target, k) for k in picks]]
    for name in case.arrays:
        changes.append(_one_value(name, request))
    return changes


def _like_request(target: Target, k: int) -> Callable[[Case], Case]:
    return lambda case: target.alike(case, k)


def _one_value(name: str, request: int | None) -> Change:
    def of(make: Callable[[np.ndarray], np.ndarray]) -> Callable[[Case], Case]:
        def change(case: Case) -> Case:
            a = case.arrays[name]
            if a.size == 0:
                return case
            # C order: a broadcast row of a 2-D array would keep its strides' order ('K') otherwise
            return case.replace(arrays={name: np.ascontiguousarray(
                np.asarray(make(a)).astype(a.dtype, casting="unsafe").reshape(a.shape))})

        return change

    def like(k: int) -> Callable[[np.ndarray], np.ndarray]:
        return lambda a: np.broadcast_to(a[k], a.shape) if a.ndim else a

    def consecutive(start: Callable[[np.ndarray], int]) -> Callable[[np.ndarray], np.ndarray]:
        return lambda a: (start(a) + np.arange(a.size, dtype=np.int64)) if a.ndim == 1 and a.dtype.kind in "iu" else a

    alternatives = [np.zeros_like, np.ones_like]
    if request is not None:
        alternatives.append(like(request))
    alternatives += [like(0), lambda a: np.full_like(a, a.min()), lambda a: np.full_like(a, a.max()),
                     consecutive(lambda a: 0), consecutive(lambda a: int(a.flat[0]))]
    return [of(m) for m in alternatives]


class Shrinker:
    """Shrinks one finding (see the module docstring); :meth:`run` returns the result."""

    def __init__(
        self,
        finding: Finding,
        impls: Implementations,
        device: str,
        *,
        journal: CaseJournal | None = None,
        max_checks: int = 2000,
        budget_s: float = 20.0,
        on_step: Callable[[Finding], None] | None = None,
    ) -> None:

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
        self.tried: set[str] = set()
        """Hashes of the candidates checked: none is checked twice."""
        self.on_step = on_step
        """Called with each smaller finding as it is found (an interrupt then loses no step)."""

    # -- one attempt --------------------------------------------------------------------

    def _spent(self, deadline: float | None = None) -> bool:
        if self.checks >= self.max_checks:
            self.stopped = f"after {self.checks} checks (the limit)"
        elif time.monotonic() >= self.deadline:
            self.stopped = f"at its time budget ({self.budget_s:g} s, $EAGLEFUZZ_SHRINK_BUDGET)"
        return self.stopped is not None or (deadline is not None and time.monotonic() >= deadline)

    def admits(self, candidate: Case) -> bool:
        """Whether ``candidate`` lies in the finding's tier (checking it is allowed); for an
        edge divergence, whether it reaches no edge the finding's case does not (shrinking
        takes edges away, never adds one: a smaller number that is one more edge is no simpler)."""

        try:
            self.target.tier_of(candidate, self.tier)
        except ContractViolation:
            return False
        if self.tier == "extended":
            try:
                return self.target.extended_features_of(candidate) <= self.target.extended_features_of(self.finding.case)
            except MOVE_ERRORS:
                return False
        return True

    def fails(self, candidate: Case, deadline: float | None = None) -> bool:
        """Whether ``candidate`` (in-contract) fails the same way; if so it becomes the finding.
        A candidate already checked is not checked again (it did not fail: it would be the
        finding)."""

        if self._spent(deadline):
            return False
        if not self.admits(candidate):
            return False
        if candidate == self.finding.case:  # no progress: never a step
            return False
        key = case_hash(candidate)
        if key in self.tried:
            return False
        self.tried.add(key)
        self.checks += 1
        smaller = check.check_case(candidate, self.impls, self.device, self.journal, domain=self.tier)
        if smaller is not None and failure(smaller) == failure(self.finding):
            self.finding = smaller
            self.steps += 1
            if self.on_step is not None:
                self.on_step(replace(smaller, shrink=_interrupted(self.steps)))
            return True
        return False

    # -- strategies ---------------------------------------------------------------------

    def _first_request(self) -> int | None:
        """The request of the finding's first difference, if it names one."""
        o = self.finding.outcome
        return next((d.request for d in o.differences + o.oracle_disagreements if d.request is not None), None)

    def _many_requests(self) -> bool:
        """Whether the case is a batch of more than 64 requests (:data:`MANY_REQUESTS`)."""
        try:
            return MANY_REQUESTS in self.target.features_of(self.finding.case)
        except MOVE_ERRORS:  # features_of describes production cases: an edge may not fit it
            return False

    def _compose(self, case: Case, changes: Sequence[Change]) -> Case:
        """``case`` with every change applied in order, each by its first alternative that
        applies and keeps the case in the finding's tier; a change whose first alternative
        leaves its part as it is stays out (that part is as simple as it gets)."""
        for alternatives in changes:
            for alt in alternatives:
                try:
                    candidate = alt(case)
                except MOVE_ERRORS:
                    continue
                if candidate == case:
                    break
                if self.admits(candidate):
                    case = candidate
                    break
        return case

    def simplify(self, changes: Sequence[Change] | None = None, *, quick: bool = False) -> bool:
        """Delta debugging over whole-case value changes (:func:`value_changes`): all of them
        at once, else each half in turn, ... down to single changes, each of whose alternatives
        is then tried; whether any went. ``quick``: all at once, else the first change alone
        (every request alike), and no more (at most two checks of a case still large)."""
        if changes is None:
            changes = value_changes(self.target, self.finding.case, self._first_request())
        if not changes or self._spent():
            return False
        candidate = self._compose(self.finding.case, changes)
        if candidate == self.finding.case:
            return False
        if self.fails(candidate):
            return True
        if quick:
            return len(changes) > 1 and self.simplify(changes[:1], quick=True)
        if len(changes) == 1:  # its other alternatives (the one composed was checked: not again)
            for alt in changes[0]:
                try:
                    other = alt(self.finding.case)
                except MOVE_ERRORS:
                    continue
                if self.fails(other):
                    return True
            return False
        mid = len(changes) // 2
        first = self.simplify(changes[:mid])
        return self.simplify(changes[mid:]) or first

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
                    dropped = set(c)
                    rest = [i for i in items if i not in dropped]
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

        def both(case: Case) -> Iterator[Case]:
            yield from guarded(moves(case))
            yield from guarded(self.target.extended_shrink_candidates(case))

        return both

    def _lifted(self, moves: Callable[[Case], Iterator[Case]]) -> Callable[[Case], Iterator[Case]]:
        """``moves``, preceded, when every request of the case is alike, by each move of a
        one-request case made to every request at once."""

        def lifted(case: Case) -> Iterator[Case]:
            pieces = self.target.split_requests(case)
            if pieces is not None and len(pieces) > 1:
                n = len(pieces)
                if self.target.join_requests(case, [pieces[0]] * n) == case:
                    one = self.target.join_requests(case, pieces[:1])
                    for m in guarded(moves(one)):
                        mp = self.target.split_requests(m)
                        if mp is not None and len(mp) == 1:
                            yield self.target.join_requests(m, mp * n)
            yield from moves(case)

        return lifted

    def redraw(self) -> bool:
        """Search the finding's tier afresh, at :data:`REDRAW_SCALE`, for a case that fails the
        same way (the same kind, and the same outputs differ: :func:`_way`) and
        let Hypothesis shrink it toward zeros and short lists; take it when it is simpler
        (:func:`complexity`). Whether it was taken. The draws depend on the target alone
        (determinism); the search stops at the budget."""
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hseed

        from ..generation.strategies import derive_seed
        from .domains import PRODUCTION, strategy_for

        want = _way(self.finding)
        found: list[Finding] = []

        @settings(max_examples=REDRAW_EXAMPLES, database=None, deadline=None, derandomize=False,
                  phases=(Phase.generate, Phase.shrink), report_multiple_bugs=False,
                  suppress_health_check=list(HealthCheck))
        @hseed(derive_seed(0, self.target.name, "redraw"))
        @given(self.target.ordinary_strategy(REDRAW_SCALE) if self.tier == PRODUCTION
               else strategy_for(self.target, self.tier, REDRAW_SCALE))
        def probe(case: Case) -> None:
            if self._spent():
                raise _Spent
            if not self.admits(case):
                return
            self.checks += 1
            f = check.check_case(case, self.impls, self.device, self.journal, domain=self.tier)
            if f is not None and _way(f) == want:
                found[:] = [f]
                raise _Same

        try:
            probe()
        except (_Same, _Spent):
            pass
        if not found or complexity(found[0].case) >= complexity(self.finding.case):
            return False
        self.finding = found[0]
        self.steps += 1
        if self.on_step is not None:
            self.on_step(replace(found[0], shrink=_interrupted(self.steps)))
        return True

    def run(self) -> Finding:
        """Shrink until nothing more goes or the budget is spent; the smallest finding."""
        self._shrink()
        if not self._spent() and not simple(self.finding.case) and self.redraw():
            self._shrink()  # the case drawn afresh, by the moves too
        if self.stopped is None:
            return self.finding
        note = (f"shrinking stopped {self.stopped} after {self.steps} step(s): "
                "this is the smallest failing case found so far")
        return replace(self.finding, shrink=note)

    def _shrink(self) -> None:
        """Values, requests and the target's moves (see the module's text), until nothing more
        goes or the budget is spent."""
        share = DDMIN_SHARE
        while not self._spent():
            # A batch of many requests: its values at once first (what makes a batch that cannot
            # lose a request readable, in a check or two); the rest of their delta debugging,
            # and all of it for a smaller case, once the case is as small as the drops make it.
            simpler = self._many_requests() and self.simplify(quick=True)
            pieces = self.target.split_requests(self.finding.case)
            if pieces is None:
                moved = self.greedy(self._moves(self.target.shrink_candidates))
                if not (self.simplify() or moved):
                    break
                continue
            until = time.monotonic() + share * max(self.deadline - time.monotonic(), 0.0)
            dropped = len(pieces) > 1 and self.ddmin(pieces, until)
            cut = len(pieces) > 1 and time.monotonic() >= until
            moved = self.greedy(self._lifted(self._moves(self.target.shrink_moves)))
            simpler = self.simplify() or simpler
            if not (simpler or dropped or moved or cut):
                break
            share = 1.0 if cut else DDMIN_SHARE  # a cut-short round goes on with all that is left


def _way(finding: Finding) -> tuple[Any, ...]:
    """How a finding fails, for :meth:`Shrinker.redraw`: its kind, its exception's type, and the
    outputs that differ (their regions name the case's own requests and slots)."""
    o = finding.outcome
    return (failure(finding), (o.crash or "").split(":", 1)[0],
            tuple(sorted({d.array for d in o.oracle_disagreements or o.differences})))


def _interrupted(steps: int) -> str:
    """The note of a finding whose shrinking an interrupt cut short after ``steps`` steps."""
    return (f"shrinking was interrupted after {steps} step(s): this is the smallest failing case "
            "found so far")


def failure(finding: Finding) -> str:
    """How a finding fails, whatever its tier: ``oracle disagreement``, ``hang``, ``crash`` or
    ``difference`` (a shrinking step must keep it)."""
    o = finding.outcome
    if o.oracle_disagreements:
        return "oracle disagreement"
    if getattr(o, "hang", None):
        return "hang"
    return "crash" if o.crash else "difference"
