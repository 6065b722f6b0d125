"""``rejection_sample``'s chain on the device: a batch of verification steps
(:func:`~.verify_batch.draw_steps`) run through the torch oracles of §30-§34
(:mod:`eaglefuzz.oracles.tensor_ops_v2`), every case's rows in one call per stage, so that a
chain kernel's batch holds the inputs the kernels before it leave (as
:func:`~.runner_v2_verify.chain` does with the NumPy oracles for a case at a time): §30's
statistics, §31's joint log ratios, §32's residual masses (:func:`chain_rows`), §33's
verification (:func:`rejection_batch`, :func:`rejection_of`) and §34's draws
(:func:`resample_of`), settled as :func:`~.runner_v2_verify.settle_step` settles a step
(:func:`settle`: a request whose §33 test or §34 winner lands within its window re-keyed;
:func:`settle_chain` hands on §33 and §34 of the settled batch, its last attempt's).

An intermediate holds what the stage's oracle expects where it writes (a float within its
bound: its float64 value rounded once, a value the contract allows) and what vLLM's
``new_empty`` would leave elsewhere (:data:`~.runner_v2_verify.NOT_READ`, ``-1`` for the
argmaxes), as the NumPy chain has it. The batch's cases are concatenated: a request's state
row is global (:func:`state_of`), its drafter's cache rows too (:func:`draft_first`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ...oracles import tensor_ops_v2
from ...oracles.host_copy import host_to
from .device_batch import DeviceBatch, cases_of, laid_out
from .fused import lane_noise_on, switched_on
from .runner_v2_verify import SAMPLE_BLOCK, STATS, STATS_BLOCK, VOCABS
from .step_batch import owners
from .verify_batch import Steps

ROWS_AT_ONCE = 1 << 24
"""Logits a stage's oracle reads at once (float64 intermediates of a block of rows: 128 MiB
each; :data:`~.scale_rows.ROW_BLOCK` gives the scale lane's oracles four times as many)."""


