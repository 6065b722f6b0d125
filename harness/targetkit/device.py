"""What a target needs to be fuzzed on the GPU end to end, and the buffers it runs in.

A :class:`DeviceTarget` draws a production case directly on the device (:class:`DeviceCase`:
tensors, with the few sizes the launch needs known on the host), asks the torch oracle
(:mod:`eaglefuzz.oracles.tensor_ops`) for the elements the contract writes, launches the
implementation as vLLM does, and turns a case into a plain :class:`~...core.case.Case` when one must
be reported, shrunk or cross-checked against the NumPy and Numba oracles.

:class:`Arenas` holds every array of a case, inputs and outputs, in one buffer per storage
dtype, each array between guard bands. Untouched elements hold a sentinel (bool outputs the
byte ``0xA5``, neither False nor True); an element the contract writes holds, before the
launch, its expected value with the lowest bit flipped, so that a missing write always shows,
without a second oracle run to learn which elements are written. The expected buffers are the
pre-filled ones with the oracle's values scattered in; one comparison per buffer checks every
element, guard bands and inputs included. :class:`HostArenas` is the same on the host, in
NumPy, for targets whose cases are small (``checked_on = "host"``): only the launch runs on the
device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ...oracles.host_copy import host_to
from ..core.case import Case
from ..generation.strategies import Scale
from .device_draws import to_device
from .scale import flat_limit

GUARD = 256
"""Elements of guard band around every array in an arena."""

_SENTINEL = {torch.int32: -0x5A5A5A5B, torch.int64: -0x5A5A5A5A5A5A5A5B, torch.uint8: 0xA5}


@dataclass
class DeviceCase:
    """One case drawn on the device.

    ``inputs``: input tensors by the contract's names (on the device; NumPy arrays for a target
    checked on the host); ``outputs``: each
    output's dtype and element count; ``scalars``: the scalar arguments; ``host``: sizes known
    on the host (for the launch grid: no device-to-host copy).
    """

    inputs: dict[str, Any]
    outputs: dict[str, tuple[torch.dtype, int]]
    scalars: dict[str, Any]
    host: dict[str, int] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Output elements one check verifies (as :meth:`Target.output_tokens` counts them)."""
        return sum(k for _, k in self.outputs.values())


