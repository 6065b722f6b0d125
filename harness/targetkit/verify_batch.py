"""Batches of Model Runner V2 verification steps drawn on the device: ``K`` steps at once, as
:func:`~.runner_v2_verify.draw_step` draws one (docs/CONTRACT.md §30.2-§33.2), for the device
modules of the verification kernels.

A batch shares what a step's record draws once and the kernels' buffers need alike: its kind
(an ordinary step, or one of the tour's: a 151936- or 262144-id vocabulary, or hundreds of
rows), the vocabularies (target's and drafter's), whether the drafter's logits are cached, and
the style of the logits. Each step draws its own requests, drafts, state rows, temperatures,
greedy share, masks and drafter modes: sizes on the host with NumPy, values on the device with
a seeded ``torch.Generator`` (the same seeds give the same batch). Across batches the modes come
as often as a record's generator draws them per case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ...oracles.host_copy import host_to
from ..core.case import Case
from .device import DeviceCase, DeviceTarget
from .device_batch import DeviceBatch
from .runner_v2_verify import (
    LARGE_VOCABS,
    MAX_K,
    MAX_MODEL_LEN,
    METHODS,
    STATS_BLOCK,
    VOCABS,
    WITH_LOGPROBS,
)
from .step_batch import Rows, StepBatchDevice, _rows, chosen, cumulative, owners, state_rows

SHAPES = 0.1
"""The share of batches of one of the tour's kinds (half large vocabularies, half many rows), as
a record's generator draws a shape (:func:`~...generation.strategies.random_shape`)."""
LARGE_BATCH = 16
"""Steps per batch of a large vocabulary at most (each up to 8 rows of 262144 logits)."""


@dataclass
class Steps:
    """``K`` verification steps, concatenated.

    ``req``: per case its requests over its state rows (:class:`~.step_batch.Rows`: ``B``,
    ``R``); ``rows``: per case its logits rows (``n``: every request's drafts and bonus);
    ``K``: per case ``num_speculative_tokens``; ``Vt``, ``Vd``: the batch's vocabularies
    (``Vd`` ``None``: one-hot drafts, no cache); per logits row (device) its request's state row
    within its case ``eidx`` and its step ``elp``, and whether it is a bonus row;
    ``target_logits`` ``[N, Vt]``; ``draft_logits`` every case's ``[R, K, Vd]`` cache, flat;
    ``temperature`` every case's ``[R]``, concatenated; ``kind`` and ``style`` the batch's; per
    request its state row ``idx_mapping`` (int64) and per case ``cu_num_logits`` (``[B + 1]``,
    int32, concatenated); per row ``draft_sampled`` (int32: row ``j``'s draft at ``j + 1``,
    ``-1`` a refused one) and ``pos`` (int64); per state row ``seed`` (int64, any); the batch's
    ``method`` (one of :data:`~.runner_v2_verify.METHODS`) with, per case, its synthetic
    ``rates`` (``[K]`` float32, concatenated), FLy's ``fly_window`` and ``fly_threshold`` (host)
    and per row ``fly_entropy``; whether the batch resamples in float64 (``use_fp64``)."""

    req: Rows
    rows: Rows
    K: np.ndarray
    Vt: int
    Vd: int | None
    eidx: torch.Tensor
    elp: torch.Tensor
    bonus: torch.Tensor
    target_logits: torch.Tensor
    draft_logits: torch.Tensor | None
    temperature: torch.Tensor
    kind: str
    style: str
    idx_mapping: torch.Tensor
    cu_num_logits: torch.Tensor
    draft_sampled: torch.Tensor
    pos: torch.Tensor
    seed: torch.Tensor
    method: str
    rates: torch.Tensor | None
    fly_window: np.ndarray
    fly_threshold: np.ndarray
    fly_entropy: torch.Tensor | None
    use_fp64: bool

    @property
    def V(self) -> int:  # noqa: N802
        """The vocabulary the kernels see: ``min(Vt, Vd)``."""
        return self.Vt if self.Vd is None else min(self.Vt, self.Vd)

    @property
    def n(self) -> np.ndarray:
        """Logits rows per case."""
        return self.rows.B

    def draft_rows(self, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Each logits row's cached draft logits ``draft_logits[s, i]`` (``[N, Vd]``; a bonus
        row's step may lie past ``K``: it reads its last step's, never used); ``rows``: those
        rows' alone."""
        assert self.draft_logits is not None and self.Vd is not None
        dev = self.eidx.device
        K = host_to(self.K, dev)[self.rows.cid]
        base = host_to(np.cumsum(self.req.R * self.K) - self.req.R * self.K, dev)[self.rows.cid]
        at = base + self.eidx * K + torch.minimum(self.elp.long(), K - 1)
        return self.draft_logits.view(-1, self.Vd)[at if rows is None else at[rows]]


