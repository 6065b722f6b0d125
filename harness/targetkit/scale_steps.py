"""Production-scale batches of Model Runner V2 verification steps (docs/CONTRACT.md §28-§35):
``k`` steps past ``2**31`` target logits at once, over one shared table, for the scale lane
(:attr:`~.device.DeviceTarget.scale_batches`).

A production-scale step of a verification kernel is what :func:`~.scale_rows.scale_request_rows`
lays out: greedy requests of 16 drafts whose rows are zeros up to a few rows before the first
row an int32 offset cannot reach, then live requests across it. A scale *epoch* draws what
its batches share, on the device (:func:`scale_epoch`): the vocabulary, the *filler* (those
greedy requests, the same for every step of the epoch), the target logits table ``[F + BAND,
V]`` (zeros, then :data:`BAND` live rows) and, in half the epochs, the drafter's cache
``[S, K, V]`` (zeros, then the live states' rows). Each step then draws its own *tail*
(:func:`scale_tails`): one to three requests over the live rows, reaching past the limit, with
their own temperatures (greedy or random). Case ``j`` of a batch reads the first ``n_j`` rows
of the table and the first ``B_j`` states of the cache, as the ordinary batches read their
shared tables (:class:`~.device_batch.DeviceBatch`).

A batched oracle then computes the filler's rows once (zero rows of greedy requests: the same
for every step) and the tails' rows alone (:func:`tail_rows`): a check of a step costs a few
dozen rows of oracle, not ``2**31`` elements.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ...oracles import tensor_ops_v2
from ...oracles.host_copy import host_to
from .device_draws import scale_vocab
from .runner_v2_verify import STATS, STATS_BLOCK, WITH_LOGPROBS
from .scale import flat_limit
from .scale_device import first_row
from .scale_rows import LIVE_ROWS, _requests_of
from .verify_batch import _logits, bf16
from .verify_chain import ATTEMPTS, re_key, resample_requests, rows_at_once

BAND = 3 * LIVE_ROWS
"""Live rows of an epoch's table (a tail's requests read at most these)."""
TAIL_REQUESTS = 3
"""Requests of a tail at most."""
K = 16
"""Speculative steps of a scale step (``num_speculative_tokens``: vLLM's most; the cache's
second axis)."""
TAIL_TEMPERATURES = (0.0, 0.0, 0.3, 0.7, 1.0, 1.3)
"""A tail request's temperature (a third greedy); an epoch of masked rows draws the others."""


@dataclass
class ScaleEpoch:
    """What an epoch's scale batches share: the vocabulary ``V``; the filler's requests' rows
    ``fill`` (``F`` rows in all, greedy, state rows ``0 .. len(fill) - 1``); the target logits
    ``table`` ``[F + BAND, V]`` (zeros, then the live rows: the logits ``style``, top-k masked
    rows where ``masked``); the drafter's ``cache`` ``[len(fill) + TAIL_REQUESTS, K, V]``
    (zeros, then the tail states' rows, bfloat16-rounded; ``None``: one-hot drafts)."""

    V: int
    fill: list[int]
    table: torch.Tensor
    cache: torch.Tensor | None
    style: str
    masked: bool
    memo: dict = field(default_factory=dict, repr=False, compare=False)
    """Per-row results its batches' oracles keep (:func:`distinct_stats`)."""

    @property
    def F(self) -> int:  # noqa: N802
        """The filler's rows."""
        return int(sum(self.fill))

    @property
    def q(self) -> int:
        """The filler's requests (and state rows)."""
        return len(self.fill)