class DeviceTarget:
    """A target's device pieces: its folder's ``device.py`` (``DEVICE``, an instance)."""

    name: str
    """The target's name (a key of :data:`~..targets.TARGETS`)."""
    launch_names: tuple[str, ...] = ()
    """The launch fields of the target's cases (its record's ``launch_names``): a case drawn on
    the device is launched as vLLM launches it, every field ``null``."""
    checked_on: str = "device"
    """``device``: draw, oracle and compare on the GPU (large cases; :class:`Arenas`); ``host``:
    everything but the launch on the CPU in NumPy (:class:`HostArenas`), the buffers copied over
    and back once per dtype (cases of a few thousand elements, where each device operation, or
    each torch operation on the host, costs more in overhead than in work)."""
    oracle_name: str = "torch oracle (oracles/tensor_ops.py)"
    """The oracle :meth:`oracle` runs, as reports name it."""
    scale_by_rows: bool = False
    """Whether a production-scale case is checked by :meth:`scale_check` (a torch oracle a
    block of rows at a time, confirmed on the rows that matter: tables of tens of GB) rather
    than in :class:`Arenas` whole."""

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int) -> DeviceCase:
        """A production case of at most ``max_requests`` requests: sizes and modes from ``rng``
        (host), contents from ``gen`` (device). Each module's default ``max_requests`` is the
        production scale; a CPU run (the tests, the interpreter) passes a small one."""
        raise NotImplementedError

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[Any, Any]]:
        """The contract's writes, ``{output: (flat index, value)}`` (:func:`written_parts`:
        with a bound, or a tensor's index a mask): tensors (:mod:`~eaglefuzz.oracles.tensor_ops`),
        or NumPy arrays (flat indices) for a target checked on the host."""
        raise NotImplementedError

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        """Launch ``impl`` on ``views`` (every input and output by name) as vLLM does."""
        raise NotImplementedError

    def oracle_many(self, dcs: list[DeviceCase]) -> list[dict[str, tuple[Any, Any]]]:
        """:meth:`oracle` of each case of ``dcs`` (a host batch), the same writes, computed
        together where a target knows how (one oracle call for many cases costs the per-call
        overhead once)."""
        return [self.oracle(dc) for dc in dcs]

    def host_features(self, dc: DeviceCase, writes: dict[str, tuple[Any, Any]]) -> frozenset[str] | None:
        """A target checked on the host: the features the record's ``features_of`` gives the
        drawn case ``dc`` (its :meth:`oracle`'s ``writes`` at hand), computed faster where a
        target knows how (the producers count them for every case of a clean batch); ``None``:
        the record's ``features_of`` itself."""
        return None

    host_batch_size: int = 0
    """A target checked on the host: cases per host batch on a GPU
    (:class:`~.device_batch.HostBatchArenas`); 0: the engine's ``HOST_BATCH``."""
    batch: int = 0
    """Cases per batch on a GPU (:meth:`draw_batch`: one draw, oracle and comparison for all of
    them, the implementation launched once per case); 0: a case at a time."""
    table_epoch: int = 1
    """Consecutive batches that share their large inputs (:meth:`draw_batch`'s ``seeds[0]``)."""
    _epoch: tuple[Any, Any] = (None, None)
    """A target of table epochs: the key of the epoch whose large inputs it keeps between
    batches, and those inputs (GBs of the GPU's memory; :meth:`release_tables`)."""

    def release_tables(self) -> None:
        """Forget the large inputs kept between batches (:attr:`_epoch`), so that their memory
        goes back when a run ends: the next target of the process, or another process (a lane),
        can use it; a later run draws them again from their seed, the same."""
        self._epoch = (None, None)

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int) -> Any:
        """``k`` production cases drawn together (a :class:`~.device_batch.DeviceBatch`):
        ``seeds`` the large inputs' (shared by :attr:`table_epoch` batches) and the batch's."""
        raise NotImplementedError

    batch_decides: frozenset[str] = frozenset()
    """The features :meth:`batch_features` decides for every case of a batch (the others come
    from the cases checked on the host)."""

    def batch_features(self, batch: Any, writes: dict | None = None) -> list[frozenset[str]]:
        """Each case's features among :attr:`batch_decides`, from what the host knows of the
        batch (its sizes and modes) and the batched oracle's ``writes`` (``None``: not given,
        the features they decide left out): exactly what the record's ``features_of`` gives
        them."""
        return [frozenset()] * len(batch)

    def oracle_batch(self, batch: Any) -> dict[str, tuple[Any, Any]]:
        """:meth:`oracle` of every case of ``batch`` at once: each output's flat indices in the
        concatenation of the cases' outputs, or a mask over that concatenation."""
        raise NotImplementedError

    record: Any = None
    """The target's record (its folder's ``TARGET``), for :meth:`from_case`."""
    scale: bool = False
    """Whether the target has production-scale cases (:meth:`scale_case`: a flat index past
    ``2**31``), which ``--mode device`` runs in a process of their own."""

    def scale_case(self, rng: np.random.Generator) -> Case | None:
        """A production case past ``2**31`` elements (:mod:`.scale`), drawn on the host with
        ``rng`` alone (a worker that did not draw it makes it again from the same seed); ``None``
        for a target without such products."""
        return None

    def scale_minimal(self, case: Case) -> list[Case]:
        """The smallest cases of :meth:`scale_case`'s kind that read past ``2**31`` like
        ``case`` (one row past it, plain values), simplest first: what a scale finding is
        minimised to (the first that still fails)."""
        return []

    def scale_check(self, impl: Any, case: Case, device: str, confirm: bool) -> tuple[int, int, Any]:
        """A target checked by its record (:class:`RecordDevice`): production-scale ``case`` run
        on ``device`` and checked there without a host copy of its tables (a torch oracle, a
        block of rows at a time: :mod:`.scale_rows`). Returns the elements not as expected, the
        elements verified, and, with ``confirm`` and a difference, the outcome of the NumPy and
        Numba oracles on the rows that matter (an :class:`~.base.Outcome`; ``None`` otherwise).
        Targets checked on the device check a scale case in :class:`Arenas` instead."""
        raise NotImplementedError(f"{self.name}: no production-scale check")

    not_drawn: dict[str, str] = {}
    """Production features the device draws leave out, each with the contract's reason: inputs
    its §N.4 lists as generated by the harness (accepted by ``validate()``, never made by vLLM's
    call sites), which the device draws do not make since they hold to §N.2. Every other
    production feature but the scale ones is reached (tests/test_device.py checks the
    targets whose draws are cheap at the GPU size)."""

    scale_batches: bool = False
    """Whether the target's production-scale examples are batches drawn on the device
    (:meth:`draw_batch` with ``scale=True``: every case past ``2**31`` elements over shared
    tables, checked as an ordinary batch in the scale lane) rather than one case drawn with
    NumPy (:meth:`scale_case`); such a target gives :meth:`scale_batch_vocab` and
    :meth:`scale_minimal_of`."""

    scale_batch_size: int = 0
    """Cases per production-scale batch on a GPU (0: the scale lane's ``SCALE_BATCH``): more for
    a kernel that reads a few elements a row, whose batch would otherwise spend as long checking
    its shared tables (every element, once a batch) as launching its cases."""

    def scale_batch_vocab(self, tables_seed: int) -> int:
        """The vocabulary of the scale batches whose tables are drawn from ``tables_seed`` (known
        on the host without drawing them: a scale batch's finding is minimised by it)."""
        raise NotImplementedError(f"{self.name}: no production-scale batches")

    def scale_minimal_of(self, V: int) -> list[Case]:  # noqa: N803
        """:meth:`scale_minimal`'s cases for vocabulary ``V`` (a scale batch's)."""
        raise NotImplementedError(f"{self.name}: no production-scale batches")

    def checks_at_scale(self, case: Case) -> bool:
        """Whether :meth:`scale_check` takes ``case`` (a case of the kind :meth:`scale_case`
        draws; the others go through the record's check)."""
        return True

    def reached(self, case: Case) -> frozenset[str]:
        """The features ``case`` reaches, as the run's coverage counts them (a production-scale
        case's at least; by default all of the record's)."""
        return self.record.features_of(case)

    def from_case(self, case: Case, device: str) -> DeviceCase:
        """``case`` on the device, launched as vLLM launches it (every launch field ``null``)."""
        specs = self.record.output_specs(case)
        return DeviceCase(
            inputs={n: to_device(a, device) for n, a in case.arrays.items()},
            outputs={n: (_TORCH[np.dtype(dt)], int(np.prod(shape))) for n, (dt, shape) in specs.items()},
            scalars=dict(case.scalars),
        )

    def to_case(self, dc: DeviceCase) -> Case:
        """The same case as a plain :class:`~..core.case.Case` (host arrays; vLLM's own launch)."""
        return Case(
            kernel=self.name,
            arrays={n: t if isinstance(t, np.ndarray) else t.cpu().numpy() for n, t in dc.inputs.items()},
            scalars=dict(dc.scalars),
            launch=dict.fromkeys(self.launch_names),
            note="drawn on the device (eaglefuzz fuzz --mode device)",
        )