def _kind(rng: np.random.Generator, tour: tuple[str, ...]) -> str:
    if rng.random() >= SHAPES:
        return "ordinary"
    if len(tour) == 2:
        return tour[0] if rng.random() < 0.5 else tour[1]
    return tour[int(rng.integers(0, len(tour)))]


def _ends(rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per element an integer of ``[lo, hi]``, an end (either) one time in 16 (``RngChooser``'s
    ``integer``)."""
    x = rng.integers(lo, hi, endpoint=True)
    edge = (rng.integers(0, 16, size=x.shape) == 0) & (hi > lo)
    return np.where(edge, np.where(rng.integers(0, 2, size=x.shape) == 1, hi, lo), x)


def _logits(gen: torch.Generator, n: int, V: int, style: str, device: str) -> torch.Tensor:  # noqa: N803
    """``n`` rows of ``V`` float32 logits of ``style`` (as :func:`~.runner_v2_verify._logit_rows`
    draws them: gauss, flat, peaked, ints, logprobs)."""
    if style == "ints":
        return torch.randint(-4, 5, (n, V), generator=gen, device=device).to(torch.float32)
    if style == "logprobs":
        x = torch.randn((n, V), generator=gen, device=device, dtype=torch.float64) * 3.0
        x = x - x.amax(1, keepdim=True) if V else x
        return (x - x.exp().sum(1, keepdim=True).log()).to(torch.float32)
    spread = {"gauss": 3.0, "flat": 0.3, "peaked": 2.0}[style]
    x = torch.randn((n, V), generator=gen, device=device) * spread
    if style == "peaked" and V:
        x[torch.arange(n, device=device), torch.randint(0, V, (n,), generator=gen, device=device)] += 12.0
    return x


def bf16(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to bfloat16 (round to nearest even), as float32: the drafter's head."""
    return x.to(torch.bfloat16).to(torch.float32)


KINDS = ("large_vocab", "many_rows")
"""The tour's kinds of batch (:data:`SHAPES`)."""
MANY_REQUESTS = ("large_vocab", "many_requests")
"""The kinds of a tour with more than 64 requests (:func:`~.runner_v2_verify.many_requests_step`)
in place of hundreds of rows."""
LONG_CONTEXT = ("large_vocab", "long_context", "many_requests")
"""The kinds of a tour with positions past 65535 too (:func:`~.runner_v2_verify.long_context_step`)."""


def stats_vocab(rng: np.random.Generator) -> int:
    """A vocabulary of :data:`~.runner_v2_verify.VOCABS`, one time in ten two or three 8192-wide
    blocks (``_compute_local_logits_stats_kernel``'s record)."""
    if rng.random() >= 0.1:
        return int(rng.choice(VOCABS))
    return STATS_BLOCK * int(rng.integers(1, 3)) + int(rng.integers(1, 2001))


def draw_steps(seeds: tuple[int, int], device: str, k: int, max_requests: int = 12, kind: str | None = None, *,
               vocab: Callable[[np.random.Generator], int] = stats_vocab, method: str | None = None,
               draft: bool | None = None, greedy: tuple[float, ...] = (0.0, 0.3, 1.0), same: bool = True,
               other_width: float = 0.5, max_pos: int = 5000, tour: tuple[str, ...] = KINDS,
               same_in_tour: bool = True, tour_choices: dict[str, dict] | None = None,
               styles: tuple[str, ...] = WITH_LOGPROBS) -> Steps:  # fmt: skip
    """``k`` verification steps (fewer for a batch of large vocabularies: :data:`LARGE_BATCH`)
    as ``_compute_local_logits_stats_kernel``'s record draws a case (``draw_step`` with ``B`` of
    ``(1, 4)`` or ``(1, 12)`` requests, ``K`` of ``(1, 4)`` or ``(1, 16)``, the logits styles
    with log-probabilities, a draft vocabulary other than the target's half the time), a batch
    in ten one of its tour's: one or two requests of up to 3 drafts over a 151936- or
    262144-id vocabulary (compact logits: a random row ``-inf`` but for its peaks), or 24 to 32
    requests of 8 to 16 drafts over 37 ids (``"many_rows"``), or with ``tour`` of
    :data:`MANY_REQUESTS` 65 to 128 requests of up to 2 drafts over 8 or 37 ids
    (``"many_requests"``, :func:`~.runner_v2_verify.many_requests_step`). ``max_requests``:
    ``B``'s ceiling (a test's small scale); ``kind``: ``"ordinary"`` or one of ``tour``
    (``None``: drawn, half each; of three, a third each: ``"long_context"``, 4 to 8 requests of
    2 drafts and more over 37 or 1000 ids at positions past 65535,
    :func:`~.runner_v2_verify.long_context_step`); ``same_in_tour``: whether a ``"many_rows"``
    batch's drafter may be the target (as ``same`` an ordinary one's); ``tour_choices``: per
    kind of the tour, its own ``method`` and ``greedy`` (a record's tour shape's); ``styles``:
    the logits styles drawn from. The other
    keywords are ``draw_step``'s (a record's choices): an ordinary batch's ``vocab``, the
    ``method`` (``None``: drawn per batch), whether the drafter's logits are cached (``None``:
    six batches in ten), the greedy shares a case draws from, whether the drafter may be the
    target (``same``), the chance of another draft vocabulary, the positions' ceiling."""
    rng = np.random.default_rng(seeds[1])
    gen = torch.Generator(device=device).manual_seed(seeds[1])
    drawn = _kind(rng, tour)
    kind = drawn if kind is None else kind
    over = (tour_choices or {}).get(kind, {})
    method, greedy = over.get("method", method), over.get("greedy", greedy)
    past = 0
    cap = max(1, min(12, max_requests))
    if kind == "large_vocab":
        k = min(k, LARGE_BATCH)
        B = rng.integers(1, 3, size=k)
        K = np.full(k, 3)
        Vt = int(rng.choice(LARGE_VOCABS))
        least = np.zeros(k, np.int64)
    elif kind == "many_rows":
        B = rng.integers(24, 33, size=k)
        K = np.full(k, 16)
        Vt = 37
        least = np.full(k, 8)
    elif kind == "long_context":
        B = rng.integers(4, 9, size=k)
        kw = rng.integers(0, 2, size=k) == 1
        K = _ends(rng, np.ones(k, np.int64), np.where(kw, MAX_K, 4))
        Vt = int(rng.choice([37, 1000]))
        least = np.minimum(2, K)
        max_pos, past = MAX_MODEL_LEN - (1 << 16) - MAX_K - 1, 1 << 16
    elif kind == "many_requests":
        B = rng.integers(65, 129, size=k)
        K = np.full(k, 2)
        Vt = int(rng.choice([8, 37]))
        least = np.zeros(k, np.int64)
    else:
        wide = rng.integers(0, 2, size=k) == 1
        B = _ends(rng, np.ones(k, np.int64), np.where(wide, min(12, cap), min(4, cap)))
        kw = rng.integers(0, 2, size=k) == 1
        K = _ends(rng, np.ones(k, np.int64), np.where(kw, MAX_K, 4))
        Vt = vocab(rng)
        least = np.zeros(k, np.int64)
    drafted = rng.random() < 0.6
    drafted = drafted if draft is None else draft
    Vd = None
    if drafted:
        Vd = Vt
        if Vt > 8 and rng.random() < (other_width if kind == "ordinary" else 0.2):  # a draft vocabulary narrower or wider
            Vd = Vt + int(rng.choice([-1, 1])) * int(rng.integers(1, min(64, Vt // 2), endpoint=True))
    style = str(rng.choice(styles))
    spare = np.where(rng.integers(0, 2, size=k) == 1, rng.integers(0, 7, size=k), 0)
    R = B if kind == "large_vocab" else B + spare
    req = _rows(B.astype(np.int64), R.astype(np.int64), device)
    s = state_rows(req, gen) if kind != "large_vocab" else req.local
    nd = chosen(gen, req.per_row(least), req.per_row(K), ends=1 / 32)
    nl = nd + 1
    nl_host = nl.cpu().numpy()
    n = np.zeros(k, np.int64)
    np.add.at(n, req.cid.cpu().numpy(), nl_host)
    rows = _rows(n, n, device)
    r_of = torch.repeat_interleave(torch.arange(req.n, device=device), nl, output_size=int(n.sum()))
    first = torch.cumsum(nl, 0) - nl
    elp = (torch.arange(int(n.sum()), device=device) - first[r_of]).to(torch.int32)
    eidx = s[r_of]
    bonus = elp.long() == nd[r_of]
    # temperatures: per state row 0.3 / 0.7 / 1.0 / 1.3 half the time, else 1; the case's greedy
    # share (0, 0.3 or 1) of its requests at 0
    state_owner = owners(R, device)
    u = torch.rand((2, int(R.sum())), generator=gen, device=device)
    pick = host_to(np.asarray([0.3, 0.7, 1.0, 1.3], dtype=np.float32), device)[torch.randint(0, 4, (int(R.sum()),), generator=gen, device=device)]
    temperature = torch.where(u[0] < 0.5, pick, torch.ones_like(pick)).to(torch.float32)
    share = host_to(np.asarray(greedy)[rng.integers(0, len(greedy), size=k)], device)
    greedy_req = torch.rand(req.n, generator=gen, device=device) < share[req.cid]
    temperature[(req.state_base + s)[greedy_req]] = 0.0
    del state_owner, u
    N = int(n.sum())
    Vk = Vt if Vd is None else min(Vt, Vd)
    greedy_row = temperature[(req.state_base + s)[r_of]] == 0
    if kind == "large_vocab":
        tl = _sparse(gen, N, Vt, Vk, greedy_row, device)
    else:
        tl = _logits(gen, N, Vt, style, device)
        masked_case = host_to(rng.random(k) < 0.4, device)[rows.cid]
        rate = host_to(np.asarray([0.3, 0.9])[rng.integers(0, 2, size=k)], device)[rows.cid]
        masked = torch.rand((N, Vt), generator=gen, device=device) < rate[:, None]
        keep = torch.randint(0, max(Vk, 1), (N,), generator=gen, device=device)
        masked[torch.arange(N, device=device), keep] = False
        tl = torch.where(masked & (masked_case & ~greedy_row)[:, None], torch.full_like(tl, float("-inf")), tl)
    dl = None
    if Vd is not None:
        dl = _drafts(gen, tl, req, s, nd, r_of, elp, bonus, K, R, Vt, Vd, temperature, kind, device,
                     same and (kind == "ordinary" or (kind == "many_rows" and same_in_tour)))
    # the drafts: a random id, half of them the target's favourite at the row before (of the
    # same request); in three cases in ten, a quarter of those past a request's first row -1
    ds = (torch.rand(N, generator=gen, device=device) * Vk).long().clamp(max=max(Vk - 1, 0))
    fav = torch.where(torch.isfinite(tl[:, :Vk]), tl[:, :Vk], float("-inf")).argmax(1) if N and Vk else ds
    take = (torch.rand(N, generator=gen, device=device) < 0.5) & (elp > 0)
    prev = torch.cat([fav.new_zeros(1), fav[:-1]]) if N else fav
    ds = torch.where(take, prev, ds)
    refused = host_to(rng.random(k) < 0.3, device)[rows.cid]
    ds = torch.where(refused & (torch.rand(N, generator=gen, device=device) < 0.25) & (elp > 0), -1, ds)
    if kind == "large_vocab":  # compact rows: the favourite or any finite nonzero logit of the row before
        live = torch.isfinite(tl[:, :Vk]) & (tl[:, :Vk] != 0)
        best = torch.where(live, tl[:, :Vk], float("-inf")).argmax(1)
        anyone = (torch.rand((N, Vk), generator=gen, device=device) * live).argmax(1)
        pick = torch.where(torch.rand(N, generator=gen, device=device) < 0.5, best, anyone)
        prev = torch.cat([pick.new_zeros(1), pick[:-1]])
        ds = torch.where((ds >= 0) & (torch.arange(N, device=device) > 0), prev, ds)
    p0 = torch.randint(0, max_pos, (req.n,), generator=gen, device=device)
    pos = p0[r_of] + elp.long() + past
    seed = torch.randint(-(2**63), 2**63 - 1, (int(R.sum()),), generator=gen, device=device, dtype=torch.int64)
    chosen_method = str(rng.choice(METHODS)) if method is None else method
    rates = entropy = None
    window, threshold = np.zeros(k, np.int64), np.full(k, 0.3)
    if chosen_method == "synthetic":
        rates = host_to(np.asarray([0.0, 0.35, 0.8, 1.0], dtype=np.float32), device)[
            torch.randint(0, 4, (int(K.sum()),), generator=gen, device=device)].to(torch.float32)
    if chosen_method == "fly":
        window = _ends(rng, np.ones(k, np.int64), np.maximum(1, K))
        threshold = np.asarray([0.3, 0.0, 1.0])[rng.integers(0, 3, size=k)]
        entropy = host_to(np.asarray([0.0, 0.1, 0.3, 1.0, 2.5], dtype=np.float32), device)[
            torch.randint(0, 5, (N,), generator=gen, device=device)].to(torch.float32)
    fp64 = bool(rng.random() < 0.25)
    return Steps(req, rows, K.astype(np.int64), Vt, Vd, eidx, elp, bonus, tl, dl, temperature, kind, style, s,
                 cumulative(req, nl), ds.to(torch.int32), pos, seed, chosen_method, rates, window, threshold,
                 entropy, fp64)


def _sparse(gen: torch.Generator, N: int, Vt: int, Vk: int, greedy: torch.Tensor, device: str,  # noqa: N803
            peaks: int = 24) -> torch.Tensor:  # fmt: skip
    """Compact rows (:func:`~.runner_v2_verify.sparse_step`): a random row ``-inf``, a greedy
    row 0, but for ``peaks`` tokens and 4 of the last 4096 (logits of spread 2 around 3)."""
    tl = torch.where(greedy[:, None], 0.0, float("-inf")) * torch.ones((N, Vt), device=device)
    tl = tl.to(torch.float32)
    at = torch.cat([torch.randint(0, Vk, (N, peaks), generator=gen, device=device),
                    torch.randint(max(0, Vk - 4096), Vk, (N, 4), generator=gen, device=device)], 1)
    value = torch.randn(at.shape, generator=gen, device=device) * 2 + 3
    tl.scatter_(1, at, value)
    return tl


def _drafts(gen: torch.Generator, tl: torch.Tensor, req: Rows, s: torch.Tensor, nd: torch.Tensor, r_of: torch.Tensor,
            elp: torch.Tensor, bonus: torch.Tensor, K: np.ndarray, R: np.ndarray, Vt: int, Vd: int,  # noqa: N803
            temperature: torch.Tensor, kind: str, device: str, same: bool = True) -> torch.Tensor:  # fmt: skip
    """The drafter's cache of every case (``[R, K, Vd]`` each, flat; NaN where never read; a
    large vocabulary's 0): request ``r``'s first ``d_r`` steps hold the target's rows of its
    drafts (past the target's vocabulary, more logits) near them (noise of 0.5), the same, or
    others, times its temperature (1 for greedy), rounded to bfloat16."""
    fill = 0.0 if kind == "large_vocab" else float("nan")
    sizes = R * K * Vd
    dl = torch.full((int(sizes.sum()),), fill, dtype=torch.float32, device=device)
    draft_row = ~bonus
    if not bool(draft_row.any()):
        return dl
    j = torch.nonzero(draft_row).flatten()
    base = tl[j, : min(Vt, Vd)]
    if Vd > Vt:
        base = torch.cat([base, _logits(gen, j.numel(), Vd - Vt, "gauss", device)], 1)
    r = r_of[j]
    T = temperature[req.state_base[r] + s[r]]
    T = torch.where(T == 0, torch.ones_like(T), T)[:, None]
    mode = torch.rand(req.n, generator=gen, device=device)[r][:, None]  # per request: near .5, other .35, same .15
    fin = torch.where(torch.isfinite(base), base, torch.full_like(base, -30.0))
    near = (fin + torch.randn(fin.shape, generator=gen, device=device) * 0.5) * T
    other = _logits(gen, j.numel(), Vd, "gauss", device)
    if kind == "large_vocab":  # compact: zeros but at the target's finite non-zero tokens, near them
        nz = torch.isfinite(base) & (base != 0)
        rows = torch.where(nz, fin + torch.randn(fin.shape, generator=gen, device=device), torch.zeros_like(fin))
    else:
        rows = torch.where(mode < 0.5, near, torch.where(mode < 0.85, other, fin * T)) if same else (
            torch.where(mode < 0.5, near, other))
    Kt = host_to(K, device)[req.cid[r]]
    start = host_to(np.cumsum(R * K * Vd) - R * K * Vd, device)[req.cid[r]]
    at = start + (s[r] * Kt + elp[j].long()) * Vd
    dl.view(-1)[at[:, None] + torch.arange(Vd, device=device)] = bf16(rows)
    return dl


@dataclass
class StepRows:
    """A batch's logits rows as the verification oracles read them (device tensors, every
    case's rows concatenated): ``target`` ``[N, Vt]``; per row its case ``cid``, its state row
    within its case ``eidx``, its step ``elp``, whether it is its request's bonus row, whether
    its request is greedy, its temperature, and its cached draft logits' row ``draft_at`` in
    the batch's caches viewed ``[-1, Vd]`` (``caches``; ``None``: one-hot drafts); the batch's
    vocabulary ``V`` (the narrower table's width)."""

    target: torch.Tensor
    cid: torch.Tensor
    eidx: torch.Tensor
    elp: torch.Tensor
    bonus: torch.Tensor
    greedy: torch.Tensor
    row_temperature: torch.Tensor
    draft_at: torch.Tensor | None
    caches: torch.Tensor | None
    V: int

    def draft(self) -> torch.Tensor | None:
        """Each row's cached draft logits (``[N, Vd]``; ``None``: one-hot drafts)."""
        return None if self.caches is None or self.draft_at is None else self.caches[self.draft_at]


def row_flags(b: DeviceBatch) -> tuple[Rows, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The logits rows of batch ``b`` (its ``expanded_idx_mapping``, ``expanded_local_pos`` and
    ``temperature``): their :class:`~.step_batch.Rows` over the cases' state rows, and per row
    its state row within its case, its step, whether it is its request's bonus row, its
    temperature."""
    a = b.cat
    n = np.asarray(b.lengths["expanded_local_pos"], dtype=np.int64)
    R = np.asarray(b.lengths["temperature"], dtype=np.int64)
    dev = a["expanded_local_pos"].device
    rows = _rows(n, R, dev.type)
    eidx = a["expanded_idx_mapping"].long()
    elp = a["expanded_local_pos"].long()
    N = int(n.sum())
    last = torch.zeros(N, dtype=torch.bool, device=dev)
    if N:
        last[host_to(np.cumsum(n) - 1, dev)] = True
    nxt = torch.cat([elp[1:], elp.new_zeros(1)]) if N else elp
    return rows, eidx, elp, last | (nxt == 0), a["temperature"][rows.state_base + eidx]


def step_rows(b: DeviceBatch) -> StepRows:
    """The logits rows of batch ``b`` (``target_logits``, ``draft_logits`` if any,
    ``expanded_idx_mapping``, ``expanded_local_pos``, ``temperature``: one table width a
    batch), read off its arrays alone: a case alone (a batch of one) reads the same."""
    a = b.cat
    Vt = b.shapes["target_logits"][0][1]
    dev = a["expanded_local_pos"].device
    rows, eidx, elp, bonus, t = row_flags(b)
    at = caches = None
    V = Vt
    if "draft_logits" in a:
        Vd = b.shapes["draft_logits"][0][2]
        V = min(Vt, Vd)
        K = host_to([shape[1] for shape in b.shapes["draft_logits"]], dev)[rows.cid]
        sizes = np.asarray(b.lengths["draft_logits"], dtype=np.int64) // Vd
        base = host_to(np.cumsum(sizes) - sizes, dev)[rows.cid]
        at = base + eidx * K + torch.minimum(elp, K - 1)
        caches = a["draft_logits"].view(-1, Vd)
    return StepRows(a["target_logits"].view(-1, Vt), rows.cid, eidx, elp, bonus, t == 0, t, at, caches, V)


class VerifyBatchDevice(StepBatchDevice):
    """A verification kernel drawn and checked on the device in batches of steps (its scale
    lane's parts, where it has them, from :class:`~.scale_device.ScaleRecordDevice` after it in
    the bases), checked by a torch oracle of :mod:`eaglefuzz.oracles.tensor_ops_v2`."""

    checked_on = "device"
    oracle_name = "torch oracle (oracles/tensor_ops_v2.py)"

    def to_case(self, dc: DeviceCase) -> Case:
        return DeviceTarget.to_case(self, dc)