def scale_epoch(seed: int, device: str, cache_share: float = 0.5) -> ScaleEpoch:
    """The shared part of a scale epoch, from ``seed``: a current model's vocabulary
    (:func:`~.device_draws.scale_vocab`); the filler up to 1 to 9 rows before the first row
    ``Z`` an int32 offset cannot reach (requests of 17 rows, one of 2 to 17: as
    :func:`~.scale_rows.scale_request_rows`); the table's live rows in a logits style (with
    log-probabilities), in three epochs in ten every live row masked but for its top 1 to 64;
    with ``cache_share`` the drafter's cache, its tail states' rows near the live rows (noise
    of 0.5) or other logits."""
    rng = np.random.default_rng(seed)
    V = scale_vocab(rng)
    gen = torch.Generator(device=device).manual_seed(seed)
    Z = first_row(V)
    fill = _requests_of(max(0, Z - 1 - int(rng.integers(0, 9))))
    F = int(sum(fill))
    style = str(rng.choice(WITH_LOGPROBS))
    masked = bool(rng.random() < 0.3)
    table = torch.zeros((F + BAND, V), dtype=torch.float32, device=device)
    live = _logits(gen, BAND, V, style, device)
    if masked:
        keep = int(rng.integers(1, min(64, V) + 1))
        top = live.topk(keep, dim=1).indices
        live = torch.full_like(live, float("-inf")).scatter_(1, top, live.gather(1, top))
    table[F:] = live
    cache = None
    if rng.random() < cache_share:
        cache = torch.zeros((len(fill) + TAIL_REQUESTS, K, V), dtype=torch.float32, device=device)
        rows = torch.arange(TAIL_REQUESTS * K, device=device)  # state j's step i: live row 17 j + i
        base = live[(rows // K) * LIVE_ROWS + rows % K]
        fin = torch.where(torch.isfinite(base), base, torch.full_like(base, -30.0))
        near = fin + torch.randn(fin.shape, generator=gen, device=device) * 0.5
        other = _logits(gen, fin.shape[0], V, "gauss", device)
        cache[len(fill):] = bf16(near if rng.random() < 0.5 else other).view(TAIL_REQUESTS, K, V)
    return ScaleEpoch(V, fill, table, cache, style, masked)


def kept_epoch(owner: Any, seed: int, device: str, draw: Callable[[int, str], Any]) -> Any:
    """The scale epoch ``seed``'s shared tables of device target ``owner``: drawn by
    ``draw(seed, device)`` and kept on it for the epoch's next batch; the last epoch's are freed
    before the next are drawn (one epoch's tables of gigabytes at a time)."""
    key = (seed, device, flat_limit())
    if getattr(owner, "_epoch", (None,))[0] != key:
        owner._epoch = (None, None)
        if device != "cpu":
            torch.cuda.empty_cache()
        owner._epoch = (key, draw(seed, device))
    return owner._epoch[1]


def padded(rows: list[list], dtype: type = np.int64, width: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Ragged ``rows`` as a ``[len(rows), W]`` array (``W`` the longest row, at least ``width``;
    0 past each row's end) and each row's length."""
    t = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    out = np.zeros((len(rows), max(width, int(t.max()) if t.size else 0)), dtype=dtype)
    out[np.arange(out.shape[1]) < t[:, None]] = np.fromiter(itertools.chain.from_iterable(rows), dtype=dtype,
                                                            count=int(t.sum()))
    return out, t


@dataclass
class ScaleTails:
    """``k`` steps' own requests after the filler: per step the rows of each (``counts``: 1 to
    17, a request's drafts and its bonus row) and its temperature (``temperature``)."""

    counts: list[list[int]]
    temperature: list[list[float]]

    def n(self, epoch: ScaleEpoch) -> np.ndarray:
        """Logits rows per step (the filler's and its tail's)."""
        return epoch.F + padded(self.counts)[0].sum(axis=1)

    def B(self, epoch: ScaleEpoch) -> np.ndarray:  # noqa: N802
        """Requests (and state rows) per step."""
        return epoch.q + np.fromiter(map(len, self.counts), dtype=np.int64, count=len(self.counts))

    def _per_request(self, epoch: ScaleEpoch, filler: np.ndarray, tail: np.ndarray, t: np.ndarray) -> np.ndarray:
        """A value per request of every step, concatenated: the filler's requests' ``filler``,
        then the step's ``t[i]`` tail requests' (row ``i`` of ``tail``, ``[k, W]``)."""
        q = epoch.q
        k, W = tail.shape
        m = np.zeros((k, q + W), dtype=np.result_type(filler, tail))
        m[:, :q] = filler
        m[:, q:] = tail
        return m[np.arange(q + W) < (q + t)[:, None]]

    def requests(self, epoch: ScaleEpoch) -> np.ndarray:
        """Every step's requests' logits rows (the filler's, then its tail's), concatenated."""
        c, t = padded(self.counts)
        return self._per_request(epoch, np.asarray(epoch.fill, dtype=np.int64), c, t)

    def cu_num_logits(self, epoch: ScaleEpoch) -> np.ndarray:
        """Every step's ``cu_num_logits`` (``[B + 1]`` each), concatenated (int32)."""
        c, t = padded(self.counts)
        fill = np.asarray(epoch.fill, dtype=np.int64)
        W = c.shape[1]
        m = np.zeros((len(t), 1 + epoch.q + W), dtype=np.int64)
        m[:, 1 : 1 + epoch.q] = np.cumsum(fill)
        m[:, 1 + epoch.q :] = epoch.F + np.cumsum(c, axis=1)
        return m[np.arange(m.shape[1]) < (1 + epoch.q + t)[:, None]].astype(np.int32)

    def idx_mapping(self, epoch: ScaleEpoch) -> np.ndarray:
        """Every step's ``idx_mapping`` (request ``r``'s state row ``r``), concatenated (int64)."""
        t = np.fromiter(map(len, self.counts), dtype=np.int64, count=len(self.counts))
        W = int(t.max()) if t.size else 0
        m = np.broadcast_to(np.arange(epoch.q + W, dtype=np.int64), (t.size, epoch.q + W))
        return m[np.arange(epoch.q + W) < (epoch.q + t)[:, None]]

    def temperatures(self, epoch: ScaleEpoch) -> np.ndarray:
        """Every step's state rows' temperatures (the filler's 0), concatenated (float32)."""
        T, t = padded(self.temperature, np.float64)
        return self._per_request(epoch, np.zeros(epoch.q), T, t).astype(np.float32)


def scale_tails(rng: np.random.Generator, k: int, epoch: ScaleEpoch) -> ScaleTails:
    """``k`` tails: each one to three requests of 1 to 17 rows (17 one time in three: 16
    drafts), one of them with a drafted row (not its bonus row) at or past the first row ``Z``
    an int32 offset cannot reach, at most :data:`BAND` rows in all; each request greedy or
    random (:data:`TAIL_TEMPERATURES`; an epoch of masked rows: random alone, as vLLM masks
    only a random request's logits)."""
    Z = first_row(epoch.V)
    temps = TAIL_TEMPERATURES[2:] if epoch.masked else TAIL_TEMPERATURES
    t = rng.integers(1, TAIL_REQUESTS + 1, size=k)
    valid = np.arange(TAIL_REQUESTS) < t[:, None]
    c = np.where(rng.random((k, TAIL_REQUESTS)) < 1 / 3, LIVE_ROWS, rng.integers(1, LIVE_ROWS + 1, size=(k, TAIL_REQUESTS)))
    c = np.where(valid, c, 0)
    for back in range(TAIL_REQUESTS):  # the last requests grown to 17 rows until one is
        j = t - 1 - back
        grow = np.flatnonzero(~_drafted_past(c, epoch.F, Z) & (j >= 0))
        c[grow, j[grow]] = LIVE_ROWS
    assert _drafted_past(c, epoch.F, Z).all(), "a tail of 17-row requests reaches past the filler"
    T = rng.choice(np.asarray(temps, dtype=np.float64), size=(k, TAIL_REQUESTS))
    return ScaleTails([row[:n].tolist() for row, n in zip(c, t.tolist(), strict=True)],
                      [row[:n].tolist() for row, n in zip(T, t.tolist(), strict=True)])


def _drafted_past(counts: np.ndarray, F: int, Z: int) -> np.ndarray:  # noqa: N803
    """Per row of ``counts`` (``[k, W]``, requests of rows from row ``F`` on; 0: none), whether
    it has a drafted row at or past row ``Z`` (a request's rows but its last, the bonus row)."""
    ends = F + np.cumsum(counts, axis=1)
    return np.any((counts > 1) & (ends - 2 >= Z), axis=1)


@dataclass
class ScaleRows:
    """Every step's logits rows, concatenated (device tensors): per row its request's state row
    within its step (``eidx``, int64), its step ``elp`` (int32), whether it is its request's
    bonus row, its step ``cid``; per step its rows ``n`` and requests ``B`` (host), the
    temperatures of its state rows concatenated (``temperature``, float32)."""

    eidx: torch.Tensor
    elp: torch.Tensor
    bonus: torch.Tensor
    cid: torch.Tensor
    n: np.ndarray
    B: np.ndarray
    temperature: torch.Tensor


def scale_rows(epoch: ScaleEpoch, tails: ScaleTails, device: str) -> ScaleRows:
    """The rows of ``k`` steps: the filler's requests then each tail's, state row = request."""
    counts = tails.requests(epoch)
    n, B = tails.n(epoch), tails.B(epoch)
    state = tails.idx_mapping(epoch)
    ct = host_to(counts, device)
    N = int(counts.sum())
    req = torch.repeat_interleave(torch.arange(counts.size, device=device), ct, output_size=N)
    first = torch.cumsum(ct, 0) - ct
    elp = torch.arange(N, device=device) - first[req]
    bonus = elp == (ct - 1)[req]
    cid = torch.repeat_interleave(torch.arange(n.size, device=device), host_to(n, device), output_size=N)
    return ScaleRows(host_to(state, device)[req], elp.to(torch.int32), bonus, cid, n, B,
                     host_to(tails.temperatures(epoch), device))


def tail_rows(n: np.ndarray, F: int, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # noqa: N803
    """The rows past the filler of steps of ``n`` rows each (``F`` the filler's): per such row
    its step, its row within its step, and its place among every step's rows concatenated."""
    tail = np.asarray(n, dtype=np.int64) - F
    cid = torch.repeat_interleave(torch.arange(tail.size, device=device), host_to(tail, device),
                                  output_size=int(tail.sum()))
    local = F + torch.arange(int(tail.sum()), device=device) - host_to(np.cumsum(tail) - tail, device)[cid]
    at = host_to(np.cumsum(n) - n, device)[cid] + local
    return cid, local, at


def tiled(per_case: torch.Tensor, starts: np.ndarray) -> torch.Tensor:
    """Flat indices ``per_case`` of one step's output, for every step whose output starts at
    ``starts`` (the steps' outputs concatenated): ``[k * len(per_case)]``."""
    return (host_to(starts, per_case.device)[:, None] + per_case[None, :]).reshape(-1)


# -- a chain kernel's tails: drafts and §30's statistics (block verification's stages) ----------

CHAIN_STATS = ("target_local_max", "target_local_sumexp", "draft_local_max", "draft_local_sumexp")
"""§30's statistics the chain kernels after it read (§31, §32)."""


def tail_drafts(rng: np.random.Generator, gen: torch.Generator, epoch: ScaleEpoch, rows: ScaleRows, k: int,
                device: str, real: torch.Tensor | None = None, filler: int = 0) -> torch.Tensor:
    """``draft_sampled`` of ``k`` steps' rows (``[N]`` int32; the filler's ``filler``): the tails' drafts
    as :func:`~.verify_batch.draw_steps` draws them, row ``j``'s at ``j + 1`` (a request's first
    row: the token before, any id): a random id, half of those past a request's first row the
    target's favourite at the row before; in three steps in ten a quarter of those ``-1`` (but
    at the global rows ``real``, which keep their token)."""
    V, F = epoch.V, epoch.F
    n = rows.n
    N = int(n.sum())
    cid, local, at = tail_rows(n, F, device)
    T = at.numel()
    elp = rows.elp[at].long()
    tok = (torch.rand(T, generator=gen, device=device) * V).long().clamp(max=V - 1)
    live = epoch.table[F:, :V]
    fav = torch.where(torch.isfinite(live), live, float("-inf")).argmax(1)[local - F]
    take = (torch.rand(T, generator=gen, device=device) < 0.5) & (elp > 0)
    tok = torch.where(take, torch.cat([fav.new_zeros(1), fav[:-1]]), tok)
    refused = host_to(rng.random(k) < 0.3, device)[cid]
    minus = refused & (torch.rand(T, generator=gen, device=device) < 0.25) & (elp > 0)
    if real is not None:
        keep = torch.zeros(N, dtype=torch.bool, device=device)
        keep[real] = True
        minus &= ~keep[at]
    tok = torch.where(minus, -1, tok)
    ds = torch.full((N,), filler, dtype=torch.int32, device=device)
    ds[at] = tok.to(torch.int32)
    return ds


def distinct_stats(epoch: ScaleEpoch, content: torch.Tensor, t: torch.Tensor, bonus: torch.Tensor, state: torch.Tensor,
                   elp: torch.Tensor) -> tuple[dict[str, tuple[torch.Tensor, ...]], torch.Tensor]:
    """§30's statistics by the torch oracle (:func:`~eaglefuzz.oracles.tensor_ops_v2.local_logits_stats_rows`:
    per statistic ``(written, value, bound)``, ``[U, NB]``) of each distinct one of rows whose
    logits are the epoch's table rows ``content``, with temperatures ``t``, bonus flags
    ``bonus``, state rows ``state`` and steps ``elp`` (a random drafted row reads the drafter's
    cache at ``state K + min(elp, K - 1)``); and each row's distinct row (``inverse``). Rows
    alike in all of these have alike statistics. A value not written is unspecified.

    The target's statistics depend on the table row alone and the drafter's on its cache row and
    temperature: each is computed once an epoch (:func:`_epoch_memo`), a block of rows at a time,
    whatever the batch (an epoch's tails read a few dozen live rows)."""
    draft_at = torch.where((t != 0) & ~bonus, state * K + elp.clamp(max=K - 1), -1)
    if epoch.cache is None:
        draft_at = torch.full_like(draft_at, -1)
    key = torch.stack([content, t.view(torch.int32).long(), bonus.long(), draft_at], 1)
    uniq, inverse = torch.unique(key, dim=0, return_inverse=True)
    tu = uniq[:, 1].to(torch.int32).view(torch.float32)
    greedy, bon = tu == 0, uniq[:, 2] > 0
    nb = -(-epoch.V // STATS_BLOCK)
    g = (greedy & ~bon)[:, None].expand(-1, nb)
    r = (~greedy & ~bon)[:, None].expand(-1, nb)
    arg, m32, S32, Sb = _target_memo(epoch, uniq[:, 0])
    zero = torch.zeros(m32.shape, dtype=torch.float64, device=m32.device)
    out = {"target_local_argmax": (g, arg, zero), "target_local_max": (g | r, m32, zero),
           "target_local_sumexp": (r, S32, Sb)}
    if epoch.cache is None:
        none = torch.zeros_like(r)
        out["draft_local_max"], out["draft_local_sumexp"] = (none, m32, zero), (none, S32, zero)
        return out, inverse
    dm, dmb = torch.zeros_like(m32), torch.zeros_like(zero)
    ds, dsb = torch.zeros_like(S32), torch.zeros_like(zero)
    for bits in torch.unique(uniq[r[:, 0], 1]).tolist():
        at = torch.nonzero(r[:, 0] & (uniq[:, 1] == bits)).flatten()
        dm[at], dmb[at], ds[at], dsb[at] = _draft_memo(epoch, uniq[at, 3], bits)
    out["draft_local_max"], out["draft_local_sumexp"] = (r, dm, dmb), (r, ds, dsb)
    return out, inverse


def _epoch_memo(epoch: ScaleEpoch, key: Any, rows: int, rows_of: torch.Tensor,
                compute: Callable[[torch.Tensor], tuple[torch.Tensor, ...]]) -> tuple[torch.Tensor, ...]:
    """Per-row results of ``compute`` (a function of rows ``[m]`` giving tensors ``[m, NB]``)
    at rows ``rows_of`` of ``rows``, each row computed once for ``epoch`` (kept on it under
    ``key``), the missing ones a block at a time."""
    memo = epoch.memo.get(key)
    dev = rows_of.device
    if memo is None:
        memo = epoch.memo[key] = (torch.zeros(rows, dtype=torch.bool, device=dev), [])
    known, parts = memo
    missing = torch.unique(rows_of[~known[rows_of]])
    step = rows_at_once(epoch.V, STATS_BLOCK)
    for lo in range(0, missing.numel(), step):
        at = missing[lo : lo + step]
        got = compute(at)
        if not parts:
            parts += [torch.zeros((rows, *x.shape[1:]), dtype=x.dtype, device=dev) for x in got]
        for whole, x in zip(parts, got, strict=True):
            whole[at] = x
    known[missing] = True
    return tuple(x[rows_of] for x in parts)


def _target_memo(epoch: ScaleEpoch, rows: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """§30's target statistics of table rows ``rows`` (``[m, NB]`` each): every block's argmax
    and maximum (as a greedy row writes them), ``sum exp(x - m)`` and its bound (as a random row
    writes it)."""
    def compute(at: torch.Tensor) -> tuple[torch.Tensor, ...]:
        none = torch.zeros(at.numel(), dtype=torch.bool, device=at.device)
        s = tensor_ops_v2.local_logits_stats_rows(epoch.table[at], none, none, None,
                                                  torch.ones(at.numel(), device=at.device), epoch.V, STATS_BLOCK)
        return s["target_local_argmax"][1], s["target_local_max"][1], *s["target_local_sumexp"][1:]

    return _epoch_memo(epoch, "target", epoch.table.shape[0], rows, compute)


def _draft_memo(epoch: ScaleEpoch, rows: torch.Tensor, bits: int) -> tuple[torch.Tensor, ...]:
    """§30's drafter statistics (maximum, its bound, sum, its bound; ``[m, NB]`` each) of the
    drafter's cache rows ``rows`` at the temperature of float32 bits ``bits``."""
    cache = epoch.cache.view(-1, epoch.V)
    T = torch.tensor([bits], dtype=torch.int32).view(torch.float32).item()

    def compute(at: torch.Tensor) -> tuple[torch.Tensor, ...]:
        s = tensor_ops_v2.local_draft_stats_rows(cache[at], torch.full((at.numel(),), T, device=at.device),
                                                 epoch.V, STATS_BLOCK)
        return (*s["draft_local_max"], *s["draft_local_sumexp"])

    return _epoch_memo(epoch, ("draft", bits), cache.shape[0], rows, compute)


def tail_stats(epoch: ScaleEpoch, rows: ScaleRows, filler: dict[str, torch.Tensor], device: str) -> dict[str, torch.Tensor]:
    """§30's statistics (``[N, NB]`` each, the names and dtypes of ``filler``: every row's
    arrays as the filler's rows hold them) of ``k`` steps' rows, the tails' rows the torch
    oracle's (:func:`distinct_stats`; unwritten: NaN, an argmax ``-1``); ``filler`` is updated
    in place and returned."""
    n, B = rows.n, rows.B
    cid, local, at = tail_rows(n, epoch.F, device)
    state = rows.eidx[at]
    t = rows.temperature[host_to(np.cumsum(B) - B, device)[cid] + state]
    res, inverse = distinct_stats(epoch, local, t, rows.bonus[at], state, rows.elp[at].long())
    for x, out in filler.items():
        w, v, _ = res[x]
        out[at] = torch.where(w, v.to(out.dtype), -1 if x == "target_local_argmax" else float("nan"))[inverse]
    return filler


def filled(N: int, V: int, fills: dict[str, float], device: str) -> dict[str, torch.Tensor]:  # noqa: N803
    """Every row's §30 statistics ``[N, NB]`` (float32) holding the constants ``fills`` (the
    filler's, for :func:`tail_stats`)."""
    nb = -(-V // STATS_BLOCK)
    return {x: torch.full((N, nb), float(f), dtype=torch.float32, device=device) for x, f in fills.items()}


def random_past_limit(rng: np.random.Generator, tails: ScaleTails, epoch: ScaleEpoch) -> None:
    """Each tail whose requests with a drafted row past the limit are all greedy (a chain
    kernel reads no target logit of a greedy row) with the last of those random (in place;
    :data:`TAIL_TEMPERATURES`' random ones): its case then reads a row an int32 offset cannot
    reach."""
    Z = first_row(epoch.V)
    c, _ = padded(tails.counts)
    T, _ = padded(tails.temperature, np.float64, c.shape[1])
    past = (c > 1) & (epoch.F + np.cumsum(c, axis=1) - 2 >= Z)  # its last drafted row past Z
    need = np.flatnonzero(past.any(axis=1) & ~(past & (T != 0)).any(axis=1))
    last = past.shape[1] - 1 - np.argmax(past[need, ::-1], axis=1)
    new = rng.choice(np.asarray([t for t in TAIL_TEMPERATURES if t]), size=need.size)
    for r, j, x in zip(need.tolist(), last.tolist(), new.tolist(), strict=True):
        tails.temperature[r][j] = x


class RowTable:
    """Rows ``rows`` of ``table`` as a ``[len(rows), W]`` table read lazily, where a torch oracle
    of §33 or §34 takes its target logits (:func:`~eaglefuzz.oracles.tensor_ops_v2.rejection_steps`
    reads one element per verified row of its ``reshape(-1)``,
    :func:`~.verify_chain.resample_requests` whole rows by index): the steps' tails read the
    epoch's live rows without a copy per step."""

    def __init__(self, table: torch.Tensor, rows: torch.Tensor, flat: bool = False) -> None:
        self.table, self.rows, self.flat = table, rows, flat
        self.W = table.shape[1]
        self.shape = (rows.numel(), self.W)
        self.device = table.device

    def reshape(self, *shape: int) -> RowTable:
        assert shape == (-1,)
        return RowTable(self.table, self.rows, True)

    def numel(self) -> int:
        return self.rows.numel() * self.W

    def __getitem__(self, idx: torch.Tensor) -> torch.Tensor:
        if self.flat:
            return self.table[self.rows[idx // self.W], idx % self.W]
        return self.table[self.rows[idx]]


@dataclass
class StandardSteps:
    """``k`` production-scale standard-verification steps of a scale epoch, drawn and settled
    (:func:`standard_steps`), every case's arrays concatenated (device tensors): per logits row
    ``draft_sampled`` (int32), ``pos`` (int64) and §30's statistics ``stats`` (``[N, NB]``: the
    filler's :func:`filler_stats`, the tails' the torch oracle's, ``-1``/NaN where unwritten);
    per state row ``seed`` (int64; the filler's 0); the rows (:class:`ScaleRows`) and tails;
    ``use_fp64`` (§34's noise, which settling reads); per tail request (every step's tail
    requests concatenated) its request in the batch ``tail_request`` and the §33 and §34 of
    the settled tails (``rejection``, ``resample``: :func:`~eaglefuzz.oracles.tensor_ops_v2.rejection_steps`,
    :func:`~.verify_chain.resample_requests`)."""

    epoch: ScaleEpoch
    tails: ScaleTails
    rows: ScaleRows
    draft_sampled: torch.Tensor
    pos: torch.Tensor
    seed: torch.Tensor
    stats: dict[str, torch.Tensor]
    use_fp64: bool
    tail_request: torch.Tensor
    rejection: dict[str, torch.Tensor]
    resample: dict[str, torch.Tensor] | None

    @property
    def nb(self) -> int:
        """§30's blocks."""
        return -(-self.epoch.V // STATS_BLOCK)

    def cu_num_logits(self) -> np.ndarray:
        """Every step's ``cu_num_logits``, concatenated (:meth:`ScaleTails.cu_num_logits`)."""
        return self.tails.cu_num_logits(self.epoch)

    def idx_mapping(self) -> np.ndarray:
        """Every step's ``idx_mapping``, concatenated (:meth:`ScaleTails.idx_mapping`)."""
        return self.tails.idx_mapping(self.epoch)


FILLER_DRAFT = 1
"""Every draft token of the filler (not its rows' argmax 0: rejected at the first step, the argmax
0 written)."""


def filler_stats(N: int, nb: int, bonus: torch.Tensor, device: str) -> dict[str, torch.Tensor]:  # noqa: N803
    """§30's statistics of ``N`` rows of the filler (greedy zero rows; ``bonus`` per row): a
    draft row's block argmaxes (each block's first lane) and maxima 0, a bonus row's ``-1`` and
    NaN (never written), the sums NaN (greedy rows write none)."""
    out = {x: torch.full((N, nb), float("nan"), dtype=torch.float32, device=device) for x in STATS[1:]}
    lanes = torch.arange(nb, device=device, dtype=torch.int64) * STATS_BLOCK
    out["target_local_argmax"] = torch.where(bonus[:, None], -1, lanes[None, :].expand(N, nb))
    out["target_local_max"][~bonus] = 0.0
    return {x: out[x] for x in STATS}


def standard_steps(seeds: tuple[int, int], device: str, k: int, epoch: ScaleEpoch, max_pos: int | tuple[int, ...] = 5000,
                   arrange: Callable[[np.random.Generator, ScaleTails, ScaleEpoch], None] | None = None,
                   every_request_again: bool = False, resample: bool = True) -> StandardSteps:
    """``k`` production-scale standard-verification steps over ``epoch``'s tables
    (``seeds[1]`` the batch's): the filler's greedy requests of zero rows (every draft
    :data:`FILLER_DRAFT`, seeds and positions 0, :func:`filler_stats`), then each step's tail
    (:func:`scale_tails`, a random request past the limit: :func:`random_past_limit`) drawn as
    :func:`~.verify_batch.draw_steps` draws a step (a random id, half of them the target's
    favourite at the row; in three steps in ten a quarter of those past a request's first row
    ``-1``; a position below ``max_pos`` per request (a tuple: below one of them, drawn per
    step), then consecutive; any seed; float64
    noise one batch in four) with §30's statistics of its rows (the torch oracle's, each
    distinct row once: table row, temperature, bonus, drafter's row), and settled as
    :func:`~.runner_v2_verify.settle_step` settles a step (:func:`~.verify_chain.settle_chain`):
    a tail request whose §33 test or §34 winner lands within its window re-keyed (its seed
    XOR-ed with ``RE_KEY`` times the attempt) up to :data:`~.verify_chain.ATTEMPTS` times,
    then its drafts made placeholders (``-1``). The filler lands in no window (greedy,
    rejected at its first draft, no draw). ``arrange``: what makes the tails reach past the
    limit as the kernel reads them (in place; default :func:`random_past_limit`). After the
    first attempt only the requests in a window are computed again (each request's §33 and §34
    are its own); ``every_request_again``: all of them, each attempt (the same steps, slower:
    the reference the tests hold the first to). Without ``resample``, §33's windows alone
    settle the tails and §34 is not computed (``resample`` ``None``: a check of §33 alone,
    whose production domain is its own windows')."""
    rng = np.random.default_rng(seeds[1])
    tails = scale_tails(rng, k, epoch)
    (random_past_limit if arrange is None else arrange)(rng, tails, epoch)
    r = scale_rows(epoch, tails, device)
    gen = torch.Generator(device=device).manual_seed(seeds[1])
    V, F = epoch.V, epoch.F
    nb = -(-V // STATS_BLOCK)
    n, B = r.n, r.B
    N = int(n.sum())
    cid, local, at = tail_rows(n, F, device)
    T = at.numel()
    elp = r.elp[at].long()
    ds = tail_drafts(rng, gen, epoch, r, k, device, filler=FILLER_DRAFT)
    # the tails' requests: each its own state row in the tail arrays
    head = elp == 0
    treq = torch.cumsum(head.long(), 0) - 1
    Rt = int(head.sum())
    state_base = host_to(np.cumsum(B) - B, device)
    eidx = r.eidx[at]
    gstate = torch.zeros(Rt, dtype=torch.int64, device=device)
    gstate[treq] = state_base[cid] + eidx  # each tail request's state row in the batch
    first = torch.nonzero(head).flatten()
    cu_t = torch.cat([first, torch.full((1,), T, dtype=torch.int64, device=device)])
    tail_request = gstate  # request = state row in a scale step
    pos = torch.zeros(N, dtype=torch.int64, device=device)
    if isinstance(max_pos, int):
        p0 = torch.randint(0, max_pos, (Rt,), generator=gen, device=device)
    else:  # per step a ceiling of max_pos
        top = host_to(rng.choice(max_pos, size=k).astype(np.float64), device)[cid[first]]
        p0 = (torch.rand(Rt, generator=gen, device=device, dtype=torch.float64) * top).to(torch.int64)
    pos[at] = p0[treq] + elp
    seed = torch.zeros(int(B.sum()), dtype=torch.int64, device=device)
    seed[gstate] = torch.randint(-(2**63), 2**63 - 1, (Rt,), generator=gen, device=device, dtype=torch.int64)
    use_fp64 = bool(rng.random() < 0.25)
    # §30's statistics: the filler's, then the tails' rows, each distinct row once
    stats = tail_stats(epoch, r, filler_stats(N, nb, r.bonus, device), device)
    # settled: the tails' requests alone (their rows the epoch's live rows, read in place)
    target = RowTable(epoch.table, local)
    dl = None if epoch.cache is None else epoch.cache.view(-1, V)
    dfirst = eidx[first] * K
    Kt = torch.full((Rt,), K, dtype=torch.int64, device=device)
    temp_t = r.temperature[gstate]
    seed_t = seed[gstate]
    ds_t = ds[at]
    pos_t = pos[at]
    s_t = {x: stats[x][at] for x in STATS}

    def chain(req: torch.Tensor | None = None) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """§33 and §34 of the tails' requests ``req`` (every one: ``None``), per request."""
        tg, s, d, p, cu, df, tm, sd = target, s_t, ds_t, pos_t, cu_t, dfirst, temp_t, seed_t
        if req is not None:  # those requests' rows, gathered
            n_r = cu_t[req + 1] - cu_t[req]
            starts = torch.cumsum(n_r, 0) - n_r
            rows = torch.repeat_interleave(cu_t[req] - starts, n_r) + torch.arange(int(n_r.sum()), device=device)
            tg, s, d, p = RowTable(epoch.table, local[rows]), {x: s_t[x][rows] for x in STATS}, ds_t[rows], pos_t[rows]
            cu = torch.cat([starts, n_r.sum().reshape(1)])
            df, tm, sd = dfirst[req], temp_t[req], seed_t[req]
        q = torch.arange(cu.numel() - 1, device=device)
        res = tensor_ops_v2.rejection_steps(
            tg, s["target_local_argmax"], s["target_local_max"], s["target_local_sumexp"], d, dl,
            s["draft_local_max"], s["draft_local_sumexp"], cu, q, df, tm, sd, p, nb, K, "standard")
        if not resample:
            return res, {"window": torch.zeros_like(res["window"])}
        r34 = resample_requests(tg, dl, df, Kt[: q.numel()], cu, q, res["num_sampled"],
                                res["target_rejected_logsumexp"], res["draft_rejected_logsumexp"], None, d, tm, sd, p, V,
                                use_fp64)
        return res, r34

    def again(req: torch.Tensor) -> None:
        """``res`` and ``r34`` of requests ``req`` computed anew (each request's are its own)."""
        if every_request_again:
            every = chain()
            res.update(every[0])
            r34.update(every[1])
            return
        for full, part in zip((res, r34), chain(req), strict=True):
            for key, v in part.items():
                full[key][req] = v

    res, r34 = chain()  # then only the requests in a window, re-keyed, again
    for attempt in range(1, ATTEMPTS + 2):
        w = res["window"] | r34["window"]
        if not bool(w.any()):
            break
        req = torch.nonzero(w).flatten()
        if attempt > ATTEMPTS:  # placeholders: nothing of the request verified
            ds_t[(w[treq] & (elp > 0))] = -1
            again(req)
            break
        re_key(seed_t, req, attempt)
        again(req)
    ds[at] = ds_t
    seed[gstate] = seed_t
    return StandardSteps(epoch, tails, r, ds, pos, seed, stats, use_fp64, tail_request, res, r34 if resample else None)