DEVICE_SCALE = Scale(max_requests=1024, request_tail=4096, max_query_len=8192, max_programs=1 << 22)
"""The batches a :class:`RecordDevice` draws: up to 1024 requests (a tail to 4096, vLLM's large
``max_num_seqs``), prefills of up to 8192 tokens."""


class RecordDevice(DeviceTarget):
    """The device mode a target has from its record alone (:func:`record_device`: a new
    target's, before its ``device.py`` draws on the device; the base of the scale lane's
    :class:`~.scale_device.ScaleRecordDevice`): production cases drawn on the host by the
    record's generator at :data:`DEVICE_SCALE`. A Triton kernel's cases are checked in record host batches
    (:meth:`host_expectation`: the producer processes run the record's first (NumPy) oracle and
    lay the cases out in a :class:`~.device_batch.HostBatchArenas`; every element and guard band
    compared, bounded floats within their bounds), a share of them and every difference by the
    record's check (the NumPy and Numba oracles, settlement); a torch function's a case at a
    time by its record's check."""

    checked_on = "record"
    oracle_name = "the record's first (NumPy) oracle, in a record host batch"

    def draw(self, rng: np.random.Generator, gen: Any, device: str, max_requests: int | None = None) -> DeviceCase:
        case = self.draw_case(rng, max_requests)
        specs = self.record.output_specs(case) if hasattr(self.record, "output_specs") else {}
        return DeviceCase(dict(case.arrays), {n: (_TORCH[np.dtype(dt)], int(np.prod(shape))) for n, (dt, shape) in specs.items()},
                          dict(case.scalars), {"launch": dict(case.launch)})

    def draw_case(self, rng: np.random.Generator, max_requests: int | None = None) -> Case:
        """A production case of the record's generator; ``max_requests``: a small scale (tests)."""
        scale = DEVICE_SCALE if max_requests is None else Scale(max_requests, max_requests, 16, 64)
        return self.record.random_case(rng, scale)

    def to_case(self, dc: DeviceCase) -> Case:
        return Case(self.name, dict(dc.inputs), dict(dc.scalars), dict(dc.host.get("launch", {})),
                    note=dc.host.get("note", "drawn for the device (eaglefuzz fuzz --mode device)"))

    def batches_on_host(self, impl: Any) -> bool:
        """Whether the cases of ``impl`` are checked in record host batches
        (:meth:`host_expectation`, :class:`~.device_batch.HostBatchArenas`): a Triton kernel's
        record launched with every output (not a variant that lacks some). A torch function
        (its record calls it, no buffers) is checked a case at a time by its record's check."""
        from .base import TritonTarget

        if not isinstance(self.record, TritonTarget):
            return False
        variant = self.record.variants.get(self.record.variant_of(impl) or "")
        return not (variant and variant.lacks)

    def host_expectation(self, case: Case) -> tuple[DeviceCase, dict[str, tuple[np.ndarray, np.ndarray]], RecordExpectation]:
        """``case`` as a :class:`DeviceCase` of host arrays, the elements the record's first
        (NumPy) oracle writes (``{array: (flat index, value)}``, as :meth:`DeviceTarget.oracle`
        gives them for :class:`HostArenas`) and what else a record host batch needs of the case
        (:class:`RecordExpectation`), exactly as the record's check expects it
        (:meth:`~.base.TritonTarget.expectation`): an output the launch passes in an input's
        buffer (an alias) lands there, an input the kernel updates in place (``inout``) ends as
        the oracle left it; the elements the oracle writes are those it writes over a first
        fill, and, only where one of them holds that fill's value, over a second one too."""
        from ..core.buffers import filled, raw

        record = self.record
        specs = record.output_specs(case)
        first = next(iter(record.oracles.values()))
        fill_a = {n: _FILL_A if np.dtype(dt) != np.bool_ else 0xA5 for n, (dt, _) in specs.items()}
        a, account = record._run_oracle(first, case, fill_a)
        written: dict[str, np.ndarray] = {}
        b = None
        for n, (dt, _) in specs.items():
            fa = raw(filled(dt, (1,), fill_a[n]))[0]
            ra = raw(a[n]).reshape(-1)
            if b is None and np.any(ra == fa):  # a written element holds the fill, or none is written there
                b, _ = record._run_oracle(first, case, {m: 0x5A5A5A5A if np.dtype(d) != np.bool_ else 0x5A
                                                        for m, (d, _) in specs.items()})
            written[n] = ra == raw(b[n]).reshape(-1) if b is not None else ra != fa
        alias = record.aliases(case)
        final = {n: a[n] for n in record.inout if n in a and n in case.arrays}
        for out, inp in alias.items():  # the output lands in the input's buffer
            merged = final.get(inp, case.arrays[inp]).copy()
            raw(merged).reshape(-1)[written[out]] = raw(a[out]).reshape(-1)[written[out]]
            final[inp] = merged
        loose: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        for n, bound in (getattr(account, "bounds", None) or {}).items():
            bound = np.asarray(bound, dtype=np.float64).reshape(-1)
            if n in alias or not (n in final or n in specs) or not np.any(bound > 0):
                continue
            value = final[n] if n in final else a[n]
            index = np.flatnonzero((bound > 0) & (written[n] if n in written else True))
            expected = value.reshape(-1)[index]
            if n in final:  # the kernel reads it: it holds the input before the launch
                before = raw(case.arrays[n]).reshape(-1)[index]
            else:  # left out of the writes below: the sentinel before the launch, and as expected
                before = np.full(index.size, _SENTINEL[_storage(_TORCH[expected.dtype])], raw(expected).dtype)
                written[n] = written[n].copy()
                written[n][index] = False
            loose[n] = (index, expected, before, bound[index])
        writes: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for n in specs:
            if n not in alias:
                index = np.flatnonzero(written[n])
                writes[n] = (index, a[n].reshape(-1)[index])
        for n, v in final.items():  # the elements an in-place input must end up changed
            index = np.flatnonzero(raw(v).reshape(-1) != raw(case.arrays[n]).reshape(-1))
            writes[n] = (index, v.reshape(-1)[index])
        dc = DeviceCase(dict(case.arrays),
                        {n: (_TORCH[np.dtype(dt)], int(np.prod(shape))) for n, (dt, shape) in specs.items() if n not in alias},
                        dict(case.scalars), {"launch": dict(case.launch), "note": case.note})
        shapes = {n: tuple(shape) for n, (_, shape) in specs.items() if n not in alias and len(shape) > 1}
        return dc, writes, RecordExpectation(shapes, dict(alias), loose, bool(getattr(account, "windows", None)),
                                             record.output_tokens(case), {n: case.arrays[n] for n in writes if n in final})


