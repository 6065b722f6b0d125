"""``_gumbel_sample_kernel`` on the device (docs/CONTRACT.md §29): calls of ``gumbel_sample``
drawn on the GPU in batches of 256 (fewer where the tables pass 2**28 elements; 16 of a large
vocabulary), as its record's generator draws a case: per batch the call's mode (the target's
sampling, the drafter's with its logits cache at the step's column, or the watermarking
drafter's with a column per token and the raw logits as the cache's source), the noise path
and the vocabulary (vLLM's small ones or one to three 1024-wide blocks and a bit); per case up
to 1024 rows (a few, or up to ``max_requests``) over a few more state rows, their temperatures
(greedy, 1 and others), seeds over the whole int64 range (its limits now and then), positions,
top-k/top-p masks of a random row (the target's), padded drafter rows (``-1``), the cache's
``K`` columns; one batch in ten a tour shape (a 151936- or 262144-id vocabulary, or positions
past 65535). A case whose draw meets a window (a block whose leading Gumbel values lie within
their bounds: the extended tier's) has the seeds of its rows' requests re-keyed, as the record's
``clear_windows`` does, until none does (production meets none). Checked against the batched
torch oracle (:func:`~eaglefuzz.oracles.tensor_ops_v2.gumbel_sample_winners`: the murmur3 noise
bit for bit, every winner exact, every maximum within its bound, exact on greedy rows and
``-inf`` blocks; every cache element a valid row copies, bit for bit, the others untouched) and
compared on the GPU, every element of every case.

Production-scale steps whose logits pass ``2**31`` elements (the int32 row offset ``token_idx *
logits_stride`` of vLLM up to 0.24.0, fixed by #46560) are drawn on the device in batches of up
to 128 (:attr:`~...targetkit.device.DeviceTarget.scale_batches`): the target's sampling over a
scale epoch's shared table (:mod:`~...targetkit.scale_steps`: a filler of greedy requests of zero
rows up to a few rows before the limit, then each step's one to three requests over the live rows
across it, greedy or random, their own seeds and positions), re-keyed off windows as the ordinary
draws are, and checked as an ordinary batch: the batched oracle computes each random row (its
noise is its seed's and position's) and each distinct greedy row once (the filler's zero rows as
one). Where such a batch does not fit, a step drawn with NumPy (:func:`scale_case`) is checked a
block of rows at a time against the torch oracle
(:func:`~eaglefuzz.oracles.tensor_ops_v2.gumbel_sample_rows`: the murmur3 noise bit for bit, each
block's candidates); findings are confirmed by the NumPy and Numba oracles on the rows past the
limit (:mod:`~...targetkit.scale_rows`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...generation.strategies import INT64_MAX, INT64_MIN
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.device_draws import lazy_full, scale_vocab
from ...targetkit.fused import lane_noise_on
from ...targetkit.runner_v2_verify import (
    LARGE_VOCABS,
    MAX_K,
    MAX_MODEL_LEN,
    RE_KEY,
    SAMPLE_BLOCK,
    VOCABS,
)
from ...targetkit.scale import past_limit
from ...targetkit.scale_device import ScaleRecordDevice, ScaleRun, first_row
from ...targetkit.scale_rows import minimal_request_rows, scale_request_rows
from ...targetkit.scale_steps import (
    BAND,
    ScaleEpoch,
    kept_epoch,
    scale_epoch,
    scale_rows,
    scale_tails,
)
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    Rows,
    _rows,
    feature_sets,
    owners,
    per_case_any,
    rows_of,
    state_rows,
    uniform,
)
from ...targetkit.verify_batch import VerifyBatchDevice, _ends
from .cases import TEMPERATURES
from .layout import MODES, build, keep_rows, windows
from .record import TARGET

NAME = "_gumbel_sample_kernel"
SMALL = ("expanded_idx_mapping", "seeds", "pos", "temperature")
"""The case's arrays of a few elements per row or state row (copied to the device whole)."""


def _case(counts: list[int], V: int, temperature: np.ndarray, seeds: np.ndarray, pos: np.ndarray,  # noqa: N803
          fp64: bool) -> Case:  # fmt: skip
    """The target's sampling (``Sampler._sample_random``) of requests of ``counts`` rows (state
    rows ``0 .. B-1``), zero logits (the caller writes the live rows)."""
    rows = np.repeat(np.arange(len(counts)), counts)
    return build(lazy_full((int(sum(counts)), V), np.float32), rows.tolist(), pos.tolist(), seeds.tolist(),
                 temperature.tolist(), "target", fp64=fp64)