def rows_at_once(V: int, block: int) -> int:  # noqa: N803
    """Rows of a ``V``-wide vocabulary a stage's oracle of ``block``-wide blocks takes at once
    (:data:`ROWS_AT_ONCE` lanes: ``V`` a row in one block, whole blocks past it)."""
    return max(1, ROWS_AT_ONCE // (max(V, 1) if V <= block else -(-V // block) * block))


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
    base = host_to(np.cumsum(st.req.R * st.K) - st.req.R * st.K, dev)[st.req.cid]
    return base + st.idx_mapping * host_to(st.K, dev)[st.req.cid]


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
    :func:`~eaglefuzz.oracles.tensor_ops_v2.local_logits_stats_rows` a block of rows at a time,
    the rows that write them alone (a bonus row writes none, a greedy row no drafter's)."""
    N, V = int(st.n.sum()), st.V
    nb = -(-V // STATS_BLOCK)
    dev = st.eidx.device
    t = st.temperature[state_of(st)[request_of(st)]] if N else st.temperature[:0]
    greedy = t == 0
    out = {k: torch.full((N, nb), -1 if k == "target_local_argmax" else float("nan"),
                         dtype=torch.int64 if k == "target_local_argmax" else torch.float32, device=dev) for k in STATS}
    step = rows_at_once(V, STATS_BLOCK)
    for rows, drafts in ((torch.nonzero(greedy & ~st.bonus).flatten(), False),  # a greedy row reads no draft
                         (torch.nonzero(~greedy & ~st.bonus).flatten(), st.draft_logits is not None)):  # a bonus row: none
        for lo in range(0, rows.numel(), step):
            j = rows[lo : lo + step]
            res = tensor_ops_v2.local_logits_stats_rows(st.target_logits[j], greedy[j], st.bonus[j],
                                                        st.draft_rows(j) if drafts else None, t[j], V, STATS_BLOCK)
            for k, (w, v, _) in res.items():
                out[k][j] = torch.where(w, v.to(out[k].dtype), out[k][j])
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
    step = rows_at_once(V, STATS_BLOCK)
    for lo in range(0, rows.numel(), step):
        j = rows[lo : lo + step]
        t_lse, t_e = tensor_ops_v2.block_lse(s["target_local_max"][j, :nb], s["target_local_sumexp"][j, :nb])
        d_lse, d_e = tensor_ops_v2.block_lse(s["draft_local_max"][j, :nb], s["draft_local_sumexp"][j, :nb])
        expected[j], bound[j] = tensor_ops_v2.local_residual_mass_rows(
            target[j], draft[j], t_lse, t_e, d_lse, d_e, clp[j - 1], row_temperature[j], V)
    return written, expected, bound


def chain_rows(st: Steps, upto: int = 31, s: dict[str, torch.Tensor] | None = None) -> ChainRows:
    """The chain of ``st`` through §``upto`` (30: the statistics; 31 and 32: block
    verification's stages, where the batch's method is ``"block"``, §32 with the drafter's
    logits); ``s``: §30's statistics of ``st`` where they are at hand (they read neither its
    drafts nor its seeds), else computed."""
    out = ChainRows(stats(st) if s is None else s)
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
    """:class:`BatchRequests` of ``b`` from its ``cu_num_logits``, ``idx_mapping`` (or
    ``expanded_idx_mapping`` at each request's first row), ``temperature``, ``target_logits``
    and ``draft_logits`` (if any); ``rows``: an array of a row per logits row."""
    a = b.cat
    dev = a["cu_num_logits"].device
    B = np.asarray(b.lengths["cu_num_logits"], dtype=np.int64) - 1
    n = np.asarray(b.lengths[rows], dtype=np.int64)
    R = np.asarray(b.lengths["temperature"], dtype=np.int64)
    cu = a["cu_num_logits"].long()
    head = torch.zeros(cu.numel(), dtype=torch.bool, device=dev)
    head[host_to(np.cumsum(B + 1) - (B + 1), dev)] = True
    rcid = owners(B, dev.type)
    ends = cu[~head] + host_to(np.cumsum(n) - n, dev)[rcid]
    cu_g = torch.cat([ends.new_zeros(1), ends])
    N = int(n.sum())
    idx = a["idx_mapping"].long() if "idx_mapping" in a else a["expanded_idx_mapping"].long()[cu_g[:-1].clamp(max=max(N - 1, 0))]
    state = idx + host_to(np.cumsum(R) - R, dev)[rcid]
    first = None
    Vt = b.shapes["target_logits"][0][1] if "target_logits" in b.shapes else 0
    V = Vt
    if "draft_logits" in a:
        K = np.asarray([s[1] for s in b.shapes["draft_logits"]], dtype=np.int64)
        V = min(Vt, b.shapes["draft_logits"][0][2])
        base = host_to(np.cumsum(R * K) - R * K, dev)[rcid]
        first = base + idx * host_to(K, dev)[rcid]
    req = torch.repeat_interleave(torch.arange(int(B.sum()), device=dev), cu_g[1:] - cu_g[:-1], output_size=N)
    elp = torch.arange(N, device=dev) - cu_g[req]
    return BatchRequests(cu_g, state, first, owners(n, dev.type), req, elp, V)


# -- §33 of a batch: the verification, its windows settled --------------------------------------

RE_KEY = 0x9E3779B97F4A7C15
""":data:`~.runner_v2_verify.RE_KEY`: what a request's seed is XOR-ed with, times the attempt."""


def re_key(seed: torch.Tensor, rows: torch.Tensor, attempt: int) -> None:
    """``seed[rows] ^= RE_KEY * attempt`` (int64 two's complement, the product wrapped to 64
    bits), in place: :func:`~.runner_v2_verify.settle_step`'s new key."""
    key = (RE_KEY * attempt) % (1 << 64)
    key = key - (1 << 64) if key >= 1 << 63 else key
    seed[rows] = seed[rows] ^ key


def method_of(b: DeviceBatch) -> str:
    """The batch's ``rejection_sample_method`` (one per batch), from its first case."""
    s = b.scalars[0]
    if s.get("use_block_verification"):
        return "block"
    if s.get("fly_window_size", 0) > 0:
        return "fly"
    return "synthetic" if "synthetic_conditional_rates" in b.cat else "standard"


def rejection_of(b: DeviceBatch, method: str | None = None, q: BatchRequests | None = None) -> dict[str, torch.Tensor]:
    """§33 of every request of a ``_rejection_kernel`` batch ``b`` in one call of
    :func:`~eaglefuzz.oracles.tensor_ops_v2.rejection_steps` (``method``: another than the
    batch's, FLy's entropies aside: the record's plain run; ``q``: ``b``'s
    :func:`batch_requests` where they are at hand); per request (global) its outputs, and ``K``
    its case's ``num_speculative_steps``."""
    q = batch_requests(b) if q is None else q
    a = b.cat
    dev = q.cu.device
    nb = int(b.scalars[0]["vocab_num_blocks"])
    Vt = b.shapes["target_logits"][0][1]
    B = np.asarray(b.lengths["idx_mapping"], dtype=np.int64)
    rcid = owners(B, dev.type)
    Kc = np.asarray([int(s["num_speculative_steps"]) for s in b.scalars], dtype=np.int64)
    Kr = host_to(Kc, dev)[rcid]
    own = method_of(b)
    method = own if method is None else method
    rates = fly = None
    if method == "synthetic":
        base = host_to(np.cumsum(Kc) - Kc, dev)[rcid]
        at = base[:, None] + torch.minimum(torch.arange(int(Kc.max()), device=dev)[None, :], Kr[:, None] - 1)
        rates = a["synthetic_conditional_rates"][at]
    if method == "fly":
        fly = (host_to(np.asarray([s["fly_entropy_threshold"] for s in b.scalars], np.float32), dev)[rcid],
               host_to(np.asarray([s["fly_window_size"] for s in b.scalars], np.int64), dev)[rcid])
    dl = a.get("draft_logits")
    Vd = b.shapes["draft_logits"][0][2] if dl is not None else 1
    res = tensor_ops_v2.rejection_steps(
        a["target_logits"].view(-1, Vt), a["target_local_argmax"].view(-1, nb), a["target_local_max"].view(-1, nb),
        a["target_local_sumexp"].view(-1, nb), a["draft_sampled"], None if dl is None else dl.view(-1, Vd),
        a["draft_local_max"].view(-1, nb), a["draft_local_sumexp"].view(-1, nb), q.cu, q.state, q.draft_first,
        a["temperature"], a["seed"], a["pos"], nb, int(Kc.max()), method, rates,
        a.get("cumulative_log_p") if method == "block" else None,
        a["local_residual_mass"].view(-1, nb) if method == "block" and "local_residual_mass" in a else None,
        a.get("fly_entropy"), *(fly if fly is not None else (None, None)))  # fmt: skip
    res["K"] = Kr
    return res


ATTEMPTS = 8
"""Re-keyings of a request in a window before its drafts become placeholders (``settle_step``'s)."""
REJECTION_ARRAYS = ("target_logits", "target_local_argmax", "target_local_max", "target_local_sumexp", "draft_sampled",
                    "draft_logits", "draft_local_max", "draft_local_sumexp", "cu_num_logits", "idx_mapping", "temperature",
                    "seed", "pos", "synthetic_conditional_rates", "cumulative_log_p", "local_residual_mass", "fly_entropy")
"""``_rejection_kernel``'s arrays, in its signature's order (optional ones as the method has them)."""


def rejection_batch(st: Steps) -> DeviceBatch:
    """A ``_rejection_kernel`` batch of ``st``'s steps with the intermediates of §30-§32
    (:func:`chain_rows`; ``st``'s own tensors where it has them: its seeds, drafts); per case
    ``sampled`` ``[B, K + 1]``, ``num_sampled`` and the two log-sum-exps ``[B]``."""
    ch = chain_rows(st, 32)
    k = len(st.K)
    n, R, B, K = st.n.tolist(), st.req.R.tolist(), st.req.B.tolist(), st.K.tolist()
    nb = -(-st.V // STATS_BLOCK)
    arrays = {"target_logits": (st.target_logits.reshape(-1), [(m, st.Vt) for m in n]),
              "draft_sampled": (st.draft_sampled, [(m,) for m in n]),
              "cu_num_logits": (st.cu_num_logits, [(x + 1,) for x in B]),
              "idx_mapping": (st.idx_mapping, [(x,) for x in B]),
              "temperature": (st.temperature, [(r,) for r in R]), "seed": (st.seed, [(r,) for r in R]),
              "pos": (st.pos, [(m,) for m in n])}
    arrays |= {x: (ch.stats[x].reshape(-1), [(m, nb) for m in n]) for x in STATS}
    if st.draft_logits is not None:
        arrays["draft_logits"] = (st.draft_logits, [(r, kk, st.Vd) for r, kk in zip(R, K, strict=True)])
    if st.rates is not None:
        arrays["synthetic_conditional_rates"] = (st.rates, [(kk,) for kk in K])
    if ch.cumulative_log_p is not None:
        arrays["cumulative_log_p"] = (ch.cumulative_log_p, [(m,) for m in n])
    if ch.local_residual_mass is not None:
        arrays["local_residual_mass"] = (ch.local_residual_mass.reshape(-1), [(m, nb) for m in n])
    if st.fly_entropy is not None:
        arrays["fly_entropy"] = (st.fly_entropy, [(m,) for m in n])
    cat, lengths, shapes = laid_out(arrays, REJECTION_ARRAYS)
    outputs = {"sampled": (torch.int64, [b * (kk + 1) for b, kk in zip(B, K, strict=True)]),
               "num_sampled": (torch.int32, B), "target_rejected_logsumexp": (torch.float32, B),
               "draft_rejected_logsumexp": (torch.float32, B)}
    scalars = [{"vocab_num_blocks": nb, "num_speculative_steps": int(K[c]), "use_block_verification": st.method == "block",
                "fly_window_size": int(st.fly_window[c]) if st.method == "fly" else 0,
                "fly_entropy_threshold": float(st.fly_threshold[c])} for c in range(k)]  # fmt: skip
    host = [{"shapes": {"sampled": (b, kk + 1)}} for b, kk in zip(B, K, strict=True)]
    return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, scalars, host=host)


def settle(b: DeviceBatch, st: Steps, windows: Callable[[DeviceBatch], torch.Tensor] | None = None) -> None:
    """The requests of ``_rejection_kernel`` batch ``b`` whose decisions land within a window
    (``windows``: per request; by default §33's, :func:`rejection_of`) re-keyed in place (their
    seeds: :func:`re_key`), up to :data:`ATTEMPTS` times; then those left get placeholder drafts
    (``-1``: nothing of them verified), §31 and §32 run again: as
    :func:`~.runner_v2_verify.settle_step` settles a step."""
    if windows is None:
        _settle(b, st, lambda x, q, among: (rejection_of(x, q=q)["window"], None))
    else:
        _settle(b, st, lambda x, q, among: (windows(x), None))


def settle_chain(b: DeviceBatch, st: Steps, every_request_again: bool = False,
                 ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """:func:`settle` of ``_rejection_kernel`` batch ``b`` by :func:`chain_windows` (§33's test
    or §34's winner within its window), returning §33 and §34 of the batch as settled
    (:func:`chain_results`): the last attempt's, which saw the arrays as they are left, unless
    drafts became placeholders (then computed again). An attempt after the first computes §34
    of the re-keyed requests only (each request's draws are its own; a batch of a large
    vocabulary re-keyed eight times otherwise computes every request's noise nine times);
    ``every_request_again``: every request's, each attempt (the same results, slower)."""
    last: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]] | None = None  # the previous attempt's

    def decide(x: DeviceBatch, q: BatchRequests, among: torch.Tensor | None) -> tuple[torch.Tensor, Any]:
        nonlocal last
        last = chain_results(x, st.use_fp64, q, None if every_request_again else among, None if last is None else last[1])
        return _windows_of(last)

    got = _settle(b, st, decide)
    return got if got is not None else chain_results(b, st.use_fp64)


def settle_rejection(b: DeviceBatch, st: Steps) -> dict[str, torch.Tensor]:
    """:func:`settle` of ``_rejection_kernel`` batch ``b`` by §33's windows alone (§33's
    production domain; :func:`settle_chain` also settles §34's, for the kernels after it),
    returning §33 of the batch as settled."""
    got = _settle(b, st, lambda x, q, among: ((r := rejection_of(x, q=q))["window"], r))
    return got if got is not None else rejection_of(b)


def _windows_of(res: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]) -> tuple[torch.Tensor, Any]:
    return res[0]["window"] | res[1]["window"], res


Decide = Callable[[DeviceBatch, BatchRequests, torch.Tensor | None], tuple[torch.Tensor, Any]]
AT_ONCE = "EAGLEFUZZ_SETTLE_AT_ONCE"
"""The environment variable that chooses how :func:`_settle` tries a batch's re-keyings: all in
one call (:func:`_attempts_at_once`; by default on a CUDA device, where a call's cost is its
few hundred launches) or one call an attempt (by default elsewhere, where it is the elements:
the copies are larger than an attempt's requests). The seeds and results are the same."""


def settle_at_once(device: torch.device) -> bool:
    """Whether :func:`_settle` tries every re-keying in one call on ``device`` (:data:`AT_ONCE`)."""
    return switched_on(AT_ONCE, device.type == "cuda")


def _settle(b: DeviceBatch, st: Steps, decide: Decide, at_once: bool | None = None) -> Any:
    """:func:`settle` by ``decide(b, q, among)`` (per request whether it lands within a window,
    and what else it computed; ``among``: the requests whose seeds the last attempt re-keyed,
    ``None`` the first time: every request); returns the last call's other result where it saw
    the arrays as they are left (no window), else ``None`` (drafts made placeholders).
    ``at_once``: every re-keying of the requests in a window tried in one call
    (:func:`_attempts_at_once`), else one call an attempt (``None``: :func:`settle_at_once`);
    the same seeds and results."""
    q = batch_requests(b)  # the requests' rows and state rows: re-keying changes neither
    w, got = decide(b, q, None)
    if not bool(w.any()):
        return got
    if (settle_at_once(q.cu.device) if at_once is None else at_once) and int(torch.unique(q.state).numel()) == q.state.numel():
        w = _attempts_at_once(b, q, w, decide)
        if not bool(w.any()):
            w, got = decide(b, q, None)  # the arrays as they are left
            if bool(w.any()):
                raise RuntimeError("a request settled alone lands within a window in its batch: its seed is not its own")
            return got
    else:
        for attempt in range(1, ATTEMPTS + 1):
            keyed = q.state[w]
            re_key(b.cat["seed"], keyed, attempt)
            among = torch.isin(q.state, keyed)  # every request that reads a re-keyed seed
            w, got = decide(b, q, among)
            if not bool(w.any()):
                return got
    cu = q.cu
    r = torch.nonzero(w).flatten()
    nl = cu[r + 1] - cu[r]
    owner = torch.repeat_interleave(torch.arange(r.numel(), device=cu.device), nl - 1)
    first = torch.cumsum(nl - 1, 0) - (nl - 1)
    rows = cu[r][owner] + 1 + torch.arange(owner.numel(), device=cu.device) - first[owner]
    b.cat["draft_sampled"][rows] = -1
    nb = int(b.scalars[0]["vocab_num_blocks"])
    ch = chain_rows(st, 32, {x: b.cat[x].view(-1, nb) for x in STATS})  # §30 reads no draft: as it was
    if ch.cumulative_log_p is not None:
        b.cat["cumulative_log_p"].copy_(ch.cumulative_log_p)
    if ch.local_residual_mass is not None:
        b.cat["local_residual_mass"].copy_(ch.local_residual_mass.reshape(-1))
    return None


def _attempts_at_once(b: DeviceBatch, q: BatchRequests, w: torch.Tensor, decide: Decide) -> torch.Tensor:
    """Every re-keying :func:`_settle` would try one call at a time, in one call of ``decide``:
    the cases of the requests in a window (``w``) repeated :data:`ATTEMPTS` times
    (:func:`~.device_batch.cases_of`), copy ``a`` with those requests' seeds re-keyed ``a``
    times (:func:`re_key` with attempts 1 to ``a``). Each such request keeps the seed of its
    first copy out of any window (a request's decisions read its own seed and rows alone: its
    state row is its own), or its seed re-keyed :data:`ATTEMPTS` times; ``b``'s seeds are set so.
    Returns, per request, whether it is still within a window (its drafts become placeholders)."""
    dev = q.cu.device
    B = np.asarray(b.lengths["cu_num_logits"], dtype=np.int64) - 1
    first = np.cumsum(B) - B
    W = torch.nonzero(w).flatten()
    Wh = W.cpu().numpy()
    case = np.searchsorted(np.cumsum(B), Wh, side="right")  # each request's case
    cases = np.unique(case)
    rep_idx = np.tile(cases, ATTEMPTS)
    rep = cases_of(b, rep_idx)
    rB = B[rep_idx]
    rfirst = np.cumsum(rB) - rB
    at = (rfirst.reshape(ATTEMPTS, cases.size)[:, np.searchsorted(cases, case)] + (Wh - first[case])[None, :])  # [A, |W|]
    qr = batch_requests(rep)
    at_d = host_to(at.reshape(-1), dev)
    seed = b.cat["seed"]
    ks = torch.zeros(ATTEMPTS, dtype=seed.dtype, device=dev)  # at a - 1: what re-keying 1..a XORs a seed with
    for a in range(1, ATTEMPTS + 1):
        re_key(ks, torch.arange(a - 1, ATTEMPTS, device=dev), a)
    s0 = seed[q.state[W]]
    rep.cat["seed"][qr.state[at_d]] = (s0[None, :] ^ ks[:, None]).reshape(-1)
    wr, _ = decide(rep, qr, None)
    inside = wr[at_d].view(ATTEMPTS, -1)  # [A, |W|]: copy a's request within a window
    out = ~inside
    settled = out.any(0)
    use = torch.where(settled, out.int().argmax(0), ATTEMPTS - 1)  # the first copy out of any window, or the last
    seed[q.state[W]] = s0 ^ ks[use]
    left = torch.zeros_like(w)
    left[W[~settled]] = True
    return left


# -- §34: the draws of the rejected (or bonus) rows -----------------------------------------------


def resample_vocab(rng: np.random.Generator) -> int:
    """``_resample_kernel``'s record's vocabulary: one of :data:`~.runner_v2_verify.VOCABS`, one
    time in five two to four 1024-wide blocks (the last one partial)."""
    if rng.random() >= 0.2:
        return int(rng.choice(VOCABS))
    return SAMPLE_BLOCK * int(rng.integers(1, 4)) + int(rng.integers(1, 1001))


def resample_requests(target: torch.Tensor, draft: torch.Tensor | None, draft_first: torch.Tensor | None,
                      K: torch.Tensor, cu: torch.Tensor, state: torch.Tensor, rejected: torch.Tensor,
                      t_lse: torch.Tensor, d_lse: torch.Tensor, clp: torch.Tensor | None, ds: torch.Tensor,
                      temperature: torch.Tensor, seed: torch.Tensor, pos: torch.Tensor, V: int,
                      use_fp64: bool, among: torch.Tensor | None = None,
                      prev: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:  # noqa: N803
    """§34 of every request at once (rows concatenated over the cases: ``cu`` ``[B + 1]`` int64,
    per request its global ``state``, its first cache row ``draft_first`` in ``draft`` viewed
    ``[-1, Vd]`` and its case's ``K``; ``rejected`` §33's count; ``clp`` block verification's
    ratios), a block of rows at a time (:func:`~eaglefuzz.oracles.tensor_ops_v2.resample_rows`).

    Per request ``draws`` (a random request, or a greedy one's bonus) and per block
    (``[B, NB]``): ``argmax`` (the nominal winner), ``max`` (its value, float64) and ``bound``
    (its bound plus a step of the output's dtype where not 0: the value is compared rounded);
    ``window``: a block whose winner lies within its window (the extended tier's). With
    ``among`` (per request) and ``prev`` (an earlier call's results), the requests not among
    them keep ``prev``'s (their inputs unchanged since) and only those among them are computed."""
    dev = target.device
    B = state.numel()
    nb = -(-V // SAMPLE_BLOCK)
    start, nd = cu[:-1], cu[1:] - cu[:-1] - 1
    k = rejected.long()
    j = start + k
    T = temperature[state]
    bonus = k == nd
    draws = ~((T == 0) & ~bonus)
    out = {"draws": draws, "argmax": torch.full((B, nb), -1, dtype=torch.int64, device=dev),
           "max": torch.zeros((B, nb), dtype=torch.float64, device=dev),
           "bound": torch.zeros((B, nb), dtype=torch.float64, device=dev),
           "window": torch.zeros(B, dtype=torch.bool, device=dev)}
    if among is not None and prev is not None:
        for key in ("argmax", "max", "bound", "window"):
            out[key][~among] = prev[key][~among]
        r_all = torch.nonzero(draws & among).flatten()
    else:
        r_all = torch.nonzero(draws).flatten()
    N = ds.numel()
    step = max(1, ROWS_AT_ONCE // (nb * SAMPLE_BLOCK))
    ulp = tensor_ops_v2._ulp64 if use_fp64 else tensor_ops_v2._ulp32
    for lo in range(0, r_all.numel(), step):
        r = r_all[lo : lo + step]
        jr = j[r]
        y = torch.where(bonus[r], torch.full_like(jr, -1), ds[(jr + 1).clamp(max=N - 1)].long())
        dr = None if draft is None else draft[draft_first[r] + torch.minimum(k[r], K[r] - 1)]
        ltau = None
        if clp is not None:
            ltau = torch.where(k[r] > 0, clp[(jr - 1).clamp(min=0)], torch.zeros_like(clp[jr]))
        res = tensor_ops_v2.resample_rows(target[jr], dr, y, t_lse[r], d_lse[r], ltau, T[r], seed[state[r]], pos[jr], V,
                                          use_fp64, SAMPLE_BLOCK, lane_noise_on(dev))
        base = torch.arange(nb, device=dev, dtype=torch.int64) * SAMPLE_BLOCK
        lane = (res["nominal"] - base)[..., None]
        val = res["g"].gather(-1, lane)[..., 0]
        bound = res["e"].gather(-1, lane)[..., 0]
        out["argmax"][r] = res["nominal"]
        out["max"][r] = val
        out["bound"][r] = torch.where(bound > 0, bound + ulp(val), bound)
        out["window"][r] = ~res["settled"].all(-1)
    return out


def resample_of(b: DeviceBatch, rejected: torch.Tensor, t_lse: torch.Tensor, d_lse: torch.Tensor,
                use_fp64: bool, q: BatchRequests | None = None, among: torch.Tensor | None = None,
                prev: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """:func:`resample_requests` of a batch that holds a step's arrays (``_rejection_kernel``'s
    or ``_resample_kernel``'s), given §33's ``rejected`` counts and log-sum-exps (``q``: ``b``'s
    :func:`batch_requests` where they are at hand; ``among``, ``prev``: as there)."""
    q = batch_requests(b) if q is None else q
    a = b.cat
    Vt = b.shapes["target_logits"][0][1]
    dl = a.get("draft_logits")
    K = torch.ones_like(q.state)
    if dl is not None:
        Vd = b.shapes["draft_logits"][0][2]
        Kc = np.asarray([x[1] for x in b.shapes["draft_logits"]], dtype=np.int64)
        K = host_to(Kc, q.cu.device)[owners(np.asarray(b.lengths["cu_num_logits"]) - 1, q.cu.device.type)]
        dl = dl.view(-1, Vd)
    clp = a.get("cumulative_log_p") if b.scalars[0].get("use_block_verification") else None
    return resample_requests(a["target_logits"].view(-1, Vt), dl, q.draft_first, K, q.cu, q.state, rejected, t_lse,
                             d_lse, clp, a["draft_sampled"], a["temperature"], a["seed"], a["pos"], q.V, use_fp64,
                             among, prev)


def chain_results(b: DeviceBatch, use_fp64: bool, q: BatchRequests | None = None, among: torch.Tensor | None = None,
                  prev: dict[str, torch.Tensor] | None = None) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """§33 of ``_rejection_kernel`` batch ``b`` (:func:`rejection_of`, every request) and §34 of
    its counts (:func:`resample_of`; ``among``, ``prev``: of those requests only, the others'
    ``prev``'s)."""
    q = batch_requests(b) if q is None else q
    res = rejection_of(b, q=q)
    r34 = resample_of(b, res["num_sampled"], res["target_rejected_logsumexp"], res["draft_rejected_logsumexp"], use_fp64,
                      q, among, prev)
    return res, r34


def chain_windows(b: DeviceBatch, use_fp64: bool) -> torch.Tensor:
    """Per request of ``_rejection_kernel`` batch ``b``, whether its §33 test or its §34 draw
    lands within a window (what :func:`~.runner_v2_verify.settle_step` re-keys)."""
    return _windows_of(chain_results(b, use_fp64))[0]
