"""The record interface every target has (:class:`Target`), and the shared machinery of Triton
targets (:class:`TritonTarget`).

A target is one kernel or function under test. Its record keeps all of its pieces in step: who
it is (name, model runner, vLLM module and function, contract section), the tiers' rules, the
semantic features, the oracles, the launch that mirrors vLLM's call site, and the map from an
output element back to a request and region for the report. Its generators, tour and extended
tier are files of its folder (:mod:`.roles`). docs/DESIGN.md ("The record interface") and
docs/ADDING_A_TARGET.md describe it; ``tests/test_record_interface.py`` checks every record.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Final, Literal, final

import numpy as np
from hypothesis import strategies as st

from ...kernels import vllm_types
from ..core.buffers import Guarded, filled, guard_for, pick_sentinel, poison, raw
from ..core.case import Case
from ..core.compare import Difference, compare_all
from ..core.errors import ContractViolation, UserError
from ..generation.choosers import Chooser, RngChooser, as_strategy
from ..generation.shrink_steps import keep_lists
from ..generation.strategies import Scale, Shape
from .interface import SOURCE_FILE, UNRESOLVED, parameters_of
from .roles import find_role, folder_of

PRODUCTION: Final = "production"
EXTENDED: Final = "extended"
Tier = Literal["production", "extended"]
TIERS: tuple[Tier, ...] = (PRODUCTION, EXTENDED)
"""The domain tiers of :meth:`Target.validate`, narrow to wide (docs/CONTRACT.md, "Three domains")."""

Runner = Literal["V1", "V2"]
RUNNERS: tuple[Runner, ...] = ("V1", "V2")
"""vLLM's model runners. ``V1``: ``vllm/v1/worker/gpu_model_runner.py`` and the helpers it calls
(``vllm/v1/spec_decode/``, ``vllm/v1/sample/``); ``V2``: Model Runner V2, ``vllm/v1/worker/gpu/``
(the default in vLLM 0.33.0: ``VllmConfig.use_v2_model_runner``)."""

CPU_PORT_RUNNERS: tuple[Runner, ...] = ("V1",)
"""The runners whose kernels vLLM's CPU backend replaces with C++ ops (``port.py``, ``--vllm-cpu``).
Model Runner V2's have none: vLLM 0.33.0's ``CpuPlatform.register_triton_kernel_overrides``
(``vllm/platforms/cpu.py``) registers ops for V1 kernels only, and its CPU V2 runner
(``vllm/v1/worker/cpu/model_runner.py``, a ``GPUModelRunner``) runs the Triton kernels
themselves, through triton-cpu. A V2 target's port role does not apply (the matrix: ``n/a``)."""

V2_PACKAGE = "vllm/v1/worker/gpu/"
"""Where Model Runner V2's modules live: a target of ``runner = "V2"`` has its ``module`` here,
and only such a target."""

OracleFn = Callable[..., Any]


def numpy_and_numba(function: str) -> dict[str, str]:
    """:attr:`Target.oracle_functions` of a kernel with the usual two oracles: ``function`` of
    ``oracles/vectorized.py`` (NumPy) and of ``oracles/loops.py`` (Numba)."""
    return {"numpy": f"vectorized.{function}", "numba": f"loops.{function}"}


def oracle(path: str) -> OracleFn:
    """The oracle ``"module.function"`` of eaglefuzz's ``oracles/`` package, imported now (the
    oracles load Numba: nothing imports them before a case is checked)."""
    module, _, function = path.rpartition(".")
    return getattr(importlib.import_module(f"...oracles.{module}", __package__), function)


def target_name(module: str, function: str, functions: Iterable[str]) -> str:
    """The name a target of ``function`` in vLLM ``module`` has (docs/ADDING_A_TARGET.md): the
    function's own, unless ``functions`` (every target's, this one's included) holds it twice;
    then the module's own name before it, without the function's leading underscores: the file's
    stem (``input_batch.py``: ``input_batch_prepare_prefill_inputs_kernel``), or the folder of a
    file named ``speculator.py``, which several of Model Runner V2's speculators have
    (``spec_decode/target_dependent_ar/speculator.py``:
    ``target_dependent_ar_prepare_prefill_inputs_kernel``), so that each name says its file."""
    if list(functions).count(function) < 2:
        return function
    parts = module.removesuffix(".py").split("/")
    owner = parts[-2] if parts[-1] == "speculator" and len(parts) > 1 else parts[-1]
    return f"{owner}_{function.lstrip('_')}"