def scale_case(rng: np.random.Generator) -> Case:
    """A production sampling step just past ``2**31`` logits (a current model's vocabulary,
    ``max_num_seqs x (1 + K)`` rows): greedy requests of 16 drafts and their bonus row, zero
    logits, up to a few rows before the limit, then a request of 17 rows across it, random
    (temperature 0.7, 1 or 1.3: the noise of its seed and positions, float64 in one step in
    four) or greedy, its rows random logits (top-k masked now and then); any int64 seeds. A
    step whose live rows meet a window (a margin within the noise's bound) is re-keyed."""
    V = scale_vocab(rng)
    counts = scale_request_rows(rng, first_row(V))
    B = len(counts)
    temperature = np.zeros(B, np.float32)
    temperature[-1] = rng.choice([0.7, 1.0, 1.3, 1.0, 0.0])
    seeds = rng.integers(-(2**63), 2**63 - 1, size=B, dtype=np.int64, endpoint=True)
    p0 = rng.integers(0, MAX_MODEL_LEN - 64, size=B)
    pos = np.concatenate([p0[r] + np.arange(c) for r, c in enumerate(counts)]).astype(np.int64)
    case = _case(counts, V, temperature, seeds, pos, bool(rng.random() < 0.25))
    x = (rng.standard_normal((counts[-1], V)) * 3).astype(np.float32)
    if temperature[-1] and rng.random() < 0.3:  # top-k: all but k logits of each row masked (processed logits)
        keep = int(rng.integers(1, min(64, V) + 1))
        np.put_along_axis(x, np.argsort(x, axis=1)[:, : V - keep], -np.inf, axis=1)
    live = list(range(int(sum(counts[:-1])), int(sum(counts))))
    case.arrays["logits"][live[0] :] = x
    for _ in range(8):  # production meets no window: a new key for a request that does
        if not windows(keep_rows(case, live)):
            break
        case.arrays["seeds"][-1] = rng.integers(-(2**63), 2**63 - 1, dtype=np.int64, endpoint=True)
    return case.replace(note="a production-scale step (eaglefuzz fuzz --mode device)")


def minimal_scale_cases(case: Case) -> list[Case]:
    """:func:`minimal_scale_cases_of` ``case``'s vocabulary."""
    return minimal_scale_cases_of(case.arrays["logits"].shape[1])


def minimal_scale_cases_of(V: int) -> list[Case]:  # noqa: N803
    """The smallest steps with a row past ``2**31`` logits of vocabulary ``V``, a table of
    zeros: greedy requests of 17 rows up to the limit, then one row past it holding a single
    logit 1 at its last column, greedy, then random (temperature 1, seed 0, position 0)."""
    counts = [*minimal_request_rows(first_row(V))[:-1], 1]
    B = len(counts)
    out = []
    for t in (0.0, 1.0):
        temperature = np.zeros(B, np.float32)
        temperature[-1] = t
        m = _case(counts, V, temperature, np.zeros(B, np.int64), np.zeros(int(sum(counts)), np.int64), False)
        m.arrays["logits"][first_row(V), V - 1] = 1.0
        out.append(m.replace(note="the int32 row offset past 2**31, minimised"))
    return out


def checked_rows(case: Case) -> list[int]:
    """The rows the NumPy and Numba oracles confirm a scale finding on: the row before the
    limit and every row past it."""
    n, V = case.arrays["logits"].shape
    return list(range(max(0, min(first_row(V), n) - 1), n))


SHAPES = 0.1
"""The share of batches of one of the tour's shapes (half positions past 65535, half a large
vocabulary), as the record's generator draws a shape (:func:`~...generation.strategies.random_shape`)."""
KINDS = ("long_context", "large_vocab")
"""The tour's kinds of batch (:data:`SHAPES`: its ``SHAPES``)."""
LARGE_BATCH = 16
"""Cases per batch of a large vocabulary at most (each a row of up to 262144 logits)."""
ELEMENTS = 1 << 28
"""Table elements (logits, cache, cache source) a batch draws at most: a case is drawn while the
cases before it hold fewer (the drafter's caches of ``max_num_reqs x K x V`` are the largest)."""
MAX_ATTEMPTS = 64
"""Re-keyings of a case's windows at most (the record's ``clear_windows`` makes 8, after which its
case would leave the production tier; a window twice in a row is already rare)."""
_M64 = (1 << 64) - 1


def _key(k: int) -> int:
    """``RE_KEY * k`` (uint64, wrapping) as an int64: what attempt ``k`` XORs a seed with."""
    x = (int(RE_KEY) * k) & _M64
    return x - (1 << 64) if x >= 1 << 63 else x


@dataclass
class Calls:
    """``k`` calls of ``gumbel_sample`` of one mode, noise path and vocabulary ``V``,
    concatenated: ``rows`` (per case ``T`` logits rows over ``R`` state rows), per case ``K``
    (cache columns) and ``col`` (the drafter's column); per row (device) its state row within
    its case (``-1``: padded), position and column; per state row its temperature and seed."""

    mode: str
    fp64: bool
    V: int
    rows: Rows
    K: np.ndarray
    col: np.ndarray
    eidx: torch.Tensor
    pos: torch.Tensor
    temperature: torch.Tensor
    seeds: torch.Tensor
    logits: torch.Tensor
    cache: torch.Tensor | None
    cols: torch.Tensor | None
    source: torch.Tensor | None

    def row_cols(self) -> torch.Tensor | None:
        """Each row's cache column (``None``: the target's sampling, no cache)."""
        if self.mode == "target":
            return None
        return self.cols if self.cols is not None else self.rows.per_row(self.col)


