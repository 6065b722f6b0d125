"""``rejection_sample``'s chain on the device: a batch of verification steps
(:func:`~.verify_batch.draw_steps`) run through the torch oracles of §30-§33
(:mod:`eaglefuzz.oracles.tensor_ops_v2`), every case's rows in one call per stage, so that a
chain kernel's batch holds the inputs the kernels before it leave (as
:func:`~.runner_v2_verify.chain` does with the NumPy oracles for a case at a time): §30's
statistics, §31's joint log ratios, §32's residual masses.

An intermediate holds what the stage's oracle expects where it writes (a float within its
bound: its float64 value rounded once, a value the contract allows) and what vLLM's
``new_empty`` would leave elsewhere (:data:`~.runner_v2_verify.NOT_READ`, ``-1`` for the
argmaxes), as the NumPy chain has it. The batch's cases are concatenated: a request's state
row is global (:func:`state_of`), its drafter's cache rows too (:func:`draft_first`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ...oracles import tensor_ops_v2
from .device_batch import DeviceBatch
from .runner_v2_verify import STATS, STATS_BLOCK, VOCABS
from .step_batch import owners
from .verify_batch import Steps

ROWS_AT_ONCE = 1 << 24
"""Logits a stage's oracle reads at once (float64 intermediates of a block of rows)."""


def request_of(st: Steps) -> torch.Tensor:
    """Per logits row, its request (over the batch's requests, concatenated)."""
    return torch.cumsum((st.elp == 0).long(), 0) - 1


def state_of(st: Steps) -> torch.Tensor:
    """Per request, its state row in the batch's concatenated state arrays (``temperature``,
    ``seed``)."""
    return st.req.state_base + st.idx_mapping


def draft_first(st: Steps) -> torch.Tensor:
    """Per request, the row of its first step in the batch's drafter's caches viewed ``[-1,
    Vd]`` (each case's ``[R, K, Vd]``, concatenated)."""
    dev = st.eidx.device
    base = torch.as_tensor(np.cumsum(st.req.R * st.K) - st.req.R * st.K, device=dev)[st.req.cid]
    return base + st.idx_mapping * torch.as_tensor(st.K, device=dev)[st.req.cid]


def cu_global(st: Steps) -> torch.Tensor:
    """The batch's requests' ``[B + 1]`` cumulative row counts, over every case (int64)."""
    nl = torch.bincount(request_of(st), minlength=st.req.n)
    return torch.cat([nl.new_zeros(1), torch.cumsum(nl, 0)])


@dataclass
class ChainRows:
    """The intermediates of a batch's chain (device tensors, every case's rows concatenated):
    §30's statistics (``[N, NB]`` each), and for block verification §31's
    ``cumulative_log_p`` (``[N]``) with its writes (``clp_written``, ``clp_bound``) and, with
    the drafter's logits, §32's ``local_residual_mass`` (``[N, NB]``) with its writes."""

    stats: dict[str, torch.Tensor]
    cumulative_log_p: torch.Tensor | None = None
    clp_written: torch.Tensor | None = None
    clp_bound: torch.Tensor | None = None
    local_residual_mass: torch.Tensor | None = None
    rm_written: torch.Tensor | None = None
    rm_bound: torch.Tensor | None = None