def record_device(record: Any) -> RecordDevice:
    """The device mode a target has from its record alone (the newer targets' before their own
    ``device.py`` drew on the device; a new target's): its cases drawn by the record's generator
    and checked in record host batches (a torch function's a case at a time)."""
    dt = RecordDevice()
    dt.name, dt.record, dt.launch_names = record.name, record, tuple(getattr(record, "launch_names", ()))
    return dt


_FILL_A = -0x5A5A5A5B
"""The fill of :meth:`RecordDevice.host_expectation`'s oracle run (the record check's first)."""


@dataclass
class RecordExpectation:
    """What a record host batch needs of a case besides its buffers
    (:meth:`RecordDevice.host_expectation`): ``shapes``, the outputs' shapes the launch passes
    (multi-dimensional ones); ``alias``, output -> the input whose buffer the launch passes for
    it; ``loose``, per array, the elements the contract fixes only within a bound (the first
    oracle's account), as ``(flat index, expected value, value before the launch (raw bits),
    bound)``: an output's hold the sentinel before the launch and in the batch's expected
    buffers (a value within the bound of the expected one, its lowest bit flipped, would pass
    for a write), an in-place input's its input; ``windows``, whether the oracle met decisions the contract leaves to the run (its
    expectation is one of the run's options); ``tokens``, the output elements the case verifies
    (the record's ``output_tokens``); ``inputs``, the inputs the launch changes (in place, or an
    output written into them) as drawn (a batch's expected buffers hold them as the launch must
    leave them). An element outside ``loose`` must match bit for bit; a case whose oracle met
    windows is settled by the record's check wherever it differs."""

    shapes: dict[str, tuple[int, ...]]
    alias: dict[str, str]
    loose: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    windows: bool
    tokens: int
    inputs: dict[str, np.ndarray] = field(default_factory=dict)