def _seeds(gen: torch.Generator, n: int, device: str, ends: float = 1 / 32) -> torch.Tensor:
    """``n`` int64 seeds as the record's ``array_of(int64, n, [(INT64_MIN, INT64_MAX)])`` draws
    them: uniform over the whole range, an end (either) one time in 32 (``ends``)."""
    hi = torch.randint(-(2**31), 2**31, (n,), generator=gen, device=device, dtype=torch.int64)
    lo = torch.randint(0, 2**32, (n,), generator=gen, device=device, dtype=torch.int64)
    u = torch.rand((2, n), generator=gen, device=device)
    end = torch.where(u[1] < 0.5, torch.full_like(hi, INT64_MAX), torch.full_like(hi, INT64_MIN))
    return torch.where(u[0] < ends, end, hi * (1 << 32) + lo)


def draw_calls(seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
               kind: str | None = None) -> Calls:  # fmt: skip
    """``k`` calls (fewer past :data:`ELEMENTS`, or :data:`LARGE_BATCH` of a large vocabulary) as
    the record's generator draws a case (``cases.body``, ``cases.draw``; the tour's shapes):
    sizes and modes on the host with NumPy, values on the device with a seeded
    ``torch.Generator``. ``kind``: ``"ordinary"`` or one of :data:`KINDS` (``None``: drawn)."""
    rng = np.random.default_rng(seeds[1])
    gen = torch.Generator(device=device).manual_seed(seeds[1])
    u = rng.random()
    drawn = "ordinary" if u >= SHAPES else KINDS[0] if u < SHAPES / 2 else KINDS[1]
    kind = drawn if kind is None else kind
    if kind == "large_vocab":  # tour.py's _large_vocab
        k = min(k, LARGE_BATCH)
        mode = ("target", "drafter")[int(rng.integers(0, 2))]
        V = int(rng.choice(LARGE_VOCABS))
        fp64 = mode == "target" and bool(rng.integers(0, 2))
        T = np.ones(k, np.int64)
        R = T + 1
        K = np.full(k, 2, np.int64)
        col = np.ones(k, np.int64)
    else:
        mode = MODES[int(rng.integers(0, len(MODES)))]
        if kind == "long_context":  # tour.py's _long_context
            T = rng.integers(1, 9, size=k)
            V = int(rng.choice([37, 1000, 1500]))
        else:
            cap = np.where(rng.integers(0, 2, size=k) == 1, max(1, max_requests), 8)
            T = _ends(rng, np.ones(k, np.int64), cap)
            V = int(rng.choice(VOCABS)) if rng.random() >= 0.2 else (
                SAMPLE_BLOCK * int(_ends(rng, np.ones(1, np.int64), np.full(1, 3))[0]) + int(rng.choice([0, 1, 500])))
        R = T + _ends(rng, np.zeros(k, np.int64), np.full(k, 4))
        K = _ends(rng, np.ones(k, np.int64), np.full(k, MAX_K))
        col = _ends(rng, np.zeros(k, np.int64), K - 1)
        fp64 = bool(rng.random() < 0.3)
    T, R = T.astype(np.int64), R.astype(np.int64)
    size = T * V * (2 if mode == "watermark" else 1) + (R * K * V if mode != "target" else 0)
    k = max(1, int(np.searchsorted(np.cumsum(size) - size, ELEMENTS)))  # the cases begun below the budget
    T, R, K, col = T[:k], R[:k], K[:k], col[:k]
    rows = _rows(T, R, device)
    N, S = rows.n, int(R.sum())
    if kind == "large_vocab":
        temperature = host_to(np.repeat(rng.choice([0.8, 1.0, 1.5], size=k), R).astype(np.float32), device)
        seed = torch.randint(-(2**62), 2**62, (S,), generator=gen, device=device, dtype=torch.int64)
        pos = torch.randint(0, 5000, (N,), generator=gen, device=device, dtype=torch.int64)
        eidx = rows.local if mode == "target" else state_rows(rows, gen)
        logits = torch.zeros((N, V), dtype=torch.float32, device=device)
        at = torch.cat([torch.randint(0, V, (N, 24), generator=gen, device=device),
                        torch.randint(V - 2048, V, (N, 8), generator=gen, device=device)], 1)
        value = torch.randn(at.shape, generator=gen, device=device) * 2 + 4
        logits.scatter_reduce_(1, at, value, "amax", include_self=False)  # a repeated id: one of its values
        cache = torch.zeros(int((R * K).sum()) * V, dtype=torch.float32, device=device) if mode != "target" else None
        return Calls(mode, fp64, V, rows, K, col, eidx, pos, temperature, seed, logits, cache, None, None)
    # cases.draw: per case a spread and shift of its logits, per state row a temperature and a seed
    spread = rows.per_row(rng.choice([3.0, 0.3, 8.0], size=k))
    shift = rows.per_row(rng.choice([0.0, 0.0, 40.0], size=k))
    temperature = host_to(np.asarray(TEMPERATURES, dtype=np.float32), device)[
        torch.randint(0, len(TEMPERATURES), (S,), generator=gen, device=device)]
    seed = _seeds(gen, S, device)
    top = MAX_MODEL_LEN if kind == "long_context" else 5000
    pos = torch.randint(0, top, (N,), generator=gen, device=device, dtype=torch.int64)
    if kind == "long_context":  # each case's first row past 65535
        first = host_to(np.cumsum(T) - T, device)
        pos[first] = torch.randint(1 << 16, MAX_MODEL_LEN, (k,), generator=gen, device=device, dtype=torch.int64)
    logits = (torch.randn((N, V), generator=gen, device=device) * spread[:, None] - shift[:, None]).to(torch.float32)
    cache = cols = source = None
    if mode == "target":  # a request's rows share its state row; top-k/top-p masks of random rows
        eidx = uniform(gen, torch.zeros(N, dtype=torch.int64, device=device), rows.per_row(R - 1))
        masked_case = rows.per_row(rng.random(k) < 0.5)
        rate = rows.per_row(rng.choice([0.5, 0.95], size=k))
        masked = torch.rand((N, V), generator=gen, device=device) < rate[:, None]
        masked[torch.arange(N, device=device), torch.randint(0, V, (N,), generator=gen, device=device)] = False
        noisy = temperature[rows.state_base + eidx] != 0
        logits = torch.where(masked & (masked_case & noisy)[:, None], torch.full_like(logits, float("-inf")), logits)
    else:  # distinct state rows, padded rows (-1) now and then; the cache of K columns
        eidx = state_rows(rows, gen)
        padded_case = rows.per_row(rng.random(k) < 0.4)
        eidx = torch.where(padded_case & (torch.rand(N, generator=gen, device=device) < 0.3), torch.full_like(eidx, -1), eidx)
        cache = torch.full((int((R * K).sum()) * V,), -7.0, dtype=torch.float32, device=device)
        if mode == "watermark":
            cols = uniform(gen, torch.zeros(N, dtype=torch.int64, device=device), rows.per_row(K - 1))
            source = (torch.randn((N, V), generator=gen, device=device) * 3).to(torch.float32)
    return Calls(mode, fp64, V, rows, K, col, eidx, pos, temperature, seed, logits, cache, cols, source)