def draw_production(c: Chooser, scale: Scale, shapes: tuple[Shape, ...], body: Callable[[Chooser, Scale], Case]) -> Case:
    """A production case drawn with ``c``: now and then one of ``shapes`` (the tour's), else
    ``body(c, scale)`` (the folder's ``cases.body``)."""
    extreme = c.shape(shapes, scale)
    return extreme if extreme is not None else body(c, scale)



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

class CannotTest(UserError):
    """The implementation cannot be tested here, through no fault of its own: what it needs is
    not there (a name its file imports, whose imports do not resolve here; a field eaglefuzz's
    stand-in vLLM types lack). Its target's one-line verdict (exit 2), never a finding."""


_TRITON_NAME_ERROR = re.compile(r"name \\?'(\w+)\\?' is not defined")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _frame_globals(exc: BaseException) -> Iterator[dict]:
    """The module globals of every frame the exceptions of ``exc``'s chain passed through, then
    those of the modules a ``--kernels`` file was loaded as (they carry ``UNRESOLVED``)."""
    import sys

    for e in _chain(exc):
        tb = e.__traceback__
        while tb is not None:
            yield tb.tb_frame.f_globals
            tb = tb.tb_next
    for module in list(sys.modules.values()):
        if getattr(module, SOURCE_FILE, None):
            yield vars(module)


_STAND_IN_KWARG = re.compile(r"^(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'")


