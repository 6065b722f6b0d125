"""Oracle parts compiled into few GPU kernels: the sampling oracles' lane noise, and the per-slot
arithmetic of the two copy-and-expand oracles.

:func:`~eaglefuzz.oracles.tensor_ops_v2.lane_noise` (the murmur3 hash of every lane of every row,
its uniform and its Gumbel noise: some forty integer and float64 passes over ``[rows, lanes]``
tensors in eager torch) is most of what the Gumbel, resampling and insertion targets' device
batches move. On a CUDA device, unless ``EAGLEFUZZ_FUSED_NOISE=0`` (:data:`SWITCH`),
:func:`lane_noise_on` gives the same
function compiled by ``torch.compile``: one kernel that reads a seed and a position per row and
writes each lane's uniform, one that reads the uniform and writes the noise and its bound. It is
checked first against the plain function on a probe of seeds at the int64 limits, drafting
positions and a vocabulary of several blocks and a part (the uniform and the float64 path bit for
bit, the float32 path's noise within a few float64 steps: :data:`NEAR32`); the oracle's code is the one in
:mod:`~eaglefuzz.oracles.tensor_ops_v2` either way. Where the compiled function cannot be built
or differs from the plain one, the plain one is used, with a warning. Elsewhere (the CPU, the
interpreter) the plain function.

:func:`~eaglefuzz.oracles.tensor_ops.expand_slots` (every output slot of a
``copy_and_expand_eagle_inputs_kernel`` batch: its request, its place, id, position and masks,
some twenty int64 passes over the slots in eager torch, most of that target's oracle) and
:func:`~eaglefuzz.oracles.tensor_ops.dflash_context` (``copy_and_expand_dflash_inputs_kernel``'s
context slots) are compiled the same way on a CUDA device unless ``EAGLEFUZZ_FUSED_SLOTS=0``
(:data:`SLOTS`, :data:`CONTEXT`: one :class:`Piece` each, :func:`piece_on`): integer arithmetic
alone, so the probe (:func:`same_outputs`) demands every output bit for bit, with its dtype.

A compiled function that passed its probe and later fails to run (``torch._dynamo``'s
recompilation limit under ``fullgraph=True``) gives way to the plain one for the rest of the
process, with one warning (:class:`Guarded`)."""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...oracles import tensor_ops, tensor_ops_v2
from ...oracles.tensor_ops_v2 import Noise

PROBE_LANES = 2 * 1024 + 37
"""Lanes of the probe: two whole blocks and a part of a third."""


