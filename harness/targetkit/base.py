"""What every target of the harness provides, and the shared machinery of Triton targets.

A target is one kernel or function under test. Its entry in the registry keeps all of its
pieces in step: the strategy that generates cases, the bulk random generator, the contract
check, the semantic features, the oracles, the launch that mirrors vLLM's call site, and the
map from an output element back to a request and region for the report.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from ..core.buffers import Guarded, filled, guard_for, pick_sentinel, poison, raw
from ..core.case import Case
from ..core.compare import Difference, compare_all
from ..core.errors import ContractViolation
from ..generation.choosers import Chooser, RngChooser, as_strategy
from ..generation.shrink_steps import keep_lists
from ..generation.strategies import Scale, Shape
from .interface import parameters_of


class EdgesInModule:
    """The extended tier of a target kept in its folder's ``edges.py``.

    Put before the target's base class. ``edges`` is that module: it defines ``FEATURES``
    (edge name -> description), ``validate(case, dtypes)`` (raises :class:`ContractViolation`
    outside the extended tier), ``strategy(scale)``, ``random_case(rng, scale)``,
    ``features_of(case)`` and ``shrink_candidates(case)``. ``edge_dtypes`` is what ``validate``
    checks the arrays against (the target's ``inputs`` unless the class sets it).
    """

    edges: Any
    edge_dtypes: Mapping[str, Any] | None = None

    @property
    def extended_features(self) -> Mapping[str, str]:
        return self.edges.FEATURES

    def validate_extended(self, case: Case) -> None:
        try:
            self.validate(case)  # type: ignore[attr-defined]
        except ContractViolation:
            dtypes = self.edge_dtypes if self.edge_dtypes is not None else self.inputs  # type: ignore[attr-defined]
            self.edges.validate(case, dict(dtypes))

    def extended_strategy(self, scale: Scale) -> st.SearchStrategy[Case]:
        return self.edges.strategy(scale)

    def extended_case(self, rng: np.random.Generator, scale: Scale) -> Case:
        return self.edges.random_case(rng, scale)

    def extended_features_of(self, case: Case) -> frozenset[str]:
        return self.edges.features_of(case)

    def extended_shrink_candidates(self, case: Case) -> Iterator[Case]:
        return self.edges.shrink_candidates(case)


def require_arrays(arrays: Mapping[str, np.ndarray], dtypes: Mapping[str, Any], optional: Iterable[str] = ()) -> None:
    """Raise :class:`ContractViolation` unless every array of ``dtypes`` (name -> dtype, or
    ``(dtype, ndim)``; 1-D by default) is in ``arrays`` with that dtype and number of
    dimensions; those named in ``optional`` may be absent."""
    for name, spec in dtypes.items():
        dtype, ndim = spec if isinstance(spec, tuple) else (spec, 1)
        if name not in arrays:
            if name in optional:
                continue
            raise ContractViolation(f"arrays.{name}", "is required")
        if arrays[name].dtype != dtype or arrays[name].ndim != ndim:
            raise ContractViolation(f"arrays.{name}", f"must be a {ndim}-D {dtype} array")

@dataclass
class Outcome:
    """What checking one case found.

    ``differences``: implementation vs oracles (the findings); ``oracle_disagreements``: the
    two oracles against each other (a harness bug); ``crash``: the run raised or died;
    ``hang``: the run did not finish within its time limit (the supervisor killed it).
    """

    differences: list[Difference] = field(default_factory=list)
    oracle_disagreements: list[Difference] = field(default_factory=list)
    crash: str | None = None
    fatal: bool = False
    """The crash left the device unusable (a CUDA error is sticky): nothing more can run here."""
    hang: str | None = None

    @property
    def ok(self) -> bool:
        return not (self.differences or self.oracle_disagreements or self.crash or self.hang)

    def crashed(self, exc: BaseException, device: str, context: str = "") -> Outcome:
        """Record that the run raised ``exc`` (``context`` is added after the exception's
        name); a CUDA error on a device marks the outcome fatal. Returns ``self``."""
        self.crash = f"{type(exc).__name__}{context}: {' '.join(str(exc).split())[:500]}"
        self.fatal = device != "cpu" and "CUDA error" in str(exc)
        return self


@dataclass(frozen=True)
class Variant:
    """An older interface of a target that is still tested, instead of getting an interface
    verdict: an implementation with exactly these ``parameters`` is launched as the variant
    (the target's ``launch`` sees which outputs it was given) and the reports name it."""

    parameters: tuple[str, ...]
    lacks: tuple[str, ...] = ()
    """Outputs (names in ``output_specs``) this interface does not have: not given, not compared."""
    found_in: str = ""
    """Where this interface is found (e.g. "vLLM 0.12-0.13"), for notes."""


class Target(ABC):
    """One kernel or function under test; subclasses are registered in ``targets``."""

    name: str
    kind: str
    section: int
    """Its section of docs/CONTRACT.md (``§N``, whose heading names it); the registry lists the
    targets in this order."""
    module: str = "vllm/v1/spec_decode/utils.py"
    """The vLLM module that defines it, as a path inside a vLLM checkout or wheel: where the vLLM
    sources look for it, and what the bundled copy of that module holds."""
    features: Mapping[str, str]
    """Semantic feature name -> one-line description; :meth:`features_of` returns a subset."""
    parameters: tuple[str, ...] | None = None
    """The implementation's parameter names as the contract gives them (``None``: unchecked);
    an implementation with others gets an interface verdict, not a bug finding."""
    variants: Mapping[str, Variant] = {}
    """Older interfaces still tested, by name (see :class:`Variant`)."""

    def variant_of(self, impl: Any) -> str | None:
        """The name of the variant whose parameters ``impl`` has (``None``: the contract's own
        interface, or one that is no variant)."""
        if not self.variants:
            return None

        params = parameters_of(impl)
        if params is None or (self.parameters is not None and list(params) == list(self.parameters)):
            return None
        return next((n for n, v in self.variants.items() if list(params) == list(v.parameters)), None)

    extremes: tuple[str, ...] = ()
    """The features that are production extremes (vLLM's largest batches, offsets, rows, ids,
    positions): every default run reaches each of them, through :meth:`extreme_cases`."""
    shapes: tuple[Shape, ...] = ()
    """Cheap-but-large shapes that reach the extremes, cheapest first."""

    def extreme_cases(self, rng: np.random.Generator, scale: Scale) -> list[Case]:
        """The tour of a default run: one case of each of :attr:`shapes`, cheapest first
        (where each runs: :func:`~..checking.fuzz.tour_slots`); together they reach every feature of
        :attr:`extremes`, whatever ``rng``."""
        return [shape.case(rng, scale) for shape in self.shapes]

    cases: Any = None
    """The folder's ``cases.py``: its ``body(chooser, scale)`` draws an ordinary production
    case (:mod:`~..generation.choosers`: one body for both drivers)."""

    def production_case(self, c: Chooser, scale: Scale) -> Case:
        """A production case drawn with ``c``: now and then one of :attr:`shapes`, else an
        ordinary one (``cases.body``)."""
        extreme = c.shape(self.shapes, scale)
        return extreme if extreme is not None else self.cases.body(c, scale)

    def strategy(self, scale: Scale) -> st.SearchStrategy[Case]:
        """In-contract cases, generated by construction (Hypothesis)."""
        return as_strategy(self.production_case, scale)

    def random_case(self, rng: np.random.Generator, scale: Scale) -> Case:
        """One in-contract case drawn with NumPy alone (bulk mode: no Hypothesis overhead)."""
        return self.production_case(RngChooser(rng), scale)

    @abstractmethod
    def validate(self, case: Case) -> None:
        """Raise :class:`ContractViolation` when ``case`` is outside the contract."""

    @abstractmethod
    def features_of(self, case: Case) -> frozenset[str]:
        """The semantic features that ``case`` exercises."""

    @abstractmethod
    def check(self, case: Case, impl: Any, device: str) -> Outcome:
        """Run ``impl`` on ``case`` and compare every output with every oracle."""

    @abstractmethod
    def oracle_check(self, case: Case) -> list[Difference]:
        """Run the oracles alone and return where they disagree."""

    @abstractmethod
    def output_tokens(self, case: Case) -> int:
        """How many output elements one check of ``case`` verifies (for throughput figures)."""

    def shrink_candidates(self, case: Case) -> Iterator[Case]:
        """Smaller variants of ``case`` (drop requests, shorten, simplify), simplest first.

        By default: the request drops of :func:`~..generation.shrink_steps.keep_lists` (when the target
        splits its cases into requests), then :meth:`shrink_moves`. The crash shrinker walks
        this list; :func:`~..checking.fuzz.shrink_finding` uses the split and the moves directly.
        """
        pieces = self.split_requests(case)
        if pieces is not None:
            for keep in keep_lists(len(pieces)):
                yield self.join_requests(case, [pieces[i] for i in keep])
        yield from self.shrink_moves(case)

    def split_requests(self, case: Case) -> list[Any] | None:
        """``case`` as a list of per-request pieces that :meth:`join_requests` puts back
        together (any sub-list makes an in-contract case); ``None`` when it has no requests."""
        return None

    def join_requests(self, case: Case, pieces: list[Any]) -> Case:
        """``case`` rebuilt from a sub-list of its :meth:`split_requests` pieces."""
        raise NotImplementedError(f"{self.name} does not split its cases into requests")

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        """Smaller or simpler variants of ``case`` other than dropping requests."""
        return iter(())

    def alike(self, case: Case, k: int) -> Case:
        """``case`` with every request made like request ``k`` (its length, values and rows;
        ``k`` counts from the end when negative): the shrinker's first value change, which
        keeps a batch's size (a bug may need more than 1024 requests) while its arrays become
        ranges and repeats. ``case`` itself when it has fewer than two requests or no request
        ``k``. By default through :meth:`split_requests` and :meth:`join_requests`; a target
        that shrinks otherwise gives its own."""
        pieces = self.split_requests(case)
        if pieces is None or len(pieces) < 2 or not -len(pieces) <= k < len(pieces):
            return case
        return self.join_requests(case, [pieces[k]] * len(pieces))

    grid_field: str = "launch"
    """The case field that sets the launch's grid (named when a grid exceeds the limits)."""

    def programs(self, case: Case) -> int:
        """Program instances of the launch that checking ``case`` makes (0: no kernel launch);
        what a case costs under the Triton interpreter (see :mod:`..core.limits`)."""
        return 0

    def output_bytes(self, case: Case) -> int:
        """Bytes of the output buffers checking ``case`` allocates (see :mod:`..core.limits`)."""
        return 0
    # -- domain tiers (docs/CONTRACT.md, "Three domains"; harness/checking/domains.py) -------------
    #
    # The production tier is what ``validate(case)`` accepts. The extended tier adds the
    # inputs the contract's N.4 lists as outside, where the reference's behaviour is still
    # defined; a target without one keeps the defaults below (its extended tier is its
    # production tier).

    extended_features: Mapping[str, str] = {}
    """Edge name -> one-line description; :meth:`extended_features_of` returns a subset."""

    def validate_extended(self, case: Case) -> None:
        """Raise :class:`ContractViolation` when ``case`` is outside the extended tier (which
        holds the production tier)."""
        self.validate(case)

    def extended_strategy(self, scale: Scale) -> st.SearchStrategy[Case]:
        """Cases of the extended tier (mostly edges, some production cases)."""
        return self.strategy(scale)

    def extended_case(self, rng: np.random.Generator, scale: Scale) -> Case:
        """One case of the extended tier drawn with NumPy alone (bulk mode)."""
        return self.random_case(rng, scale)

    def extended_features_of(self, case: Case) -> frozenset[str]:
        """The edges of the extended tier that ``case`` exercises (empty for production)."""
        return frozenset()

    def extended_shrink_candidates(self, case: Case) -> Iterator[Case]:
        """Smaller variants of an extended-tier case, on top of :meth:`shrink_candidates`."""
        return iter(())

    def tier_of(self, case: Case, domain: str = "production") -> str:
        """``"production"`` when :meth:`validate` accepts ``case``; ``"extended"`` when the
        domain is ``"extended"`` and :meth:`validate_extended` accepts it. Otherwise raise the
        production tier's :class:`ContractViolation` (or the extended tier's, naming its rule,
        when the domain is ``"extended"``)."""
        try:
            self.validate(case)
            return "production"
        except ContractViolation:
            if domain != "extended":
                raise
        self.validate_extended(case)
        return "extended"


OracleFn = Callable[..., None]


class TritonTarget(Target):
    """A Triton kernel: guarded buffers, sentinel-filled outputs, oracles written in place.

    Subclasses give the input dtypes, the output shapes of a case, the launch, how an
    oracle is called, and where an output element lives (request and region).
    """

    kind = "triton kernel"
    inputs: Mapping[str, np.dtype]
    oracles: Mapping[str, OracleFn]
    inout: frozenset[str] = frozenset()
    """Inputs the kernel updates in place (vLLM's ``seq_lens``): the oracles update their copy,
    and the buffer must end up as they left it instead of unchanged."""

    def aliases(self, case: Case) -> Mapping[str, str]:
        """Output -> the input whose buffer the launch passes for it (vLLM passes ``positions``
        as ``out_clamped_positions``); none by default.

        The oracles still write the output into a buffer of its own; the input's buffer must
        end up holding the input with every element the oracles wrote replaced (the kernel
        reads each element before it overwrites it, as the contract must say).
        """
        return {}

    def _changed_inputs(self, case: Case) -> set[str]:
        return set(self.inout) | set(self.aliases(case).values())

    @abstractmethod
    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        """Output name -> (dtype, shape) of the buffer the kernel is given."""

    @abstractmethod
    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        """Launch ``kernel`` on device ``tensors`` (inputs and outputs by name) like vLLM does."""

    @abstractmethod
    def call_oracle(self, oracle: OracleFn, case: Case, outputs: Mapping[str, np.ndarray]) -> None:
        """Call ``oracle`` with the case's inputs, writing into ``outputs`` in place."""

    @abstractmethod
    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        """``(request, region)`` of element ``index`` of output ``array`` (guards included)."""

    # -- shared machinery -------------------------------------------------------------

    def output_tokens(self, case: Case) -> int:
        outs = sum(int(np.prod(shape)) for _, shape in self.output_specs(case).values())
        return outs + sum(case.arrays[n].size for n in self.inout)

    def output_bytes(self, case: Case) -> int:
        return sum(int(np.prod(shape)) * np.dtype(dt).itemsize for dt, shape in self.output_specs(case).values())

    def _run_oracle(self, oracle: OracleFn, case: Case, fills: Mapping[str, int]) -> dict[str, np.ndarray]:
        specs = self.output_specs(case)
        outs = {n: filled(dt, shape, fills[n]) for n, (dt, shape) in specs.items()}
        inputs = {n: a.copy() for n, a in case.arrays.items()}
        self.call_oracle(oracle, case.replace(arrays=inputs), outs)
        return outs | {n: inputs[n] for n in self.inout}

    def settle(self, case: Case, written: Mapping[str, np.ndarray], fills: Mapping[str, int], device: str) -> Case | None:
        """Where the contract leaves a decision to the backend's arithmetic (docs/CONTRACT.md
        §11.3: compiled division within 2 ulps), ``case`` with those decisions made as the run
        made them, read from ``written`` (each output without its guards; ``fills``: the
        sentinel of an element not written), so that the oracles of the settled case are what
        the contract allows this run to give. ``None`` (the default) where nothing is left
        open: every difference stands."""
        return None

    def expected(self, case: Case) -> tuple[dict[str, int], dict[str, dict[str, np.ndarray]]]:
        """Per output, a sentinel fill that no written element equals; and, per oracle, the
        expected whole buffers (guards included) when every buffer starts full of its sentinel.

        The first oracle runs over two different fills: elements equal in both runs are the
        ones it writes; the sentinel is a value it never writes, and its expected buffer is its
        result with the sentinel where it wrote nothing. The other oracles run over the sentinel.
        """
        specs = self.output_specs(case)
        first, *others = self.oracles.items()
        a = self._run_oracle(first[1], case, {n: -0x5A5A5A5B if dt != np.bool_ else 0xA5 for n, (dt, _) in specs.items()})
        b = self._run_oracle(first[1], case, {n: 0x5A5A5A5A if dt != np.bool_ else 0x5A for n, (dt, _) in specs.items()})
        fills, outs = {}, {}
        for n, (dt, _) in specs.items():
            written = raw(a[n]) == raw(b[n])
            fills[n] = pick_sentinel(dt, raw(a[n])[written])
            outs[n] = a[n].copy()
            raw(outs[n])[~written] = fills[n]
        outs |= {n: a[n] for n in self.inout}
        results = {first[0]: outs}
        for oname, oracle in others:
            results[oname] = self._run_oracle(oracle, case, fills)
        alias = self.aliases(case)
        for res in results.values():
            for out, inp in alias.items():  # the output lands in the input's buffer
                o = res.pop(out)
                merged = res.get(inp, case.arrays[inp]).copy()
                written = raw(o) != fills[out]
                raw(merged)[written] = raw(o)[written]
                res[inp] = merged
        guard_fill = {n: poison(case.arrays[n].dtype) for n in self._changed_inputs(case)} | fills
        return fills, {
            oname: {n: _with_guards(o, guard_fill[n]) for n, o in res.items()} for oname, res in results.items()
        }

    def _guards(self, case: Case) -> dict[str, int]:
        guards = {n: guard_for(int(np.prod(shape))) for n, (_, shape) in self.output_specs(case).items()}
        return guards | {n: guard_for(case.arrays[n].size) for n in self._changed_inputs(case)}

    def _locator(self, case: Case) -> Callable[[str, int], tuple[int | None, str]]:
        sizes = {n: int(np.prod(s)) for n, (_, s) in self.output_specs(case).items()}
        sizes.update({n: a.size for n, a in case.arrays.items()})
        changed = self._changed_inputs(case)

        def locate(array: str, index: int) -> tuple[int | None, str]:
            if index < 0:
                return None, "guard band before the buffer"
            if index >= sizes[array]:
                return None, "guard band past the buffer"
            if array in case.arrays and array not in changed:
                return None, "input (must not be written)"
            return self.locate(case, array, index)

        return locate

    def oracle_check(self, case: Case) -> list[Difference]:
        fills, exp = self.expected(case)
        names = list(exp)
        locate = self._locator(case)
        out: list[Difference] = []
        for other in names[1:]:
            out += compare_all(
                exp[names[0]], exp[other], locate=locate, versus=f"{names[0]} oracle vs {other} oracle",
                guards=self._guards(case),
            )
        return out

    def check(self, case: Case, impl: Any, device: str) -> Outcome:
        import torch

        fills, exp = self.expected(case)
        locate = self._locator(case)
        outcome = Outcome()
        names = list(exp)
        for other in names[1:]:
            outcome.oracle_disagreements += compare_all(
                exp[names[0]], exp[other], locate=locate, versus=f"{names[0]} oracle vs {other} oracle",
                guards=self._guards(case),
            )
        if not outcome.oracle_disagreements:  # identical: compare the kernel with one of them
            exp = {" = ".join(names): exp[names[0]]}
        variant = self.variants.get(self.variant_of(impl) or "")
        lacks = set(variant.lacks) if variant else set()
        exp = {o: {n: a for n, a in e.items() if n not in lacks} for o, e in exp.items()}
        try:
            buffers = {
                n: Guarded(a.dtype, a.shape, device, poison(a.dtype), content=a) for n, a in case.arrays.items()
            }
            alias = self.aliases(case)
            for n, (dt, shape) in self.output_specs(case).items():
                if n not in lacks and n not in alias:
                    buffers[n] = Guarded(dt, shape, device, fills[n])
            views = {n: b.view for n, b in buffers.items()}
            views |= {out: buffers[inp].view for out, inp in alias.items()}
            with np.errstate(all="ignore"):  # the interpreter's NumPy ops on IEEE cases (p / subnormal q)
                self.launch(impl, views, case)
            if device != "cpu":
                torch.cuda.synchronize()
            actual = {n: b.read() for n, b in buffers.items()}
        except Exception as exc:  # noqa: BLE001 - any failure of the code under test is a finding
            return outcome.crashed(exc, device)
        guards = {n: b.guard for n, b in buffers.items()}
        sentinels = {n: f for n, f in fills.items() if n not in alias}  # an aliased output is in an input's buffer
        for oname, e in exp.items():
            outcome.differences += compare_all(e, actual, locate=locate, versus=f"{oname} oracle", guards=guards,
                                               sentinels=sentinels)
        if outcome.differences and not outcome.oracle_disagreements:
            written = {n: actual[n][guards[n] : actual[n].size - guards[n]] for n in sentinels if n in actual}
            settled = self.settle(case, written, sentinels, device)
            if settled is not None:
                refills, again = self.expected(settled)
                e = {n: a for n, a in next(iter(again.values())).items() if n not in lacks}
                if refills == fills and not compare_all(e, actual, locate=locate, versus="oracle", guards=guards, sentinels=sentinels):
                    outcome.differences = []
        changed = self._changed_inputs(case)
        inputs_expected = {n: b.initial for n, b in buffers.items() if n in case.arrays and n not in changed}
        outcome.differences += compare_all(inputs_expected, actual, locate=locate, versus="input as given", guards=guards)
        return outcome


def _with_guards(a: np.ndarray, fill: int) -> np.ndarray:
    """``a`` flattened, between two guard bands of ``fill`` as long as :func:`guard_for` says."""
    g = filled(a.dtype, (guard_for(a.size),), fill)
    return np.concatenate([g, a.reshape(-1), g])