def cannot_test(exc: BaseException) -> str | None:
    """Why ``exc``, raised by an implementation, says it cannot be tested here (``None``: it is a
    failure of the implementation). A ``NameError`` for a name its file imports or defines but
    that was not taken out with it (the module's :data:`UNRESOLVED`); a ``TypeError`` of a
    stand-in vLLM class (``kernels/vllm_types.py``) given a field it does not model."""
    if isinstance(exc, NameError) and getattr(exc, "name", None):
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        g = tb.tb_frame.f_globals if tb is not None else {}
        why = (g.get(UNRESOLVED) or {}).get(exc.name)
        if why is not None:
            where = g.get(SOURCE_FILE) or "its file"
            return (f"{where}: {tb.tb_frame.f_code.co_name} could not be tested: it needs {exc.name}, {why}, "
                    "and the file's imports do not resolve here (its functions are tested without them); "
                    "not a bug finding")
    m = _TRITON_NAME_ERROR.search(" ".join(str(e) for e in _chain(exc)))
    if m and not isinstance(exc, NameError):
        # a @triton.jit function reading a name its file imports (a helper of another vLLM module):
        # Triton reports it as its own error (the interpreter's InterpreterError, a compile error)
        for g in _frame_globals(exc):
            why = (g.get(UNRESOLVED) or {}).get(m.group(1))
            if why is not None:
                where = g.get(SOURCE_FILE) or "its file"
                return (f"{where}: a kernel could not be tested: it calls {m.group(1)}, {why}, and the file's "
                        "imports do not resolve here (its functions are tested without them; test the whole "
                        "package with --vllm or --vllm-version X.Y.Z); not a bug finding")
    if isinstance(exc, TypeError):
        m = _STAND_IN_KWARG.match(str(exc))
        if m and m.group(1) in vllm_types.__all__:
            cls = getattr(vllm_types, m.group(1))
            fields = ", ".join(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else "-"
            return (f"needs {m.group(1)}.{m.group(2)}, which eaglefuzz's stand-in lacks (it models {fields}; "
                    "kernels/vllm_types.py): not a bug finding; install vLLM to test it with vLLM's classes")
    return None


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
        name); a CUDA error on a device marks the outcome fatal. Returns ``self``. An exception
        that says the implementation cannot be tested here (:func:`cannot_test`) is raised as
        :class:`CannotTest` instead: a verdict, not a finding."""
        why = cannot_test(exc)
        if why is not None:
            raise CannotTest(why) from None
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
    """The record of one kernel or function under test: the one interface every target has,
    the same for all (as PyTorch's ``OpInfo`` entry). Each folder's ``record.py`` sets
    ``TARGET`` to an instance of a subclass (:class:`TritonTarget`, or
    :class:`~.pyfunc.PythonFunctionTarget`); the registry (:mod:`..targets`) finds it.

    **Identity** (class attributes every record sets; ``tests/test_record_interface.py`` checks
    their types): :attr:`name`, :attr:`runner`, :attr:`module`, :attr:`function`,
    :attr:`section`, :attr:`features`, :attr:`oracle_functions`; optionally :attr:`extremes`,
    :attr:`scale_features`, :attr:`parameters`, :attr:`variants`.

    **Tiers**: :meth:`validate` ``(case, tier)`` and :meth:`tier_of` are defined here once and
    never overridden; a record gives the rules, :meth:`production_rules` and (with an
    ``edges.py``) :meth:`extended_rules`.

    **Roles**: the folder's other files (``roles.ROLES``), found one way
    (:func:`~.roles.find_role`): this class reads its own ``cases.py`` (:meth:`production_case`),
    ``tour.py`` (:attr:`shapes`) and ``edges.py`` (the ``extended_*`` members) through it, and
    everything else asks the registry's ``role(name, role)``.

    **Checking**: :meth:`features_of`, :meth:`check`, :meth:`oracle_check`,
    :meth:`output_tokens` (abstract); the shrink moves and costs have defaults.
    """

    name: str
    """The target's name: unique, its folder's name (``harness/targets/<name>/``), what a user
    types (``--kernel``) and reads (reports, ``corpus/<name>/``). Usually :attr:`function`; a
    target whose function's name another target's module also defines has a name of its own."""
    kind: str
    """What it is (``"triton kernel"``, ``"python function"``): set by the base class."""
    runner: Runner
    """The vLLM model runner whose code it is (:data:`RUNNERS`): ``"V2"`` exactly when
    :attr:`module` lies in :data:`V2_PACKAGE`."""
    module: str
    """The vLLM module file that defines it, as a path inside a vLLM checkout or wheel
    (``vllm/v1/spec_decode/utils.py``): where the vLLM sources look for :attr:`function`."""
    function: str
    """The name :attr:`module` defines it by (vLLM's own, a leading underscore included): what
    every source looks up, and what a user's file or fork defines."""
    section: int
    """Its section of docs/CONTRACT.md (``§N``, whose heading names it); the registry lists the
    targets in this order."""
    features: Mapping[str, str]
    """Semantic feature name -> one-line description; :meth:`features_of` returns a subset."""
    oracle_functions: Mapping[str, str]
    """The oracles, by label: ``"module.function"`` in eaglefuzz's ``oracles/`` package
    (:func:`numpy_and_numba` for the usual pair); :attr:`oracles` imports them on first use."""
    parameters: tuple[str, ...] | None = None
    """The implementation's parameter names as the contract gives them (``None``: unchecked);
    an implementation with others gets an interface verdict, not a bug finding."""
    variants: Mapping[str, Variant] = {}
    """Older interfaces still tested, by name (see :class:`Variant`)."""
    extremes: tuple[str, ...] = ()
    """The features that are production extremes (vLLM's largest batches, offsets, rows, ids,
    positions): every default run reaches each of them, through :meth:`extreme_cases`."""
    scale_features: tuple[str, ...] = ()
    """The features of production scale (:mod:`.scale`: a flat index past ``2**31``, tables of
    8 GiB and more): production, but reached only where a backend holds such cases (``--mode
    device`` on a large GPU); a run elsewhere names them as not reachable there."""

    @property
    def oracles(self) -> Mapping[str, OracleFn]:
        """The oracle functions of :attr:`oracle_functions`, by label, in that order."""
        return {label: oracle(path) for label, path in self.oracle_functions.items()}

    def variant_of(self, impl: Any) -> str | None:
        """The name of the variant whose parameters ``impl`` has (``None``: the contract's own
        interface, or one that is no variant)."""
        if not self.variants:
            return None

        params = parameters_of(impl)
        if params is None or (self.parameters is not None and list(params) == list(self.parameters)):
            return None
        return next((n for n, v in self.variants.items() if list(params) == list(v.parameters)), None)

    array_names: tuple[str, ...] = ()
    """The input arrays in the order of the function's signature (what a reproducer lists
    first); a Triton target's are its ``inputs``."""

    def in_order(self, case: Case) -> Case:
        """``case`` with its arrays in :attr:`array_names`' order (others after them, as they
        come): a case reads the same from a run and from a corpus file (whose keys are sorted)."""
        rank = {n: i for i, n in enumerate(self.array_names)}
        names = sorted(case.arrays, key=lambda n: rank.get(n, len(rank)))
        return Case(case.kernel, {n: case.arrays[n] for n in names}, case.scalars, case.launch, case.note)

    # -- the folder's roles (roles.py: the one lookup) -------------------------------------

    @property
    def folder(self) -> str | None:
        """The package of the target's folder (``None`` for a record outside one: a test double)."""
        return folder_of(type(self).__module__)

    def _role(self, role: str) -> ModuleType | None:
        return find_role(self.folder, role)

    @property
    def shapes(self) -> tuple[Shape, ...]:
        """Cheap-but-large shapes that reach the extremes, cheapest first: the folder's
        ``tour.py`` ``SHAPES`` (none without one)."""
        tour = self._role("tour")
        return tuple(tour.SHAPES) if tour is not None else ()

    def extreme_cases(self, rng: np.random.Generator, scale: Scale) -> list[Case]:
        """The tour of a default run: one case of each of :attr:`shapes`, cheapest first
        (where each runs: :func:`~..checking.fuzz.tour_slots`); together they reach every feature of
        :attr:`extremes`, whatever ``rng``."""
        return [shape.case(rng, scale) for shape in self.shapes]

    def production_case(self, c: Chooser, scale: Scale) -> Case:
        """A production case drawn with ``c``: now and then one of :attr:`shapes`, else an
        ordinary one (the folder's ``cases.py``: ``body(chooser, scale)``; one body for both
        drivers, :mod:`~..generation.choosers`)."""
        return draw_production(c, scale, self.shapes, self._cases().body)

    def _cases(self) -> ModuleType:
        cases = self._role("cases")
        if cases is None:
            raise LookupError(f"{self.name}: its folder has no cases.py (roles.find_role found none)")
        return cases

    def strategy(self, scale: Scale) -> st.SearchStrategy[Case]:
        """In-contract cases, generated by construction (Hypothesis)."""
        return as_strategy(self.production_case, scale)

    def ordinary_strategy(self, scale: Scale) -> st.SearchStrategy[Case]:
        """Ordinary production cases (the folder's ``cases.body``), never one of the tour's
        :attr:`shapes`: what Hypothesis shrinks toward small values (a shape is a short choice,
        so Hypothesis takes it for simple)."""
        return as_strategy(self._cases().body, scale)

    def random_case(self, rng: np.random.Generator, scale: Scale) -> Case:
        """One in-contract case drawn with NumPy alone (bulk mode: no Hypothesis overhead)."""
        return self.production_case(RngChooser(rng), scale)

    # -- the tiers (docs/CONTRACT.md, "Three domains"; harness/checking/domains.py) ---------
    #
    # validate and tier_of are defined here only. The production tier is what
    # production_rules accepts; the extended tier adds what extended_rules accepts (the inputs
    # the contract's N.4 lists as outside, where the reference is still defined). A target
    # without edges.py has no extended tier: its extended_rules are its production rules.

    @final
    def validate(self, case: Case, tier: Tier = PRODUCTION) -> None:
        """Raise :class:`ContractViolation` (``field``, ``rule``) unless ``case`` lies in ``tier``.

        ``"production"``: :meth:`production_rules`. ``"extended"``: the production tier and
        the inputs :meth:`extended_rules` accepts (a case both refuse raises the extended
        tier's violation). Any other tier is a ``ValueError``."""
        if tier == PRODUCTION:
            self.production_rules(case)
            return
        if tier != EXTENDED:
            raise ValueError(f"unknown tier {tier!r} (one of {', '.join(TIERS)})")
        try:
            self.production_rules(case)
        except ContractViolation:
            self.extended_rules(case)

    @final
    def tier_of(self, case: Case, domain: Tier = PRODUCTION) -> Tier:
        """``"production"`` when :meth:`production_rules` accepts ``case``; ``"extended"``
        when the domain is ``"extended"`` and :meth:`extended_rules` accepts it. Otherwise raise
        the production tier's :class:`ContractViolation` (or the extended tier's, naming its
        rule, when the domain is ``"extended"``)."""
        try:
            self.production_rules(case)
            return PRODUCTION
        except ContractViolation:
            if domain != EXTENDED:
                raise
        self.extended_rules(case)
        return EXTENDED

    @abstractmethod
    def production_rules(self, case: Case) -> None:
        """Raise :class:`ContractViolation` when ``case`` is outside the production tier
        (docs/CONTRACT.md N.2); called through :meth:`validate` only."""

    def extended_rules(self, case: Case) -> None:
        """Raise :class:`ContractViolation` when ``case``, which the production tier refuses,
        is outside the extended tier too (docs/CONTRACT.md N.4); called through :meth:`validate`
        only. A record overrides it exactly when its folder has ``edges.py``; by default (no
        extended tier) the production rules' violation stands."""
        self.production_rules(case)

    @property
    def extended_features(self) -> Mapping[str, str]:
        """Edge name -> one-line description (the folder's ``edges.py`` ``FEATURES``; none
        without one); :meth:`extended_features_of` returns a subset."""
        edges = self._role("edges")
        return edges.FEATURES if edges is not None else {}

    def extended_strategy(self, scale: Scale) -> st.SearchStrategy[Case]:
        """Cases of the extended tier, mostly edges, some production cases (``edges.py``; the
        production strategy without one)."""
        edges = self._role("edges")
        return edges.strategy(scale) if edges is not None else self.strategy(scale)

    def extended_case(self, rng: np.random.Generator, scale: Scale) -> Case:
        """One case of the extended tier drawn with NumPy alone (bulk mode)."""
        edges = self._role("edges")
        return edges.random_case(rng, scale) if edges is not None else self.random_case(rng, scale)

    def extended_features_of(self, case: Case) -> frozenset[str]:
        """The edges of the extended tier that ``case`` exercises (empty for production)."""
        edges = self._role("edges")
        return edges.features_of(case) if edges is not None else frozenset()

    def extended_shrink_candidates(self, case: Case) -> Iterator[Case]:
        """Smaller variants of an extended-tier case, on top of :meth:`shrink_candidates`."""
        edges = self._role("edges")
        return edges.shrink_candidates(case) if edges is not None else iter(())

    # -- checking ---------------------------------------------------------------------------

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

    # -- shrinking --------------------------------------------------------------------------

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


class TritonTarget(Target):
    """A Triton kernel: guarded buffers, sentinel-filled outputs, oracles written in place.

    Subclasses give the input dtypes, the output shapes of a case, the launch, how an
    oracle is called, and where an output element lives (request and region).
    """

    kind = "triton kernel"
    inputs: Mapping[str, np.dtype]

    @property
    def array_names(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(self.inputs)

    inout: frozenset[str] = frozenset()
    """Inputs the kernel updates in place (vLLM's ``seq_lens``): the oracles update their copy,
    and the buffer must end up as they left it instead of unchanged (an optional one a case
    leaves out is not updated: Model Runner V2's penalties counts on a non-last pipeline rank)."""

    def aliases(self, case: Case) -> Mapping[str, str]:
        """Output -> the input whose buffer the launch passes for it (vLLM passes ``positions``
        as ``out_clamped_positions``); none by default.

        The oracles still write the output into a buffer of its own; the input's buffer must
        end up holding the input with every element the oracles wrote replaced (the kernel
        reads each element before it overwrites it, as the contract must say).
        """
        return {}

    def _changed_inputs(self, case: Case) -> set[str]:
        return {n for n in self.inout if n in case.arrays} | set(self.aliases(case).values())

    @abstractmethod
    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        """Output name -> (dtype, shape) of the buffer the kernel is given."""

    @abstractmethod
    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        """Launch ``kernel`` on device ``tensors`` (inputs and outputs by name) like vLLM does:
        through its launcher in ``kernels/launchers.py`` (which takes the kernel first, so that
        any implementation is launched the same way), never ``kernel[grid](...)`` here. An
        implementation of a variant (:attr:`variants`) gets no tensor for what it ``lacks``."""

    @abstractmethod
    def call_oracle(self, oracle: OracleFn, case: Case, outputs: Mapping[str, np.ndarray]) -> Any:
        """Call ``oracle`` with the case's inputs, writing into ``outputs`` in place; return
        what it returns. An oracle that bounds its floats and reports the decisions it leaves to
        the run returns its account (``oracles/settlement.py: Settlement``: ``bounds`` per
        output, ``windows``); :meth:`check` compares within those bounds and settles those
        windows with the run's outcome (:meth:`decided`). Any other return is ignored."""

    @abstractmethod
    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        """``(request, region)`` of element ``index`` of output ``array`` (guards included)."""

    # -- shared machinery -------------------------------------------------------------

    def output_tokens(self, case: Case) -> int:
        outs = sum(int(np.prod(shape)) for _, shape in self.output_specs(case).values())
        return outs + sum(case.arrays[n].size for n in self.inout if n in case.arrays)

    def output_bytes(self, case: Case) -> int:
        return sum(int(np.prod(shape)) * np.dtype(dt).itemsize for dt, shape in self.output_specs(case).values())

    def _run_oracle(self, oracle: OracleFn, case: Case, fills: Mapping[str, int],
                    choices: Mapping[Any, Any] | None = None) -> tuple[dict[str, np.ndarray], Any]:  # fmt: skip
        specs = self.output_specs(case)
        outs = {n: filled(dt, shape, fills[n]) for n, (dt, shape) in specs.items()}
        inputs = {n: a.copy() if n in self.inout else _read_only(a) for n, a in case.arrays.items()}
        if choices:  # the run's outcome of each window (docs/CONTRACT.md, "Exactness")
            oracle = functools.partial(oracle, choices=dict(choices))
        account = self.call_oracle(oracle, case.replace(arrays=inputs), outs)
        return outs | {n: inputs[n] for n in self.inout if n in inputs}, account

    def settle(self, case: Case, written: Mapping[str, np.ndarray], fills: Mapping[str, int], device: str) -> Case | None:
        """Where the contract leaves a decision to the backend's arithmetic (docs/CONTRACT.md
        §11.3: compiled division within 2 ulps), ``case`` with those decisions made as the run
        made them, read from ``written`` (each output without its guards; ``fills``: the
        sentinel of an element not written), so that the oracles of the settled case are what
        the contract allows this run to give. ``None`` (the default) where nothing is left
        open: every difference stands. (Oracles that report their windows themselves, as a
        :class:`Settlement`, are settled by :meth:`decided` instead.)"""
        return None

    def decided(self, case: Case, windows: list[Any], written: Mapping[str, np.ndarray]) -> dict[Any, Any]:
        """The run's outcome of each window of ``windows`` (an oracle's account: each with its
        ``key`` and the ``options`` the contract allows) that the record can read from
        ``written`` (each output without its guards), by key. A window it leaves out is
        settled by trying its options (:meth:`expectation`'s search). By default none is read."""
        return {}

    def expectation(self, case: Case, choices: Mapping[Any, Any] | None = None,
                    fills: Mapping[str, int] | None = None) -> Expectation:  # fmt: skip
        """The oracles' expected buffers of ``case`` (:class:`Expectation`), their windows and
        their tolerances; ``choices``: the outcome of each window, by key (an oracle refuses
        one outside its window's options: ``ValueError``); ``fills``: the sentinels to use
        (else chosen as :meth:`expected` says)."""
        specs = self.output_specs(case)
        (first_name, first), *others = self.oracles.items()
        accounts: dict[str, Any] = {}
        if fills is None:
            a, accounts[first_name] = self._run_oracle(
                first, case, {n: -0x5A5A5A5B if dt != np.bool_ else 0xA5 for n, (dt, _) in specs.items()}, choices)
            b, _ = self._run_oracle(first, case, {n: 0x5A5A5A5A if dt != np.bool_ else 0x5A for n, (dt, _) in specs.items()},
                                    choices)  # fmt: skip
            fills, outs = {}, {}
            for n, (dt, _) in specs.items():
                written = raw(a[n]) == raw(b[n])
                fills[n] = pick_sentinel(dt, raw(a[n])[written])
                outs[n] = a[n].copy()
                raw(outs[n])[~written] = fills[n]
            outs |= {n: a[n] for n in self.inout if n in a}
        else:
            outs, accounts[first_name] = self._run_oracle(first, case, fills, choices)
        results = {first_name: outs}
        for oname, oracle in others:
            results[oname], accounts[oname] = self._run_oracle(oracle, case, fills, choices)
        alias = self.aliases(case)
        for res in results.values():
            for out, inp in alias.items():  # the output lands in the input's buffer
                o = res.pop(out)
                merged = res.get(inp, case.arrays[inp]).copy()
                written = raw(o) != fills[out]
                raw(merged)[written] = raw(o)[written]
                res[inp] = merged
        guard_fill = {n: poison(case.arrays[n].dtype) for n in self._changed_inputs(case)} | fills
        buffers = {oname: {n: _with_guards(o, guard_fill[n]) for n, o in res.items()} for oname, res in results.items()}
        tolerances: dict[str, np.ndarray] = {}
        bounds = getattr(accounts[first_name], "bounds", None) or {}
        for n, bound in bounds.items():
            if n in buffers[first_name] and np.any(np.asarray(bound) > 0):
                tolerances[n] = _with_guards(np.asarray(bound, dtype=np.float64), 0)
        return Expectation(dict(fills), buffers, tolerances,
                           {o: tuple(getattr(acc, "windows", None) or ()) for o, acc in accounts.items()})

    def expected(self, case: Case) -> tuple[dict[str, int], dict[str, dict[str, np.ndarray]]]:
        """Per output, a sentinel fill that no written element equals; and, per oracle, the
        expected whole buffers (guards included) when every buffer starts full of its sentinel.

        The first oracle runs over two different fills: elements equal in both runs are the
        ones it writes; the sentinel is a value it never writes, and its expected buffer is its
        result with the sentinel where it wrote nothing. The other oracles run over the sentinel.
        """
        e = self.expectation(case)
        return e.fills, e.results

    def _oracles_disagree(self, case: Case, e: Expectation, locate: Callable[[str, int], tuple[int | None, str]]
                          ) -> list[Difference]:  # fmt: skip
        """Where the oracles disagree: every element (floats the contract bounds within two
        ulps of their dtype or ``1e-9`` of their value: the oracles' own float64 sums differ in
        order only), and the windows each met."""
        names = list(e.results)
        out: list[Difference] = []
        for other in names[1:]:
            versus = f"{names[0]} oracle vs {other} oracle"
            out += compare_all(e.results[names[0]], e.results[other], locate=locate, versus=versus,
                               guards=self._guards(case), tolerances=e.oracle_tolerances())  # fmt: skip
            mine = [(w.key, tuple(w.options)) for w in e.windows[names[0]]]
            theirs = [(w.key, tuple(w.options)) for w in e.windows[other]]
            if mine != theirs:
                out.append(Difference("(windows)", None, mine, theirs, None, "the windows the oracles met", versus))
        return out

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
        return self._oracles_disagree(case, self.expectation(case), self._locator(case))

    def check(self, case: Case, impl: Any, device: str) -> Outcome:
        import torch

        e = self.expectation(case)
        fills = e.fills
        locate = self._locator(case)
        outcome = Outcome()
        outcome.oracle_disagreements += self._oracles_disagree(case, e, locate)
        names = list(e.results)
        exp = e.results
        if not outcome.oracle_disagreements:  # identical: compare the kernel with one of them
            exp = {" = ".join(names): exp[names[0]]}
        variant = self.variants.get(self.variant_of(impl) or "")
        lacks = set(variant.lacks) if variant else set()
        exp = {o: {n: a for n, a in ex.items() if n not in lacks} for o, ex in exp.items()}
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
            changed = self._changed_inputs(case)
            large = {n for n, b in buffers.items() if b.initial is None and n in case.arrays and n not in changed}
            actual = {n: b.read() for n, b in buffers.items() if n not in large}
            large_changes = {n: buffers[n].changes() for n in sorted(large)}  # compared on the device
        except Exception as exc:  # noqa: BLE001 - any failure of the code under test is a finding
            return outcome.crashed(exc, device)
        guards = {n: b.guard for n, b in buffers.items()}
        sentinels = {n: f for n, f in fills.items() if n not in alias}  # an aliased output is in an input's buffer
        for oname, ex in exp.items():
            outcome.differences += compare_all(ex, actual, locate=locate, versus=f"{oname} oracle", guards=guards,
                                               sentinels=sentinels, tolerances=e.tolerances)
        if outcome.differences and not outcome.oracle_disagreements:
            written = {n: actual[n][guards[n] : actual[n].size - guards[n]] for n in actual}
            settled_case = self.settle(case, {n: w for n, w in written.items() if n in sentinels}, sentinels, device)
            if settled_case is not None:  # the V1 division window: all or nothing
                refills, again = self.expected(settled_case)
                ex = {n: a for n, a in next(iter(again.values())).items() if n not in lacks}
                if refills == fills and not compare_all(ex, actual, locate=locate, versus="oracle", guards=guards,
                                                        sentinels=sentinels):  # fmt: skip
                    outcome.differences = []
            else:
                settled = self._settle_windows(case, e, written)
                if settled is not None:  # what differs from the contract given the run's outcome in each window
                    ex = {n: a for n, a in next(iter(settled.results.values())).items() if n not in lacks}
                    outcome.differences = compare_all(
                        ex, actual, locate=locate, versus=f"{' = '.join(names)} oracle (the run's outcome in each "
                        "window)", guards=guards, sentinels=sentinels, tolerances=settled.tolerances)  # fmt: skip
        inputs_expected = {n: b.initial for n, b in buffers.items() if n in case.arrays and n not in changed | large}
        outcome.differences += compare_all(inputs_expected, actual, locate=locate, versus="input as given", guards=guards)
        for n, found in large_changes.items():
            floats = case.arrays[n].dtype.name if case.arrays[n].dtype.kind == "f" else None
            outcome.differences += [Difference(n, i, e_, a, *locate(n, i), "input as given", None, floats)
                                    for i, e_, a in found]
        return outcome

    def _settle_windows(self, case: Case, e: Expectation, written: Mapping[str, np.ndarray]) -> Expectation | None:
        """The expectation of ``case`` with each window its first oracle met (its account's
        ``windows``: the decisions the contract leaves to the run) decided as the run decided
        it: read from the run's outputs (:meth:`decided`), else the combination of the open
        windows' options (in order, at most :data:`WINDOW_SEARCH`) whose expectation the run's
        outputs agree with (else the first). ``None`` when no window was met, or when the run's
        outcome is no option of its window (an oracle refuses it): the differences stand. A
        decision outside every window is never the run's: the oracles follow a choice only
        inside its window."""
        first = next(iter(e.windows), None)
        if first is None or not e.windows[first]:
            return None
        choices: dict[Any, Any] = {}
        current = e
        for _ in range(WINDOW_ROUNDS):
            open_ = [w for w in current.windows[first] if w.key not in choices]
            if not open_:
                break
            read = self.decided(case, open_, written)
            choices.update({w.key: read[w.key] for w in open_ if w.key in read})
            unread = [w for w in open_ if w.key not in choices]
            found: tuple[Expectation, dict[Any, Any]] | None = None
            for combo in _combinations(unread):
                try:
                    trial = self.expectation(case, {**choices, **combo}, fills=e.fills)
                except ValueError:  # the run's outcome lies outside its window: no settlement
                    return None
                if found is None or _agrees(trial, written):
                    found = (trial, combo)
                    if _agrees(trial, written):
                        break
            assert found is not None  # _combinations yields at least one (empty) combination
            current, combo = found
            choices.update(combo)
        return current


WINDOW_ROUNDS = 8
"""Rounds of settling an oracle's windows (a window decided one way may open another)."""
WINDOW_SEARCH = 64
"""The most combinations of unread windows' options tried for the one a run agrees with."""


@dataclass
class Expectation:
    """What the oracles expect of one case: the sentinel ``fills``; per oracle, the whole
    expected ``results`` buffers (guards included); ``tolerances``: per float buffer, each
    element's bound (guards included, 0 where the contract fixes the element bit for bit),
    from the first oracle's account; ``windows``: per oracle, the windows its account met (the
    decisions the contract leaves to the run: docs/CONTRACT.md, "Model Runner V2's
    verification")."""

    fills: dict[str, int]
    results: dict[str, dict[str, np.ndarray]]
    tolerances: dict[str, np.ndarray] = field(default_factory=dict)
    windows: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def oracle_tolerances(self) -> dict[str, np.ndarray]:
        """How far the oracles may lie apart where the contract bounds an element: two ulps of
        its dtype or ``1e-9`` of its value (they round the same float64 formula, summed in
        another order)."""
        first = next(iter(self.results.values()))
        out = {}
        for n, tol in self.tolerances.items():
            v = np.abs(first[n].astype(np.float64))
            v = np.where(np.isfinite(v), v, 0.0)
            ulp = np.spacing(v.astype(first[n].dtype)).astype(np.float64)
            out[n] = np.where(tol > 0, np.maximum(2 * ulp, 1e-9 * v), 0.0)
        return out


def _combinations(windows: list[Any]) -> Iterator[dict[Any, Any]]:
    """The windows' outcomes, every combination of their options in order (the first: each
    window's nominal outcome, ``chosen``), at most :data:`WINDOW_SEARCH`."""
    import itertools

    options = [tuple(dict.fromkeys((w.chosen, *w.options))) for w in windows]
    for k, combo in enumerate(itertools.product(*options)):
        if k >= WINDOW_SEARCH:
            return
        yield {w.key: c for w, c in zip(windows, combo, strict=True)}


def _agrees(e: Expectation, written: Mapping[str, np.ndarray]) -> bool:
    """Whether the run's outputs ``written`` (without guards) are the first oracle's expected
    ones of ``e`` (floats within their tolerances)."""
    from ..core.compare import compare_arrays

    for n, buf in next(iter(e.results.values())).items():
        if n not in written:
            continue
        g = (buf.size - written[n].size) // 2
        tol = e.tolerances.get(n)
        if compare_arrays(n, buf[g : buf.size - g], written[n].reshape(-1), locate=lambda a, i: (None, ""), versus="",
                          tolerance=None if tol is None else tol[g : tol.size - g]):  # fmt: skip
            return False
    return True


def _read_only(a: np.ndarray) -> np.ndarray:
    """A view of input ``a`` that an oracle cannot write (an oracle never writes an input it is
    not told to update; this way a table of billions is not copied for each oracle run)."""
    v = a.view()
    v.flags.writeable = False
    return v


def _with_guards(a: np.ndarray, fill: int) -> np.ndarray:
    """``a`` flattened, between two guard bands of ``fill`` as long as :func:`guard_for` says."""
    g, n = guard_for(a.size), a.size
    out = np.empty(2 * g + n, dtype=a.dtype)
    bits = out.view(f"u{out.itemsize}")  # bands and values as bit patterns: NaN payloads, bool bytes kept
    band = filled(a.dtype, (1,), fill).view(bits.dtype)[0]
    bits[:g], bits[g + n :] = band, band
    bits[g : g + n] = np.ascontiguousarray(a).reshape(-1).view(bits.dtype)
    return out