_NUMPY_OF = {torch.int32: np.int32, torch.int64: np.int64, torch.uint8: np.uint8,
             torch.float32: np.float32, torch.float64: np.float64}
_STORAGE = {torch.bool: torch.uint8, torch.float32: torch.int32, torch.float64: torch.int64}
"""Arrays of these dtypes live in the buffer of an integer dtype of their width, as its bits:
one buffer fewer, and the comparison is bit for bit (NaN, ``-0.0``, a table left as given)."""


def _storage(dtype: torch.dtype) -> torch.dtype:
    return _STORAGE.get(dtype, dtype)


def _bits(value: Any, dtype: torch.dtype) -> Any:
    """``value`` (a tensor or a NumPy array) converted to the array's ``dtype``, as the bits
    of its storage dtype (bool as is)."""
    if dtype == torch.bool:
        return value
    if isinstance(value, np.ndarray):
        return value.astype(_NUMPY_OF[dtype], copy=False).view(_NUMPY[_storage(dtype)])
    return value.to(dtype).view(_storage(dtype))


def _layout(shapes: dict[str, tuple[torch.dtype, int]]) -> tuple[dict[str, int], dict[torch.dtype, int]]:
    """Each array's offset in its storage dtype's buffer, and each buffer's size (the last
    guard band not counted). Every array starts 16-byte aligned, as vLLM's fresh allocations
    do: Triton specializes a kernel on its pointers' alignment, so ragged offsets would make it
    compile a new variant for case after case. The first array of a buffer comes after a band
    of :func:`lead` elements."""
    offset: dict[str, int] = {}
    sizes: dict[torch.dtype, int] = {}
    leads: dict[torch.dtype, int] = {}
    for dt, k in shapes.values():
        leads[_storage(dt)] = max(leads.get(_storage(dt), 0), k)
    for n, (dt, k) in shapes.items():
        s = _storage(dt)
        offset[n] = -(-(sizes[s] + GUARD if s in sizes else lead(leads[s])) // 16) * 16
        sizes[s] = offset[n] + k
    return offset, sizes


def lead(largest: int) -> int:
    """The band before a buffer's first array, for a buffer whose largest array has ``largest``
    elements: a write up to one array's length before any array of the buffer (a row ``-1`` of
    a table, an offset wrapped below 0) lands in the buffer, where the comparison sees it, not
    outside it (at least :data:`GUARD`, at most :data:`BIG`)."""
    return max(GUARD, min(int(largest), BIG))


BIG = 1 << 26
"""Inputs of at least this many elements (probability tables, noise: up to billions at
production scale) get a buffer of their own (:class:`_Big`) instead of a place in an arena."""

WRAP_GUARD = (1 << 31) + (1 << 20)
"""Elements of poison before a big input (fewer when the input is smaller): a flat index that
wraps around int32 lands at most ``2**31`` elements before the element it meant, so its read
returns the poison, the same on every run, instead of whatever lies there."""

_POISON_BITS = {torch.int32: 0x4B4B4B4B, torch.int64: 0x4B4B4B4B4B4B4B4B, torch.uint8: 0xA5}
"""The inputs' guard fill (as core/buffers.py's poison: float32 13323083.0, no probability)."""


def _big_from() -> int:
    """:data:`BIG`, or less under a test's lower flat limit (:func:`~.scale.flat_limit`)."""
    return min(BIG, flat_limit() // 2)


def _wrap_guard() -> int:
    """:data:`WRAP_GUARD`, in proportion under a test's lower flat limit."""
    return flat_limit() + flat_limit() // 2048


def band_before(n: int) -> int:
    """Elements of poison before a large input of ``n`` elements (:class:`_Big`): as far as an
    int32 wrap reaches (:data:`WRAP_GUARD`, no further than ``n``) where its own flat indices
    pass the flat limit (``n > 2**31``: a production-scale table or noise); otherwise the band
    of any other array (:func:`lead`: one array's length, at most :data:`BIG`), since an
    in-bounds index of it cannot wrap. (A band of ``n`` there doubled each guarded table: four
    lanes of the rejection sampler's large-table targets did not fit an 80 GB GPU.)"""
    return min(n, _wrap_guard()) if n > flat_limit() else lead(n)


class _Big:
    """A large input alone in a buffer: ``before`` elements of poison (:func:`band_before`),
    the input, then :data:`GUARD` more; checked against the tensor it was copied from (no second copy), but
    where ``writes`` (:func:`written_parts`: distinct flat indices, their expected values and
    bounds) say the kernel updates it in place."""

    def __init__(self, t: torch.Tensor, device: str, writes: tuple[Any, ...] | None = None) -> None:
        self.tensor = t
        self.writes = None if writes is None else indexed(writes)
        self.source = t.reshape(-1)
        s = _storage(t.dtype)
        n = self.source.numel()
        self.before = band_before(n)
        self.full = torch.full((self.before + n + GUARD,), _POISON_BITS[s], dtype=s, device=device)
        self.mid = self.full[self.before : self.before + n]
        self.mid.copy_(self.source.view(s) if s != t.dtype else self.source)
        self.view = self.mid.view(t.dtype) if s != t.dtype else self.mid

    def mismatch(self) -> torch.Tensor:
        s = self.full.dtype
        src = self.source.view(s) if s != self.source.dtype else self.source
        total = ((self.full[: self.before] != _POISON_BITS[s]).sum() + (self.full[self.before + src.numel() :] != _POISON_BITS[s]).sum()
                 + (self.mid != src).sum())
        if self.writes is not None:  # a written element counts where it is not as expected, not where it changed
            index, value, bound = self.writes
            at = self.mid[index]
            total = total - (at != src[index]).sum()
            if bound is None:
                total = total + (at != _bits(value.to(self.tensor.dtype), self.tensor.dtype)).sum()
            else:
                total = total + bounded_mismatch(at.view(self.tensor.dtype) if s != self.tensor.dtype else at, value, bound).sum()
        return total


class Arenas:
    """Every array of ``dc`` in one guarded buffer per storage dtype, pre-filled for ``writes``;
    an input of :data:`BIG` elements or more in a buffer of its own (:class:`_Big`)."""

    def __init__(self, dc: DeviceCase, writes: dict[str, tuple[torch.Tensor, ...]], device: str) -> None:
        """``writes``: per array ``(flat index, value)``, or ``(flat index, value, bound)``
        where the contract fixes some of them only within a bound (:func:`written_parts`)."""
        self.big = {n: _Big(t, device) for n, t in dc.inputs.items() if t.numel() >= _big_from() and n not in writes}
        shapes = {n: (t.dtype, t.numel()) for n, t in dc.inputs.items() if n not in self.big} | dc.outputs
        self.offset, sizes = _layout(shapes)
        self.full = {s: torch.full((size + GUARD,), _SENTINEL[s], dtype=s, device=device) for s, size in sizes.items()}
        self.views: dict[str, torch.Tensor] = {}
        for n, (dt, k) in shapes.items():
            buf = self.full[_storage(dt)]
            v = buf[self.offset[n] : self.offset[n] + k]
            self.views[n] = v.view(dt) if dt != _storage(dt) else v
        for n, t in dc.inputs.items():
            if n not in self.big:
                self.views[n].copy_(t.reshape(-1))
        self.loose: dict[torch.dtype, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = {}
        writes = {n: indexed(w) for n, w in writes.items()}
        for n, (index, value, bound) in writes.items():
            dt = shapes[n][0]
            s = _storage(dt)
            place = self.offset[n] + index
            if bound is not None:
                self.loose.setdefault(s, []).append((place, value.to(dt), bound))
            if value.dtype != torch.bool and n not in dc.inputs:  # an input updated in place holds what the kernel reads
                self.full[s][place] = prefill(_bits(value, dt), bound, s)
        self.expected = {s: b.clone() for s, b in self.full.items()}
        for n, (index, value, _) in writes.items():
            dt = shapes[n][0]
            self.expected[_storage(dt)][self.offset[n] + index] = value.to(torch.uint8) if dt == torch.bool else _bits(value, dt)
        self.shapes = {n: t.shape for n, t in dc.inputs.items()}
        self.views = self._shaped(self.views | {n: b.view for n, b in self.big.items()})

    def _shaped(self, views: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        # inputs keep their shape (a 2-D id matrix, a strided view)
        return {n: v.view(self.shapes[n]) if n in self.shapes and len(self.shapes[n]) > 1 else v for n, v in views.items()}

    def mismatch(self) -> torch.Tensor:
        """A device scalar: the number of elements, over every buffer, that are not as expected
        (a bounded element: not within its bound of its expected value)."""
        return mismatch_count(self.full, self.expected, self.loose) + sum(b.mismatch() for b in self.big.values())


def written_parts(w: tuple[Any, ...]) -> tuple[Any, Any, Any]:
    """An oracle's writes to one array: ``(flat index, value)``, every element exact, or
    ``(flat index, value, bound)``, each element's bound (float64; 0: bit for bit), for the
    outputs the contract fixes only within a bound. The flat index may be a mask instead (a
    bool tensor over the whole array, a value and a bound for each of its elements: the
    elements where it is set are written), as a torch index is. Returns the three, ``bound``
    ``None`` where none is given (a mask stays a mask: :func:`indexed` makes it flat
    indices)."""
    return (w[0], w[1], w[2]) if len(w) > 2 else (w[0], w[1], None)


def is_mask(index: Any) -> bool:
    """Whether a write's index is a mask (:func:`written_parts`)."""
    return isinstance(index, torch.Tensor) and index.dtype == torch.bool


def indexed(w: tuple[Any, ...]) -> tuple[Any, Any, Any]:
    """:func:`written_parts` of ``w``, a mask made flat indices (its set elements, in order)
    and the values and bounds of those."""
    index, value, bound = written_parts(w)
    if not is_mask(index):
        return index, value, bound
    if value.numel() != index.numel():
        raise ValueError(f"a write's mask of {index.numel()} elements, {value.numel()} values (one value per element)")
    mask = index.reshape(-1)
    return (mask.nonzero().reshape(-1), value.reshape(-1)[mask],
            None if bound is None else bound.broadcast_to(index.shape).reshape(-1)[mask])


def prefill(bits: torch.Tensor, bound: torch.Tensor | None, storage: torch.dtype) -> torch.Tensor:
    """What an output's written element holds before the launch: its expected bits with the
    lowest bit flipped (a kernel that skips it leaves a difference), or the sentinel fill where
    it is bounded (a flipped bit would lie within its bound)."""
    flipped = bits ^ 1
    if bound is None:
        return flipped
    return torch.where(bound > 0, torch.full_like(flipped, _SENTINEL[storage]), flipped)


def mismatch_count(full: dict[torch.dtype, torch.Tensor], expected: dict[torch.dtype, torch.Tensor],
                   loose: dict[torch.dtype, list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]]) -> torch.Tensor:
    """A device scalar: the elements of the buffers ``full`` (per storage dtype) that differ from
    ``expected`` bit for bit, except where ``loose`` bounds them (per storage dtype, ``(buffer
    positions, expected values in the array's float dtype, bound)``): those count where
    they are not within their bound (:func:`bounded_mismatch`)."""
    total = torch.zeros((), dtype=torch.int64, device=next(iter(full.values())).device) if full else 0
    for s, buf in full.items():
        differ = buf != expected[s]
        for place, value, bound in loose.get(s, ()):
            differ[place] = bounded_mismatch(buf[place].view(value.dtype), value, bound)
        total = total + differ.sum()
    return total


def bounded_mismatch(actual: torch.Tensor, expected: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """Per element, whether float ``actual`` is not as ``expected``: not within ``bound`` of it
    where the bound is positive (NaN never is; an infinity only as itself), not bit for bit
    where it is 0."""
    s = _storage(actual.dtype)
    exp = expected.to(actual.dtype)
    differ = actual.view(s) != exp.view(s) if s != actual.dtype else actual != exp
    near = ((actual.to(torch.float64) - exp.to(torch.float64)).abs() <= bound) | ~differ
    return torch.where(bound > 0, ~near, differ)


_NUMPY = _NUMPY_OF
_TORCH = {np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64, np.dtype(np.bool_): torch.bool,
          np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}


class HostArenas:
    """:class:`Arenas` built and compared on the host in NumPy, for a target checked on the
    host: ``dc.inputs`` and the writes are NumPy arrays. :meth:`upload` copies each buffer to
    the device for the launch, :meth:`download` brings it back, :meth:`mismatch` counts."""

    def __init__(self, dc: DeviceCase, writes: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        shapes = {n: (_TORCH[a.dtype], a.size) for n, a in dc.inputs.items()} | dc.outputs
        self.offset, sizes = _layout(shapes)
        self.dtypes = {n: dt for n, (dt, _) in shapes.items()}
        self.sizes = {n: k for n, (_, k) in shapes.items()}
        self.shapes = {n: a.shape for n, a in dc.inputs.items() if a.ndim > 1}
        self.full = {s: np.full(size + GUARD, _SENTINEL[s], dtype=_NUMPY[s]) for s, size in sizes.items()}
        for n, a in dc.inputs.items():
            self._view(self.full, n)[:] = _bits(a.reshape(-1), self.dtypes[n])
        self.expected = {s: b.copy() for s, b in self.full.items()}
        for n, (index, value) in writes.items():
            bits = _bits(value, self.dtypes[n])
            self._view(self.expected, n)[index] = bits
            if self.dtypes[n] != torch.bool and n not in dc.inputs:  # an input updated in place: the kernel reads it
                self._view(self.full, n)[index] = bits ^ 1

    def _view(self, bufs: dict[torch.dtype, np.ndarray], n: str) -> np.ndarray:
        return bufs[_storage(self.dtypes[n])][self.offset[n] : self.offset[n] + self.sizes[n]]

    def upload(self, device: str) -> dict[str, torch.Tensor]:
        """The buffers on ``device``, one copy per dtype; the views of every array there."""
        self.on_device = {s: host_to(b, device) for s, b in self.full.items()}
        views = {}
        for n, dt in self.dtypes.items():
            d = self.on_device[_storage(dt)][self.offset[n] : self.offset[n] + self.sizes[n]]
            d = d.view(dt) if dt != _storage(dt) else d
            views[n] = d.view(self.shapes[n]) if n in self.shapes else d
        return views

    def download(self) -> None:
        """The buffers as the launch left them on the device, back on the host (waits for it)."""
        self.full = {s: b.cpu().numpy() for s, b in self.on_device.items()}

    def mismatch(self) -> int:
        """The number of elements, over every buffer, that are not as expected."""
        return sum(int(np.count_nonzero(self.full[s] != self.expected[s])) for s in self.full)