def _probe(device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeds (both int64 limits, 0, -1, a drafter's column in the high word, random), positions
    (0, past 65535, drafting positions past ``2**30``, random) and lanes of the check."""
    gen = torch.Generator(device="cpu").manual_seed(0)
    fixed = torch.tensor([-(2**63), 2**63 - 1, 0, -1, 5 << 32, 12345], dtype=torch.int64)
    seed = torch.cat([fixed, torch.randint(-(2**62), 2**62, (10,), generator=gen, dtype=torch.int64)])
    pos = torch.cat([torch.tensor([0, 65536, 2**30, 2**30 + 70000, 131071, 7], dtype=torch.int64),
                     torch.randint(0, 2**31, (10,), generator=gen, dtype=torch.int64)])
    return seed.to(device), pos.to(device), torch.arange(PROBE_LANES, dtype=torch.int64, device=device)


NEAR32 = 2.0**-50
"""How far, relative to ``max(1, |x|)``, the compiled float32 path's noise and bound may lie from
the plain function's: a few float64 steps (an H100's lie one step off: the float64 arithmetic of
the path's polynomial rounds otherwise once compiled), some ``2**31`` times inside the float32
path's bound on the noise (``2**-19`` and more). The uniform, and the float64 path whole, must be
the plain function's bit for bit."""


def _near(got: torch.Tensor, want: torch.Tensor, rel: float) -> bool:
    """Whether ``got`` is ``want`` (``rel`` 0) or within ``rel * max(1, |want|)`` of it."""
    if rel == 0:
        return torch.equal(got, want)
    return got.dtype == want.dtype and bool(((got - want).abs() <= rel * want.abs().clamp(min=1.0)).all())


def same_noise(fn: Noise, device: str, uniform: Callable[..., torch.Tensor] | None = None) -> bool:
    """Whether ``fn`` gives :func:`~eaglefuzz.oracles.tensor_ops_v2.lane_noise`'s noise and bound on
    the probe, on both noise paths, for many rows and for one: bit for bit on the float64 path,
    within :data:`NEAR32` on the float32 one; and ``uniform`` (the compiled uniform, if given)
    :func:`~eaglefuzz.oracles.tensor_ops_v2.lane_uniform` bit for bit on both."""
    seed, pos, lanes = _probe(device)
    for fp64 in (False, True):
        for rows in (slice(None), slice(0, 1)):
            a = (seed[rows], pos[rows], lanes, fp64)
            if uniform is not None and not torch.equal(uniform(*a), tensor_ops_v2.lane_uniform(*a)):
                return False
            got, want = fn(*a), tensor_ops_v2.lane_noise(*a)
            if not all(_near(g, w, 0.0 if fp64 else NEAR32) for g, w in zip(got, want, strict=True)):
                return False
    return True


def _uniform32(seed: torch.Tensor, pos: torch.Tensor, lanes: torch.Tensor) -> torch.Tensor:
    return tensor_ops_v2.lane_uniform(seed, pos, lanes, False)


def _uniform64(seed: torch.Tensor, pos: torch.Tensor, lanes: torch.Tensor) -> torch.Tensor:
    return tensor_ops_v2.lane_uniform(seed, pos, lanes, True)


def _noise32(u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return tensor_ops_v2.uniform_noise(u, False)


def _noise64(u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return tensor_ops_v2.uniform_noise(u, True)


def _padded(x: torch.Tensor) -> torch.Tensor:
    """``x`` (1-D) as contiguous int64, its one element twice where it has one."""
    x = x.to(torch.int64).contiguous()
    return x.repeat(2) if x.shape[0] == 1 else x


def _two_kernels(backend: str | Callable = "inductor") -> tuple[Noise, Callable[..., torch.Tensor]]:
    """:func:`~eaglefuzz.oracles.tensor_ops_v2.lane_noise` as two compiled functions, the uniform
    then its noise, the uniform stored between them in its dtype (compiled as one function, the
    float32 uniform's rounding is lost: Triton folds a cast to float32 and back, and the noise
    moves by up to 0.02 near ``u = 1``); and the compiled uniform.

    Compiled once per path and part whatever the batches (``torch._dynamo`` stops recompiling a
    function after 8 specializations, and fails under ``fullgraph=True``): each path, float32
    and float64, is a function of its own (the path is no guard); seeds, positions and lanes
    reach them contiguous int64, with one row or one lane given twice (``torch.compile``
    specializes a size of 1) and the outputs cut back to the batch's."""
    compiled = functools.partial(torch.compile, backend=backend, dynamic=True, fullgraph=True)
    uniforms = {False: compiled(_uniform32), True: compiled(_uniform64)}
    noises = {False: compiled(_noise32), True: compiled(_noise64)}

    def run(seed: torch.Tensor, pos: torch.Tensor, lanes: torch.Tensor, use_fp64: bool,
            noise: bool) -> tuple[torch.Tensor, ...]:
        rows, n = seed.shape[0], lanes.shape[0]
        if rows == 0 or n == 0:
            u = tensor_ops_v2.lane_uniform(seed, pos, lanes, use_fp64)
            return tensor_ops_v2.uniform_noise(u, use_fp64) if noise else (u,)
        u = uniforms[use_fp64](_padded(seed), _padded(pos), _padded(lanes))
        out = noises[use_fp64](u) if noise else (u,)
        if out[0].shape != (rows, n):
            out = tuple(t[:rows, :n].contiguous() for t in out)
        return out

    def fused(seed: torch.Tensor, pos: torch.Tensor, lanes: torch.Tensor, use_fp64: bool) -> tuple[torch.Tensor, torch.Tensor]:
        g, e = run(seed, pos, lanes, use_fp64, True)
        return g, e

    def uniform(seed: torch.Tensor, pos: torch.Tensor, lanes: torch.Tensor, use_fp64: bool) -> torch.Tensor:
        return run(seed, pos, lanes, use_fp64, False)[0]

    return fused, uniform


class Guarded:
    """A compiled oracle part that gives way to its plain function at run time: called as the
    compiled function ``compiled`` until a call of it raises anything but a CUDA error or a lack of
    memory (the compiler's own failures: a recompilation past ``torch._dynamo``'s limit under
    ``fullgraph=True``, seen on an H100 with the lane noise), then, with one warning naming
    ``what``, ``device`` and why, the ``plain`` function, for that call and every later one. A
    CUDA error or a lack of memory is raised as it is: the plain function would meet it too."""

    def __init__(self, what: str, device: str, compiled: Callable, plain: Callable) -> None:
        self.what, self.device, self.compiled, self.plain = what, device, compiled, plain
        self.fn = compiled

    def __call__(self, *args: object) -> object:
        if self.fn is self.plain:
            return self.plain(*args)
        try:
            return self.fn(*args)
        except Exception as exc:  # noqa: BLE001 - the compiler's failure leaves the plain function
            if isinstance(exc, torch.OutOfMemoryError) or "CUDA error" in str(exc):
                raise
            self.fn = self.plain
            warnings.warn(f"eaglefuzz: {self.what} runs unfused on {self.device} from now on ({_why(exc)})",
                          stacklevel=2)
            return self.plain(*args)


def _why(exc: BaseException) -> str:
    """``exc``'s name and the first line of its message."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _admitted(what: str, device: str, build: Callable[[], tuple], check: Callable[..., bool], plain: Callable,
              differs: str) -> Callable:
    """The first function ``build()`` returns, where building it raises nothing and ``check`` of
    all it returns holds, as a :class:`Guarded` (the plain function wherever it fails later); else
    ``plain``, with a warning naming ``what``, ``device`` and why (``differs``, or the exception's
    first line)."""
    try:
        built = build()
        if check(*built):
            return Guarded(what, device, built[0], plain)
        why = differs
    except Exception as exc:  # noqa: BLE001 - any failure to compile leaves the plain function
        why = _why(exc)
    warnings.warn(f"eaglefuzz: {what} runs unfused on {device} ({why})", stacklevel=4)
    return plain


@functools.cache
def _compiled(device: str) -> Noise:
    """The compiled noise of ``device`` (a CUDA device), checked; the plain one, with a warning,
    where compiling fails or the check does."""
    return _admitted("the sampling oracles' noise", device, _two_kernels,
                     lambda fn, uniform: same_noise(fn, device, uniform), tensor_ops_v2.lane_noise,
                     "its noise differs from the plain function's on the probe")


SWITCH = "EAGLEFUZZ_FUSED_NOISE"
"""The environment variable that turns the fused noise off (``0``); on by default: four lanes of
``_gumbel_sample_kernel`` under MPS on an H100 verified 87% more with it (benchmarks/RESULTS.md,
session 31). Its first campaign (session 29) failed on ``torch._dynamo``'s recompilation limit
(8 specializations of the uniform, whose guards were the path and one-row batches):
:func:`_two_kernels` now compiles each path on its own and pads such batches, and a run gives way
to the plain function where a compiled part fails (:class:`Guarded`)."""


def fused_noise_on() -> bool:
    """Whether :data:`SWITCH` leaves the fused noise on: unset, empty or on (:func:`switched_on`)."""
    return switched_on(SWITCH, True)


def lane_noise_on(device: str | torch.device) -> Noise:
    """The lane noise the sampling oracles take (their ``noise`` argument) on ``device``: fused
    on a CUDA device unless :data:`SWITCH` turns it off (see the module), the plain function otherwise."""
    dev = torch.device(device)
    if dev.type != "cuda" or not fused_noise_on():
        return tensor_ops_v2.lane_noise
    return _compiled(str(dev))



Outputs = Callable[..., tuple[torch.Tensor, ...]]


@dataclass(frozen=True)
class Piece:
    """An integer oracle part compiled whole (:func:`piece_on`): its ``plain`` function, the
    environment variable that turns the compiled one on (``switch``), and ``probe(device)``, the
    argument tuples on which the compiled function must give every output of the plain one bit
    for bit, with its dtype."""

    name: str
    switch: str
    plain: Outputs
    probe: Callable[[str], list[tuple]]
    default: bool = False
    """Whether the compiled function is used where ``switch`` is not set."""


def same_outputs(piece: Piece, fn: Outputs, device: str) -> bool:
    """Whether ``fn`` gives ``piece.plain``'s outputs, each bit for bit with its dtype, on every
    argument tuple of ``piece.probe``."""
    for args in piece.probe(device):
        got, want = fn(*args), piece.plain(*args)
        if len(got) != len(want) or not all(g.dtype == w.dtype and torch.equal(g, w) for g, w in zip(got, want, strict=True)):
            return False
    return True


@functools.cache
def _compiled_piece(piece: Piece, device: str) -> Outputs:
    """``piece`` compiled for ``device`` (a CUDA device), checked; its plain function, with a
    warning, where compiling fails or the check does."""
    return _admitted(piece.name, device, lambda: (torch.compile(piece.plain, dynamic=True, fullgraph=True),),
                     lambda fn: same_outputs(piece, fn, device), piece.plain,
                     "it differs from the plain function on the probe")


ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")


def switched_on(switch: str, default: bool = False) -> bool:
    """Whether the environment variable ``switch`` is on: one of :data:`ON`, not one of
    :data:`OFF`, ``default`` where it is unset or empty. Any other value is ``default`` too, with
    a warning naming the variable and the values it takes."""
    value = os.environ.get(switch, "").strip().lower()
    if value in ON or value in OFF:
        return value in ON
    if value:
        warnings.warn(f"eaglefuzz: {switch}={os.environ[switch]!r} is none of {'/'.join(ON)} (on) or "
                      f"{'/'.join(OFF)} (off): {'on' if default else 'off'}, its default", stacklevel=2)
    return default


def piece_on(piece: Piece, device: str | torch.device) -> Outputs:
    """``piece``'s function on ``device``: compiled on a CUDA device where its switch is on
    (``piece.default`` where it is unset; see the module), the plain function otherwise."""
    dev = torch.device(device)
    if dev.type != "cuda" or not switched_on(piece.switch, piece.default):
        return piece.plain
    return _compiled_piece(piece, str(dev))


def _slots_probe(device: str, requests: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Arguments of :func:`~eaglefuzz.oracles.tensor_ops.expand_slots` for ``requests`` requests
    of 1 to 40 slots (one of none among several): bonus slots anywhere in a request, padding
    from anywhere after it (or none), reads clamped at the last input token, positions and
    output places past ``2**31``, ids at the int32 limits."""
    gen = torch.Generator(device="cpu").manual_seed(requests)
    n = torch.randint(1, 41, (requests,), generator=gen)
    if requests > 2:
        n[requests // 2] = 0
    ends = torch.cumsum(n, 0)
    first = ends - n
    tokens = 500
    bonus = first + (torch.rand(requests, generator=gen) * n).long()
    pad_from = bonus + 1 + torch.randint(0, 41, (requests,), generator=gen)
    src_shift = torch.randint(0, tokens, (requests,), generator=gen) - first
    src_last = torch.randint(0, tokens, (requests,), generator=gen)
    pos_shift = torch.randint(0, 2**33, (requests,), generator=gen) - first
    dest_shift = torch.randint(0, 2**32, (requests,), generator=gen) - first
    table = torch.stack([bonus, pad_from, src_shift, src_last, pos_shift, dest_shift])
    limits = torch.tensor([-(2**31), 2**31 - 1, 0], dtype=torch.int64)
    ids = torch.cat([limits[torch.randint(0, 3, (3, requests), generator=gen)],
                     torch.randint(-(2**31), 2**31, (3, 1), generator=gen)], 1)[:, :requests].to(torch.int32)
    target = torch.randint(-(2**31), 2**31, (tokens,), generator=gen, dtype=torch.int64).to(torch.int32)
    return table.to(device), ids.to(device), ends.to(device), target.to(device), int(n.sum())


def _context_probe(device: str, requests: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Arguments of :func:`~eaglefuzz.oracles.tensor_ops.dflash_context` for ``requests``
    requests of 1 to 40 tokens (one of none among several), each its own row of 1 to 64 columns
    of a flat block table of ids up to the int32 limit, vLLM's and the hybrid models' block
    sizes, positions past ``2**24`` and ``2**31`` (clamped to the last column), places past
    ``2**31``."""
    gen = torch.Generator(device="cpu").manual_seed(requests)
    n = torch.randint(1, 41, (requests,), generator=gen)
    if requests > 2:
        n[requests // 2] = 0
    ends = torch.cumsum(n, 0)
    W = torch.randint(1, 65, (requests,), generator=gen)
    start = torch.cumsum(W, 0) - W
    size = torch.tensor([16, 32, 64, 128, 256, 528, 1056, 2112])[torch.randint(0, 8, (requests,), generator=gen)]
    shift = torch.randint(0, 2**33, (requests,), generator=gen)
    per_request = torch.stack([start, W - 1, size, shift])
    total = int(n.sum())
    reach = torch.tensor([1 << 12, 1 << 25, 1 << 32])[torch.randint(0, 3, (total,), generator=gen)]
    positions = (torch.rand(total, generator=gen, dtype=torch.float64) * reach).long()
    table = torch.randint(0, 2**31, (int(W.sum()),), generator=gen, dtype=torch.int64).to(torch.int32)
    table[-1] = 2**31 - 1
    return per_request.to(device), ends.to(device), positions.to(device), table.to(device), total


SLOTS = Piece("copy_and_expand's oracle slots", "EAGLEFUZZ_FUSED_SLOTS", tensor_ops.expand_slots,
              lambda device: [_slots_probe(device, 37), _slots_probe(device, 1)], default=True)
"""The slots of ``copy_and_expand_eagle_inputs_kernel``'s oracle
(:func:`~eaglefuzz.oracles.tensor_ops.expand_slots`): compiled on a CUDA device unless
``EAGLEFUZZ_FUSED_SLOTS=0`` (on an H100, four lanes under MPS verified 26% more with it:
benchmarks/RESULTS.md, session 29)."""

CONTEXT = Piece("copy_and_expand_dflash's oracle context slots", "EAGLEFUZZ_FUSED_SLOTS", tensor_ops.dflash_context,
                lambda device: [_context_probe(device, 37), _context_probe(device, 1)], default=True)
"""The context slots of ``copy_and_expand_dflash_inputs_kernel``'s oracle
(:func:`~eaglefuzz.oracles.tensor_ops.dflash_context`), under the same switch as :data:`SLOTS`."""


def _winners_probe(device: str) -> list[tuple]:
    """Arguments of :func:`~eaglefuzz.oracles.tensor_ops.recovered_chunk` over vocabularies of
    three blocks and a part and of 262144 ids: rows of softmax, of zeros (every score 0: index
    0), one-hot at the draft id, constant, and with their maximum twice (near both ends); draft
    rows equal to the target's (an empty residual) and above it (a negative difference); draft
    ids ``-1``, 0 and ``V - 1``; float32 and float64 noise (``inv_q``, up to ``1 / tiny``; a row
    whose largest scores differ only in float64), with and without draft probabilities."""
    gen = torch.Generator(device="cpu").manual_seed(11)
    out = []
    for V in (3 * 1024 + 5, 262144):
        target = torch.softmax(torch.randn((8, V), generator=gen) * 5, dim=1)
        target[1] = 0.0
        target[2] = 0.0
        target[2, V - 1] = 1.0
        target[3] = 0.25
        target[4, 7] = target[4, V - 3] = 1.0
        draft = torch.softmax(torch.randn((8, V), generator=gen), dim=1)
        draft[5] = target[5]
        draft[6] = target[6] + 0.5
        kt = torch.tensor([0, 1, 2, 2, 3, 4, 4, 5, 6, 7, 0, 7], dtype=torch.int64)
        kq = torch.tensor([0, 1, 2, 3, 4, 3, 3, 0, 1, 2, 3, 5], dtype=torch.int64)
        kd = torch.tensor([-1, 0, V - 1, -1, 0, -1, 7, -1, V - 1, 3, 5, -1], dtype=torch.int64)
        for dtype in (torch.float32, torch.float64):
            e = torch.empty((6, V), dtype=dtype).exponential_(generator=gen)
            e[0, :9] = torch.finfo(dtype).tiny
            iq = e.clamp_(min=torch.finfo(dtype).tiny).reciprocal_()
            iq[3] = 2.0
            iq[4] = 1.0
            iq[4, 10], iq[4, 20] = 1 + 2.0**-40, 1 + 2.0**-41  # apart in float64 alone: its product must stay float64
            for d in (None, draft):
                out.append((kt.to(device), kq.to(device), (kd if d is None else torch.full_like(kd, -1)).to(device),
                            target.to(device), None if d is None else d.to(device), iq.to(device)))
    return out


WINNERS = Piece("sample_recovered's oracle winners over whole rows", "EAGLEFUZZ_FUSED_WINNERS",
                tensor_ops.recovered_chunk, _winners_probe, default=False)
"""The winners of ``sample_recovered_tokens_kernel``'s oracle over whole rows
(:func:`~eaglefuzz.oracles.tensor_ops.recovered_chunk`: the dense table epochs, whose tokens are
mostly new to the epoch), compiled on a CUDA device with ``EAGLEFUZZ_FUSED_WINNERS=1``: one
pass that reads each key's rows, where eager torch makes some fifteen (copies of the rows, the
difference, the product, the argmax). Off by default until a GPU has measured it (it was built
in a session whose device starts failed: benchmarks/RESULTS.md, session 33)."""


def compiled_winners(fn: Callable[..., tuple[torch.Tensor]]) -> Callable[..., tuple[torch.Tensor]]:
    """``fn`` (:data:`WINNERS` compiled) as the oracle calls it: a chunk of one key given as two
    and its winner cut back (``torch.compile`` specializes a size of 1, a recompilation toward
    ``torch._dynamo``'s limit), and tables or noise of ``2**31`` elements or more (production
    scale, which the probe cannot hold) left to the plain function."""

    def winners(kt: torch.Tensor, kq: torch.Tensor, kd: torch.Tensor, target: torch.Tensor,
                draft: torch.Tensor | None, iq: torch.Tensor) -> tuple[torch.Tensor]:
        if max(target.numel(), iq.numel()) >= 2**31:
            return WINNERS.plain(kt, kq, kd, target, draft, iq)
        if kt.shape[0] == 1:
            return (fn(kt.repeat(2), kq.repeat(2), kd.repeat(2), target, draft, iq)[0][:1],)
        return fn(kt, kq, kd, target, draft, iq)

    return winners