def _winners(c: Calls, at: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The batched torch oracle's winners of ``c``'s rows ``at`` (``None``: every row)."""
    state = torch.where(c.eidx >= 0, c.rows.state_base + c.eidx, torch.full_like(c.eidx, -1))
    cols = c.row_cols()
    if at is not None:
        state, cols = state[at], (None if cols is None else cols[at])
    return tensor_ops_v2.gumbel_sample_winners(
        c.logits if at is None else c.logits[at], state, c.seeds, c.pos if at is None else c.pos[at], c.temperature,
        c.mode == "drafter", c.mode != "target", c.fp64, c.V, cols, SAMPLE_BLOCK, noise=lane_noise_on(c.logits.device))


def clear_windows(c: Calls) -> tuple[Calls, dict[str, torch.Tensor]]:
    """``c`` with the seed of every state row whose rows meet a window XOR-ed with
    ``RE_KEY`` times the attempt (a new request's noise), until none does, as the record's
    ``clear_windows`` (production meets none); and the torch oracle's winners of the result
    (:func:`_winners`), which the batch's check takes as they are."""
    res = _winners(c)
    for k in range(1, MAX_ATTEMPTS + 1):
        met = ~res["settled"].all(1) & (c.eidx >= 0)  # a padded row is greedy: never a window
        if not bool(met.any()):
            return c, res
        hit = torch.zeros(c.seeds.numel(), dtype=torch.bool, device=c.seeds.device)
        hit[(c.rows.state_base + c.eidx)[met]] = True
        c.seeds = torch.where(hit, c.seeds ^ _key(k), c.seeds)
        again = torch.nonzero((c.eidx >= 0) & hit[(c.rows.state_base + c.eidx).clamp(min=0)]).flatten()
        for name, v in _winners(c, again).items():
            res[name][again] = v
    raise RuntimeError(f"_gumbel_sample_kernel: a window after {MAX_ATTEMPTS} re-keyings of a case's seeds")


def _arrays(b: DeviceBatch) -> dict[str, Any]:
    """What batch ``b``'s oracle and features read, off its arrays alone (a case alone, a batch
    of one, reads the same): its sizes, flags and rows."""
    a = b.cat
    T = np.asarray(b.lengths["expanded_idx_mapping"], dtype=np.int64)
    R = np.asarray(b.lengths["seeds"], dtype=np.int64)
    V = int(b.shapes["logits"][0][1])
    rows = _rows(T, R, a["expanded_idx_mapping"].device.type)
    eidx = a["expanded_idx_mapping"].reshape(-1).long()
    sc = b.scalars[0]
    mode = "target" if not sc["is_drafting"] else "drafter" if sc["apply_temperature"] else "watermark"
    K = np.asarray([shape[1] for shape in b.shapes["logits_cache"]], dtype=np.int64) if "logits_cache" in a else None
    col = None
    if mode == "watermark":
        col = a["logits_cache_cols"].reshape(-1).long()
    elif mode == "drafter":
        col = rows.per_row(np.asarray([s["cache_col"] for s in b.scalars], dtype=np.int64))
    return {"T": T, "R": R, "V": V, "rows": rows, "eidx": eidx, "mode": mode, "K": K, "col": col,
            "fp64": bool(sc["use_fp64"]), "logits": a["logits"].reshape(-1, V)}


SCALE_OUTPUTS = 1 << 28
"""Elements of each output (``local_argmax``, ``local_max``) a scale batch holds at most. A
production-scale case writes every block of every row, about ``2**31 / 1024`` elements of each
(``2**21``), so a batch holds up to 128 cases (not the lane's 256): the oracle's writes and the
guarded buffers of ``2**28`` elements each take some 25 GB beside the table and its guarded
copy (17 GiB), about what the statistics kernel's batch of 256 takes beside its two tables."""
SCALE_FP64 = 0.25
"""The share of scale batches on the float64 noise path (``use_fp64``: one batch's outputs
share a dtype), as the record's ``scale_case`` draws it (one step in four)."""
SCALE_POSITIONS = (5000, MAX_MODEL_LEN)
"""A scale step's positions lie below one of these (drawn per step): a short context, or any
position up to ``max_model_len`` (past 65535 nearly always, as the record's ``scale_case``)."""
LANES = 1 << 24
"""Lanes (logits, padded to whole blocks) the scale oracle takes at once."""


def _rows_at_once(V: int) -> int:  # noqa: N803
    """Rows of :data:`LANES` lanes (at least one)."""
    return max(1, LANES // (-(-V // SAMPLE_BLOCK) * SAMPLE_BLOCK))


def _sampled(table: torch.Tensor, at: torch.Tensor, state: torch.Tensor, seeds: torch.Tensor, pos: torch.Tensor,
             temperature: torch.Tensor, fp64: bool, V: int) -> dict[str, torch.Tensor]:  # noqa: N803
    """The batched torch oracle's winners (:func:`~eaglefuzz.oracles.tensor_ops_v2.gumbel_sample_winners`)
    of the target's sampling of rows ``table[at]`` (state rows ``state`` into ``seeds`` and
    ``temperature``, positions ``pos``), a block of rows at a time (a few dozen rows of a
    scale batch's case, never its table whole)."""
    parts = []
    step = _rows_at_once(V)
    for lo in range(0, max(at.numel(), 1), step):
        hi = lo + step
        parts.append(tensor_ops_v2.gumbel_sample_winners(table[at[lo:hi]], state[lo:hi], seeds, pos[lo:hi], temperature,
                                                         False, False, fp64, V, None, SAMPLE_BLOCK,
                                                         noise=lane_noise_on(table.device)))
    return {name: torch.cat([p[name] for p in parts]) for name in parts[0]}


class _Device(VerifyBatchDevice, ScaleRecordDevice):
    tables = ("logits",)
    small = SMALL
    kinds = KINDS

    scale_batches = True

    def scale_minimal_of(self, V: int) -> list[Case]:  # noqa: N803
        return minimal_scale_cases_of(V)

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0, kind: str | None = None, scale: bool = False) -> DeviceBatch:
        """``k`` calls (:func:`draw_calls`; fewer of large tables), re-keyed off every window
        (:func:`clear_windows`): per case ``logits`` ``[T, V]``, its state rows, seeds,
        positions and temperatures, the cache ``[R, K, V]`` (and per-token columns and source)
        of a drafter's call; the outputs ``[T, cdiv(V, 1024)]`` each. With ``scale``, up to
        ``k`` production-scale steps of the target's sampling over the scale epoch
        ``seeds[0]``'s shared table (:meth:`_scale_batch`)."""
        if scale:
            return self._scale_batch(seeds, device, k)
        c, winners = clear_windows(draw_calls(seeds, device, k, max_requests, kind))
        T, R, V = c.rows.B, c.rows.R, c.V
        k = len(T)
        nb = -(-V // SAMPLE_BLOCK)
        t, r = T.tolist(), R.tolist()
        cat = {"logits": c.logits.reshape(-1), "expanded_idx_mapping": c.eidx, "seeds": c.seeds, "pos": c.pos,
               "temperature": c.temperature}
        lengths = {"logits": [x * V for x in t], "expanded_idx_mapping": t, "seeds": r, "pos": t, "temperature": r}
        shapes = {"logits": [(x, V) for x in t]} | {n: [(x,) for x in lengths[n]] for n in ("expanded_idx_mapping", "seeds", "pos", "temperature")}
        scalars = [{"apply_temperature": c.mode == "drafter", "is_drafting": c.mode != "target", "use_fp64": c.fp64}
                   for _ in range(k)]
        if c.cache is not None:
            cat["logits_cache"] = c.cache
            lengths["logits_cache"] = (R * c.K * V).tolist()
            shapes["logits_cache"] = [(x, int(kk), V) for x, kk in zip(r, c.K, strict=True)]
            if c.mode == "drafter":
                for sc, col in zip(scalars, c.col.tolist(), strict=True):
                    sc["cache_col"] = int(col)
        if c.cols is not None and c.source is not None:
            cat |= {"logits_cache_cols": c.cols, "logits_cache_source": c.source.reshape(-1)}
            lengths |= {"logits_cache_cols": t, "logits_cache_source": [x * V for x in t]}
            shapes |= {"logits_cache_cols": [(x,) for x in t], "logits_cache_source": [(x, V) for x in t]}
        outputs = {"local_argmax": (torch.int64, [x * nb for x in t]),
                   "local_max": (torch.float64 if c.fp64 else torch.float32, [x * nb for x in t])}
        host = [{"shapes": {"local_argmax": (x, nb), "local_max": (x, nb)}} for x in t]
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, scalars, {"winners": winners}, host,
                           ("logits_cache",) if c.cache is not None else ())

    def _scale_epoch(self, seed: int, device: str) -> ScaleEpoch:
        """The scale epoch ``seed``'s shared table (:func:`~...targetkit.scale_steps.scale_epoch`,
        no drafter's cache: the target's sampling has none), kept for the next batch of the epoch."""
        return kept_epoch(self, seed, device, partial(scale_epoch, cache_share=0.0))

    def _scale_batch(self, seeds: tuple[int, int], device: str, k: int) -> DeviceBatch:
        """Up to ``k`` production-scale steps of the target's sampling (fewer past
        :data:`SCALE_OUTPUTS`) over the epoch's table, case ``j`` reading its first ``n_j``
        rows: the filler's greedy requests (zero rows; seeds uniform over int64), then the
        step's tail (:func:`~...targetkit.scale_steps.scale_tails`: one to three requests over
        the live rows, past the limit, greedy or random; seeds as the record's, an int64 end
        now and then); one state row per request, its rows' positions consecutive from a
        random start (below 5000 or ``max_model_len``: :data:`SCALE_POSITIONS`); the noise
        path per batch (:data:`SCALE_FP64`). The random rows' winners are computed here, and
        a request whose rows meet a window re-keyed until none does (as :func:`clear_windows`:
        production meets none); the batch's oracle takes them."""
        ep = self._scale_epoch(seeds[0], device)
        V, nb = ep.V, -(-ep.V // SAMPLE_BLOCK)
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        k = max(1, min(k, SCALE_OUTPUTS // ((ep.F + BAND) * nb)))
        fp64 = bool(rng.random() < SCALE_FP64)
        r = scale_rows(ep, scale_tails(rng, k, ep), device)
        k, S = len(r.n), int(r.B.sum())
        rows = _rows(r.n, r.B, device)
        state = rows.state_base + r.eidx
        of_state = owners(r.B, device)
        filler = torch.arange(S, device=device) - host_to(np.cumsum(r.B) - r.B, device)[of_state] < ep.q
        seed = torch.where(filler, _seeds(gen, S, device, ends=0.0), _seeds(gen, S, device))
        top = host_to((rng.choice(SCALE_POSITIONS, size=k) - 64).astype(np.float64), device)[of_state]
        start = (torch.rand(S, generator=gen, device=device, dtype=torch.float64) * top).to(torch.int64)
        pos = start[state] + r.elp.to(torch.int64)
        rand = torch.nonzero(r.temperature[state] != 0).flatten()
        at, srand, prand = rows.local[rand], state[rand], pos[rand]
        res = _sampled(ep.table, at, srand, seed, prand, r.temperature, fp64, V)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            met = ~res["settled"].all(1)
            if not bool(met.any()):
                break
            hit = torch.zeros(S, dtype=torch.bool, device=device)
            hit[srand[met]] = True
            seed = torch.where(hit, seed ^ _key(attempt), seed)
            again = torch.nonzero(hit[srand]).flatten()
            for name, v in _sampled(ep.table, at[again], srand[again], seed, prand[again], r.temperature, fp64, V).items():
                res[name][again] = v
        else:
            raise RuntimeError(f"_gumbel_sample_kernel: a window after {MAX_ATTEMPTS} re-keyings of a scale step's seeds")
        t, s = r.n.tolist(), r.B.tolist()
        cat = {"expanded_idx_mapping": r.eidx, "seeds": seed, "pos": pos, "temperature": r.temperature}
        lengths = {"expanded_idx_mapping": t, "seeds": s, "pos": t, "temperature": s}
        outputs = {"local_argmax": (torch.int64, [x * nb for x in t]),
                   "local_max": (torch.float64 if fp64 else torch.float32, [x * nb for x in t])}
        return DeviceBatch(cat, lengths, {x: [(y,) for y in lengths[x]] for x in cat}, {"logits": ep.table},
                           {"logits": t}, outputs,
                           [{"apply_temperature": False, "is_drafting": False, "use_fp64": fp64} for _ in t],
                           {"scale": ep, "random": (rand, res)},
                           [{"shapes": {"local_argmax": (x, nb), "local_max": (x, nb)}} for x in t])

    def _scale_oracle(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """A scale batch's writes, every block of every row: the random rows' winners computed
        directly (the draw's, which it computed to re-key off windows), the greedy rows' once
        per distinct table row (every filler's zero row as one), each row taking its row's."""
        ep: ScaleEpoch = b.extra["scale"]
        V, nb = ep.V, -(-ep.V // SAMPLE_BLOCK)
        a = b.cat
        dev = a["pos"].device
        rows = rows_of(b.lengths, "expanded_idx_mapping", "seeds", dev.type)
        state = rows.state_base + a["expanded_idx_mapping"].long()
        temperature = a["temperature"]
        fp64 = bool(b.scalars[0]["use_fp64"])
        noisy = temperature[state] != 0
        rand = torch.nonzero(noisy).flatten()
        stored = b.extra.get("random")
        if stored is not None and torch.equal(stored[0], rand):
            res = stored[1]
        else:
            res = _sampled(ep.table, rows.local[rand], state[rand], a["seeds"], a["pos"][rand], temperature, fp64, V)
        if not bool(res["settled"].all()):
            raise ValueError("_gumbel_sample_kernel: a block meets a window (the extended tier's: its winner is any "
                             "of its candidates, which an exact comparison cannot take); draws are re-keyed off them")
        content = torch.where(rows.local < ep.F, 0, rows.local)[~noisy]  # the filler's rows are zeros, as row 0 is
        uniq, inverse = torch.unique(content, return_inverse=True)
        zero = torch.zeros(uniq.numel(), dtype=torch.int64, device=dev)
        greedy = _sampled(ep.table, uniq, zero, torch.zeros(1, dtype=torch.int64, device=dev), zero,
                          torch.zeros(1, dtype=torch.float32, device=dev), fp64, V)  # temperature 0: no noise
        slot = torch.empty(noisy.numel(), dtype=torch.int64, device=dev)
        slot[~noisy] = inverse
        slot[rand] = uniq.numel() + torch.arange(rand.numel(), device=dev)

        def pick(name: str) -> torch.Tensor:
            return torch.cat([greedy[name], res[name]])[slot].reshape(-1)

        index = torch.arange(noisy.numel() * nb, device=dev)
        return {"local_argmax": (index, pick("nominal")), "local_max": (index, pick("value"), pick("bound"))}

    def _scale_features(self, b: DeviceBatch) -> list[frozenset[str]]:
        """:meth:`batch_features` of a scale batch, each row's logits flags computed once per
        table row it reads (the filler's zero rows as row 0)."""
        ep: ScaleEpoch = b.extra["scale"]
        V, k = ep.V, len(b)
        a = b.cat
        dev = a["pos"].device
        rows = rows_of(b.lengths, "expanded_idx_mapping", "seeds", dev.type)
        eidx = a["expanded_idx_mapping"].long()
        state = rows.state_base + eidx
        t, seed = a["temperature"][state], a["seeds"][state]
        noisy = t != 0
        content = torch.where(rows.local < ep.F, 0, rows.local)
        used = torch.unique(content)
        x = ep.table[used]
        masked = torch.zeros(ep.table.shape[0], dtype=torch.bool, device=dev)
        negative = torch.zeros_like(masked)
        masked[used] = torch.isneginf(x).any(1)
        negative[used] = x.amax(1) < 0
        on = per_case_any(rows, {
            "greedy_row": ~noisy, "random_row": noisy, "unit_temperature": t == 1, "padded_row": eidx < 0,
            "masked_logits": noisy & masked[content], "negative": negative[content],
            "seed_at_int64_limit": (seed == INT64_MIN) | (seed == INT64_MAX), "positions_past_65535": a["pos"] > 0xFFFF})
        negative_rows = on.pop("negative")
        n = np.asarray(b.lengths["expanded_idx_mapping"], dtype=np.int64)
        fp64 = bool(b.scalars[0]["use_fp64"])
        full = {"target_sampling": np.ones(k, bool), "drafting": np.zeros(k, bool), "per_token_columns": np.zeros(k, bool),
                "fp64_noise": on["random_row"] & fp64, "several_blocks": np.full(k, V > SAMPLE_BLOCK),
                "partial_last_block": np.full(k, V > SAMPLE_BLOCK and V % SAMPLE_BLOCK != 0),
                "negative_row": negative_rows & (V % SAMPLE_BLOCK != 0), "untouched_cache_rows": np.zeros(k, bool),
                "vocab_past_131072": np.full(k, V > 1 << 17),
                "row_offset_past_2_31": np.asarray([past_limit((m - 1) * V) for m in n.tolist()])}
        return feature_sets(on | full, k)

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """Every case's rows in one call of the torch oracle (a chunk of rows at a time; a drawn
        batch's made by its draw, on the inputs as drawn): per block its winner (exact) and
        maximum (within its bound; exact where it is 0), over the cases' outputs concatenated;
        every cache element a valid row copies (bit for bit). A scale batch's rows: each
        random row's and each distinct greedy row's once (:meth:`_scale_oracle`)."""
        if "scale" in b.extra:
            return self._scale_oracle(b)
        a, x = b.cat, _arrays(b)
        rows, eidx, V = x["rows"], x["eidx"], x["V"]
        valid = eidx >= 0
        state = torch.where(valid, rows.state_base + eidx, torch.full_like(eidx, -1))
        res = b.extra.get("winners")  # the draw's, which it computed to re-key off windows
        if res is None:  # a case alone
            res = tensor_ops_v2.gumbel_sample_winners(
                x["logits"], state, a["seeds"].reshape(-1), a["pos"].reshape(-1), a["temperature"].reshape(-1),
                x["mode"] == "drafter", x["mode"] != "target", x["fp64"], V, x["col"], SAMPLE_BLOCK,
                noise=lane_noise_on(eidx.device))
        if not bool(res["settled"].all()):
            raise ValueError("_gumbel_sample_kernel: a block meets a window (the extended tier's: its winner is any "
                             "of its candidates, which an exact comparison cannot take); draws are re-keyed off them")
        index = torch.arange(res["nominal"].numel(), device=eidx.device)
        out: dict[str, tuple[Any, ...]] = {"local_argmax": (index, res["nominal"].reshape(-1)),
                                           "local_max": (index, res["value"].reshape(-1), res["bound"].reshape(-1))}
        if "logits_cache" in a:  # a valid row's logits (the watermarking drafter's source) at [s, col, :V]
            K = rows.per_row(x["K"])
            base = rows.per_row(np.cumsum(x["R"] * x["K"] * V) - x["R"] * x["K"] * V)
            j = torch.nonzero(valid).flatten()
            start = base[j] + (eidx[j] * K[j] + x["col"][j]) * V
            src = a["logits_cache_source"].reshape(-1, V) if "logits_cache_source" in a else x["logits"]
            out["logits_cache"] = ((start[:, None] + torch.arange(V, device=j.device)).reshape(-1), src[j].reshape(-1))
        return out


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """The record's features of each case (``features_of``), from the batch's arrays on the
        device: one copy to the host for all."""
        if "scale" in b.extra:
            return self._scale_features(b)
        a, x = b.cat, _arrays(b)
        rows, eidx, V, T = x["rows"], x["eidx"], x["V"], x["T"]
        k = len(T)
        valid = eidx >= 0
        at = rows.state_base + eidx.clamp(min=0)
        t = torch.where(valid, a["temperature"].reshape(-1)[at], torch.zeros((), device=eidx.device))
        seed = a["seeds"].reshape(-1)[at]
        logits = x["logits"]
        hit = torch.zeros(int(x["R"].sum()), dtype=torch.bool, device=eidx.device)
        hit[at[valid]] = True
        used = torch.zeros(k, dtype=torch.int64, device=eidx.device).index_add_(
            0, owners(x["R"], eidx.device.type), hit.long()).cpu().numpy()  # per case, its state rows a valid row names
        on = per_case_any(rows, {
            "greedy_row": t == 0, "random_row": t != 0, "unit_temperature": t == 1, "padded_row": ~valid,
            "masked_logits": (t != 0) & torch.isneginf(logits).any(1),
            "negative": valid & (logits.amax(1) < 0),
            "seed_at_int64_limit": valid & ((seed == INT64_MIN) | (seed == INT64_MAX)),
            "positions_past_65535": a["pos"].reshape(-1) > 0xFFFF})
        negative = on.pop("negative")
        mode, cache = x["mode"], "logits_cache" in a
        full = {"target_sampling": np.full(k, mode == "target"), "drafting": np.full(k, mode == "drafter"),
                "per_token_columns": np.full(k, mode == "watermark"), "fp64_noise": on["random_row"] & x["fp64"],
                "several_blocks": np.full(k, V > SAMPLE_BLOCK),
                "partial_last_block": np.full(k, V > SAMPLE_BLOCK and V % SAMPLE_BLOCK != 0),
                "negative_row": negative & (V % SAMPLE_BLOCK != 0),
                "untouched_cache_rows": cache & (x["R"] > used), "vocab_past_131072": np.full(k, V > 1 << 17),
                "row_offset_past_2_31": np.asarray([past_limit((n - 1) * V) for n in T.tolist()])}
        return feature_sets(on | full, k)


    def reached(self, case: Case) -> frozenset[str]:
        """The scale feature alone at production scale (the others look at every row)."""
        n, W = case.arrays["logits"].shape
        if past_limit((n - 1) * W):
            return frozenset({"row_offset_past_2_31"})
        return TARGET.features_of(case)

    def checks_at_scale(self, case: Case) -> bool:
        """The target's sampling (no cache): the drafter's goes through the record's check."""
        return "logits_cache" not in case.arrays

    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """Every block's winner and maximum, a block of rows at a time, against the torch oracle
        (the target's sampling without a cache)."""
        sc, sm = case.scalars, run.small
        if "logits_cache" in case.arrays:
            raise ValueError("a production-scale case of the Gumbel kernel samples the target's logits (no cache)")
        V = case.arrays["logits"].shape[1]
        table, outs = run.tables["logits"], run.outs
        count = torch.zeros((), dtype=torch.int64, device=run.device)
        for lo, hi in table.blocks():
            res = tensor_ops_v2.gumbel_sample_rows(
                table.rows(lo, hi), sm["expanded_idx_mapping"][lo:hi], sm["seeds"], sm["pos"][lo:hi], sm["temperature"],
                bool(sc.get("apply_temperature")), bool(sc.get("is_drafting")), bool(sc.get("use_fp64")), V, SAMPLE_BLOCK,
                lane_noise_on(run.device))
            count += tensor_ops_v2.gumbel_mismatches(res, outs["local_argmax"].view[lo:hi], outs["local_max"].view[lo:hi],
                                                     SAMPLE_BLOCK)
            del res
        return count

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        rows = checked_rows(case)
        return keep_rows(case, rows), rows


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