def stats(st: Steps) -> dict[str, torch.Tensor]:
    """§30's statistics of every row (``[N, NB]``; unwritten: NaN, ``-1`` for the argmax), from
    :func:`~eaglefuzz.oracles.tensor_ops_v2.local_logits_stats_rows` a block of rows at a time."""
    N, V = int(st.n.sum()), st.V
    nb = -(-V // STATS_BLOCK)
    dev = st.eidx.device
    t = st.temperature[state_of(st)[request_of(st)]] if N else st.temperature[:0]
    greedy = t == 0
    draft = st.draft_rows() if st.draft_logits is not None else None
    out = {k: torch.full((N, nb), -1 if k == "target_local_argmax" else float("nan"),
                         dtype=torch.int64 if k == "target_local_argmax" else torch.float32, device=dev) for k in STATS}
    step = max(1, ROWS_AT_ONCE // max(1, nb * STATS_BLOCK))
    for lo in range(0, N, step):
        hi = min(N, lo + step)
        res = tensor_ops_v2.local_logits_stats_rows(st.target_logits[lo:hi], greedy[lo:hi], st.bonus[lo:hi],
                                                    None if draft is None else draft[lo:hi], t[lo:hi], V, STATS_BLOCK)
        for k, (w, v, _) in res.items():
            out[k][lo:hi] = torch.where(w, v.to(out[k].dtype), out[k][lo:hi])
    return out


def cumulative_log_p(st: Steps, s: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """§31 of every request of the batch at once (:func:`~eaglefuzz.oracles.tensor_ops_v2.cumulative_log_p`
    over the concatenated cases): ``(written, expected, bound)`` per row."""
    nb = -(-st.V // STATS_BLOCK)
    dl = None if st.draft_logits is None else st.draft_logits.view(-1, 1, st.Vd)
    return tensor_ops_v2.cumulative_log_p(
        st.target_logits, s["target_local_max"], s["target_local_sumexp"], st.draft_sampled, dl, s["draft_local_max"],
        s["draft_local_sumexp"], cu_global(st), state_of(st), st.temperature, nb,
        None if dl is None else draft_first(st))


def residual_mass(target: torch.Tensor, draft: torch.Tensor, s: dict[str, torch.Tensor], clp: torch.Tensor,
                  row_temperature: torch.Tensor, elp: torch.Tensor, bonus: torch.Tensor, ds: torch.Tensor,
                  V: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # noqa: N803
    """§32 of every row at once (rows concatenated over the batch's cases): a random
    request's draft row past its first whose next draft is real writes each block's
    residual mass (:func:`~eaglefuzz.oracles.tensor_ops_v2.local_residual_mass_rows`, a block
    of rows at a time); ``draft`` ``[N, Vd]`` each row's cached draft logits, ``clp`` §31's
    ``cumulative_log_p`` (read at the row before). Returns ``(written, expected, bound)``
    ``[N, NB]``."""
    N = target.shape[0]
    nb = -(-V // STATS_BLOCK)
    dev = target.device
    nxt = torch.cat([ds[1:N].long(), ds.new_full((1,), -1).long()])[:N] if N else ds.long()
    on = (elp != 0) & ~bonus & (nxt >= 0) & (row_temperature != 0)
    rows = torch.nonzero(on).flatten()
    written = torch.zeros((N, nb), dtype=torch.bool, device=dev)
    expected = torch.zeros((N, nb), dtype=torch.float32, device=dev)
    bound = torch.zeros((N, nb), dtype=torch.float64, device=dev)
    written[rows] = True
    step = max(1, ROWS_AT_ONCE // max(1, nb * STATS_BLOCK))
    for lo in range(0, rows.numel(), step):
        j = rows[lo : lo + step]
        t_lse, t_e = tensor_ops_v2.block_lse(s["target_local_max"][j, :nb], s["target_local_sumexp"][j, :nb])
        d_lse, d_e = tensor_ops_v2.block_lse(s["draft_local_max"][j, :nb], s["draft_local_sumexp"][j, :nb])
        expected[j], bound[j] = tensor_ops_v2.local_residual_mass_rows(
            target[j], draft[j], t_lse, t_e, d_lse, d_e, clp[j - 1], row_temperature[j], V)
    return written, expected, bound


def chain_rows(st: Steps, upto: int = 31) -> ChainRows:
    """The chain of ``st`` through §``upto`` (30: the statistics; 31 and 32: block
    verification's stages, where the batch's method is ``"block"``, §32 with the drafter's
    logits)."""
    out = ChainRows(stats(st))
    if upto < 31 or st.method != "block":
        return out
    w, v, b = cumulative_log_p(st, out.stats)
    out.cumulative_log_p = torch.where(w, v, torch.full_like(v, float("nan")))
    out.clp_written, out.clp_bound = w, b
    if upto < 32 or st.draft_logits is None:
        return out
    t = st.temperature[state_of(st)[request_of(st)]]
    w, v, b = residual_mass(st.target_logits, st.draft_rows(), out.stats, out.cumulative_log_p, t, st.elp.long(),
                            st.bonus, st.draft_sampled, st.V)
    out.local_residual_mass = torch.where(w, v, torch.full_like(v, float("nan")))
    out.rm_written, out.rm_bound = w, b
    return out


def vocab_of(blocks: float) -> Callable[[np.random.Generator], int]:
    """A record's ordinary vocabulary: one of :data:`~.runner_v2_verify.VOCABS`, ``blocks`` of
    the time two or three 8192-wide blocks (:func:`~.runner_v2_verify.blocks_vocab`)."""

    def draw(rng: np.random.Generator) -> int:
        if rng.random() >= blocks:
            return int(rng.choice(VOCABS))
        return STATS_BLOCK * int(rng.integers(1, 3)) + int(rng.integers(1, 2001))

    return draw


# -- a chain kernel's batch, read off its arrays -------------------------------------------------


@dataclass
class BatchRequests:
    """The requests of a chain kernel's batch, over its concatenated cases (device tensors):
    ``cu`` (``[B + 1]``, int64, global rows), per request its ``state`` (global state row) and
    first drafter's cache row ``draft_first`` (``None`` without the cache); per logits row its
    case ``cid``, request ``req`` and step ``elp``; the batch's vocabulary ``V``."""

    cu: torch.Tensor
    state: torch.Tensor
    draft_first: torch.Tensor | None
    cid: torch.Tensor
    req: torch.Tensor
    elp: torch.Tensor
    V: int

    @property
    def d(self) -> torch.Tensor:
        """Per request, its drafts."""
        return self.cu[1:] - self.cu[:-1] - 1


def batch_requests(b: DeviceBatch, rows: str = "draft_sampled") -> BatchRequests:
    """:class:`BatchRequests` of ``b`` from its ``cu_num_logits``, ``idx_mapping``,
    ``temperature``, ``target_logits`` and ``draft_logits`` (if any); ``rows``: an array of a
    row per logits row."""
    a = b.cat
    dev = a["cu_num_logits"].device
    B = np.asarray(b.lengths["idx_mapping"], dtype=np.int64)
    n = np.asarray(b.lengths[rows], dtype=np.int64)
    R = np.asarray(b.lengths["temperature"], dtype=np.int64)
    cu = a["cu_num_logits"].long()
    head = torch.zeros(cu.numel(), dtype=torch.bool, device=dev)
    head[torch.as_tensor(np.cumsum(B + 1) - (B + 1), device=dev)] = True
    rcid = owners(B, dev.type)
    ends = cu[~head] + torch.as_tensor(np.cumsum(n) - n, device=dev)[rcid]
    cu_g = torch.cat([ends.new_zeros(1), ends])
    state = a["idx_mapping"].long() + torch.as_tensor(np.cumsum(R) - R, device=dev)[rcid]
    first = None
    Vt = b.shapes["target_logits"][0][1]
    V = Vt
    if "draft_logits" in a:
        K = np.asarray([s[1] for s in b.shapes["draft_logits"]], dtype=np.int64)
        V = min(Vt, b.shapes["draft_logits"][0][2])
        base = torch.as_tensor(np.cumsum(R * K) - R * K, device=dev)[rcid]
        first = base + a["idx_mapping"].long() * torch.as_tensor(K, device=dev)[rcid]
    N = int(n.sum())
    req = torch.repeat_interleave(torch.arange(int(B.sum()), device=dev), cu_g[1:] - cu_g[:-1], output_size=N)
    elp = torch.arange(N, device=dev) - cu_g[req]
    return BatchRequests(cu_g, state, first, owners(n, dev.type), req, elp, V)


@dataclass
class BatchRows:
    """The logits rows of a chain kernel's batch that has each row's own mapping
    (``expanded_idx_mapping``, ``expanded_local_pos``: §32's), over its concatenated cases
    (device tensors): per row its case ``cid``, step ``elp``, whether it is its request's bonus
    row, its temperature, and its cached draft logits' row in the batch's caches viewed ``[-1,
    Vd]`` (``draft_at``; ``None`` without them); the batch's vocabulary ``V``."""

    cid: torch.Tensor
    elp: torch.Tensor
    bonus: torch.Tensor
    temperature: torch.Tensor
    draft_at: torch.Tensor | None
    V: int


def batch_rows(b: DeviceBatch) -> BatchRows:
    """:class:`BatchRows` of ``b`` from its ``expanded_idx_mapping``, ``expanded_local_pos``,
    ``temperature``, ``target_logits`` and ``draft_logits`` (if any)."""
    a = b.cat
    dev = a["expanded_local_pos"].device
    n = np.asarray(b.lengths["expanded_local_pos"], dtype=np.int64)
    R = np.asarray(b.lengths["temperature"], dtype=np.int64)
    cid = owners(n, dev.type)
    N = int(n.sum())
    elp = a["expanded_local_pos"].long()
    eidx = a["expanded_idx_mapping"].long()
    last = torch.zeros(N, dtype=torch.bool, device=dev)
    if N:
        last[torch.as_tensor(np.cumsum(n) - 1, device=dev)] = True
    nxt = torch.cat([elp[1:], elp.new_zeros(1)]) if N else elp
    bonus = last | (nxt == 0)
    t = a["temperature"][torch.as_tensor(np.cumsum(R) - R, device=dev)[cid] + eidx]
    at = None
    Vt = b.shapes["target_logits"][0][1]
    V = Vt
    if "draft_logits" in a:
        K = np.asarray([x[1] for x in b.shapes["draft_logits"]], dtype=np.int64)
        V = min(Vt, b.shapes["draft_logits"][0][2])
        base = torch.as_tensor(np.cumsum(R * K) - R * K, device=dev)[cid]
        Kr = torch.as_tensor(K, device=dev)[cid]
        at = base + eidx * Kr + torch.minimum(elp, Kr - 1)
    return BatchRows(cid, elp, bonus, t, at, V)
