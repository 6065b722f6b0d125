"""``_compute_local_residual_mass_kernel`` on the device (docs/CONTRACT.md §32): block-verification
steps with the drafter's logits drawn on the GPU in batches of 256 (16 of a 151936- or
262144-id vocabulary), as its record's generator draws them
(:func:`~...targetkit.verify_batch.draw_steps` with the record's choices: up to 12 requests of
up to 16 drafts, greedy shares of 0 and 0.3, the drafter's cache near the target's, other, or
the target's own rows (residuals of 0), a narrower or wider draft vocabulary now and then,
``-1`` drafts, masked logits, the logits styles with log-probabilities, two or three 8192-wide
blocks one batch in five; the tour's large vocabularies and 24 to 32 requests of 8 to 16
drafts), §30's statistics and §31's joint log ratios left by the torch oracles of §30 and §31
(:mod:`~...targetkit.verify_chain`, as ``rejection_sample`` hands them over), checked against
the batched torch oracle (:func:`~eaglefuzz.oracles.tensor_ops_v2.local_residual_mass_rows`:
every block of every row of every case, the written partials within their bounds, the others
untouched) and compared on the GPU; and production-scale block-verification steps with the
drafter's logits whose target logits pass ``2**31`` elements (the int32 row offset
``logit_idx * target_logits_stride``: the class of #46560 and #47383; this kernel first ships in
vLLM 0.25.0 with its rows in int64), checked on the device against the same torch oracle and
confirmed by the NumPy and Numba oracles on the live request (:mod:`~...targetkit.scale_rows`); the
scale lane checks them in batches over an epoch's shared table and drafter's cache
(:mod:`~...targetkit.scale_steps`, :meth:`_Device._scale_batch`), the batched oracle on the rows
of the steps' tails that write alone. §32 decides nothing (no window): every drawn step is kept."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...targetkit.device_batch import DeviceBatch, laid_out
from ...targetkit.device_draws import scale_vocab
from ...targetkit.runner_v2_verify import (
    NOT_READ,
    STATS_BLOCK,
    Step,
    _rng_chooser,
    chain,
    cumulative,
    draw_step,
    keep_requests,
    padded_blocks,
    settle_step,
)
from ...targetkit.scale import past_limit
from ...targetkit.scale_device import ScaleRecordDevice, ScaleRun, first_row, requests_past_limit
from ...targetkit.scale_rows import (
    LIVE_ROWS,
    bonus_rows,
    join_steps,
    minimal_request_rows,
    scale_request_rows,
    splice,
)
from ...targetkit.scale_steps import (
    CHAIN_STATS,
    TAIL_TEMPERATURES,
    ScaleEpoch,
    ScaleRows,
    ScaleTails,
    filled,
    kept_epoch,
    scale_epoch,
    scale_rows,
    scale_tails,
    tail_drafts,
    tail_rows,
    tail_stats,
)
from ...targetkit.scale_steps import K as CACHE_K
from ...targetkit.step_batch import feature_sets, per_case_any, rows_of
from ...targetkit.verify_batch import (
    KINDS,
    StepRows,
    VerifyBatchDevice,
    draw_steps,
    row_flags,
    step_rows,
)
from ...targetkit.verify_chain import (
    ROWS_AT_ONCE,
    chain_rows,
    residual_mass,
    rows_at_once,
    vocab_of,
)
from .layout import ARRAYS, build
from .record import TARGET

FILLS = {"target_local_max": 0.0, "target_local_sumexp": NOT_READ, "draft_local_max": NOT_READ,
         "draft_local_sumexp": NOT_READ, "cumulative_log_p": NOT_READ}
"""The greedy requests' statistics before the live request (§30: a zero row's maxima are 0, the
rest never written), and their joint ratios (never written: greedy)."""


def scale_case(rng: np.random.Generator) -> Case:
    """A production block-verification step with the drafter's logits just past ``2**31``
    target logits (a current model's vocabulary): greedy requests of 16 drafts, zero rows, up to
    a few rows before the limit, then a random request of 16 drafts drawn and settled as the
    record draws them, 8 to 16 of its rows past the limit."""
    V = scale_vocab(rng)
    step = draw_step(_rng_chooser(rng), B=1, K=16, V=V, method="block", draft=True, min_drafts=16, greedy=(0.0,), same=False,
                     other_width=0.0)
    step, ch = settle_step(step)
    counts = scale_request_rows(rng, first_row(V))[:-1]
    live = join_steps(build(step, ch), sentinel(V))
    return splice(live, counts, FILLS).replace(note="a production-scale step (eaglefuzz fuzz --mode device)")


def sentinel(V: int) -> Case:  # noqa: N803
    """A request of two drafts (temperature 1, the drafter's cache zeros) whose second row holds
    a single target logit 1 at its last column, both drafts that token: its residual mass there
    is the target's excess over a flat draft (about ``2e-5`` a block, not 0), so a read of another
    row shows. Scale steps end with it; the minimal step is it alone after the greedy requests."""
    x = np.zeros((3, V), np.float32)
    x[1, V - 1] = 1.0
    dl = np.zeros((1, 16, V), np.float32)  # K = 16: the greedy requests before it hold 16 drafts
    step = Step(x, dl, np.array([0, V - 1, V - 1], np.int32), cumulative([3]), np.arange(3, dtype=np.int64),
                np.zeros(1, np.int64), np.ones(1, np.float32), np.zeros(1, np.int64), 16, "block")
    return build(step, chain(step))


def minimal_scale_cases(case: Case) -> list[Case]:
    """:func:`minimal_scale_cases_of` ``case``'s vocabulary."""
    return minimal_scale_cases_of(case.arrays["target_logits"].shape[1])


def minimal_scale_cases_of(V: int) -> list[Case]:  # noqa: N803
    """The smallest step with a residual row past ``2**31`` target logits of vocabulary ``V``,
    tables of zeros: greedy requests of 17 rows up to one row before the limit, then
    :func:`sentinel`, its second row the first past the limit."""
    counts = minimal_request_rows(first_row(V) - 1)[:-1]
    return [splice(sentinel(V), counts, FILLS).replace(note="the int32 row offset past 2**31, minimised")]


def live_requests(case: Case) -> list[int]:
    """The requests with a row past the limit, and the one before them."""
    elp = case.arrays["expanded_local_pos"]
    starts = np.flatnonzero(elp == 0)
    return requests_past_limit(starts, np.append(starts[1:], elp.size), case.arrays["target_logits"].shape[1])


STAT_INPUTS = ("target_local_max", "target_local_sumexp", "draft_local_max", "draft_local_sumexp")
"""§30's statistics this kernel reads."""


def _zero_rows(b: DeviceBatch, rows: torch.Tensor) -> np.ndarray:
    """Whether §32's NumPy oracle (the record's ``features_of``) leaves every partial of each
    of the batch's logits ``rows`` 0: each row alone as the middle row of a request of two
    drafts (its own logits, statistics, cached draft logits, temperature, the joint ratio of
    the row before it and its next draft), a host copy of those rows alone."""
    from ....oracles import vectorized_v2_verify as o

    m = rows.numel()
    if not m:
        return np.zeros(0, bool)
    a = b.cat
    r = _step_rows(b)
    nb, V = int(b.scalars[0]["vocab_num_blocks"]), int(b.scalars[0]["vocab_size"])
    assert r.caches is not None and r.draft_at is not None
    Vd = r.caches.shape[1]

    def three(x: torch.Tensor) -> np.ndarray:
        return np.repeat(x.cpu().numpy(), 3, axis=0)

    ds = np.zeros(3 * m, np.int32)
    ds[2::3] = a["draft_sampled"][rows + 1].cpu().numpy()
    dl = np.zeros((m, 2, Vd), np.float32)
    dl[:, 1] = r.caches[r.draft_at[rows]].cpu().numpy()
    arrays = {"target_logits": three(_target_rows(b, r, rows)),
              "cumulative_log_p": three(a["cumulative_log_p"][rows - 1]), "draft_logits": dl, "draft_sampled": ds,
              "expanded_idx_mapping": np.repeat(np.arange(m, dtype=np.int64), 3),
              "expanded_local_pos": np.tile(np.arange(3, dtype=np.int32), m),
              "temperature": r.row_temperature[rows].cpu().numpy()}
    arrays |= {x: three(a[x].view(-1, nb)[rows]) for x in STAT_INPUTS}
    out = np.full((3 * m, nb), np.nan, np.float32)
    with np.errstate(all="ignore"):
        o.compute_local_residual_mass(local_residual_mass=out, vocab_num_blocks=nb, vocab_size=V, **arrays)
    return np.all(out[1::3] == 0, axis=1)


MARGIN = 2.0**-30
"""How far apart (relative to the magnitudes in play, in log space) the torch oracle's float64
``log(p exp(lp_t))`` and ``lp_d`` of a lane must lie for the NumPy oracle's to lie the same way
(their ``exp`` and ``log`` differ by a few float64 steps: ``2**-50`` or so)."""
TINY_LOG = -138.0
"""A lane whose ``p exp(lp_t)`` lies below ``exp(-138)`` (``1e-60``) adds less than ``2**-150`` to
its block even 262144 times over: its float32 partial is 0 whatever it adds."""
SOME_LOG = -60.0
"""A lane whose ``p exp(lp_t)`` reaches ``exp(-60)`` and clears ``exp(lp_d)`` by the margin makes
its block's float32 partial nonzero."""


def _max_alone(maxes: torch.Tensor, sums: torch.Tensor) -> torch.Tensor:
    """Per row of §30's block statistics, whether its log-sum-exp is its maximum ``M`` exactly
    in any arithmetic: one block of maximum ``M`` sums to 1, the others to 0 (``log 1 = 0``)."""
    one = (sums == 1) & (maxes == maxes.amax(1, keepdim=True))
    return ((sums == 0) | one).all(1) & (one.sum(1) == 1)


def residual_signs(b: DeviceBatch, rows: torch.Tensor, r: StepRows | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per logits row of ``rows`` (written ones), whether §32's NumPy oracle (the record's
    ``features_of``) leaves every partial of it 0, and whether it leaves one nonzero, as far
    as the torch arithmetic decides it lane by lane (neither: within a few float64 steps, which
    :func:`_zero_rows` decides). A lane's term ``max(p exp(lp_t) - exp(lp_d), 0)`` is 0 where
    the target's logit is ``-inf``; where ``p <= 1`` and ``lp_t <= lp_d`` however ``log``
    rounds (the row's statistics the drafter's bit for bit and ``t <= q``, or both log-sum-exps
    their maxima exactly: :func:`_max_alone`); where ``log(p
    exp(lp_t))`` lies :data:`MARGIN` below ``lp_d``; or is negligible (:data:`TINY_LOG`). It is
    positive, and the float32 partial too, where it lies the margin above and reaches
    :data:`SOME_LOG`. ``r``: ``b``'s :func:`_step_rows` where at hand."""
    a, r = b.cat, _step_rows(b) if r is None else r
    nb, V = int(b.scalars[0]["vocab_num_blocks"]), int(b.scalars[0]["vocab_size"])
    assert r.draft_at is not None and r.caches is not None
    zero = torch.zeros(rows.numel(), dtype=torch.bool, device=rows.device)
    some = torch.zeros_like(zero)
    step = max(1, ROWS_AT_ONCE // max(1, V))
    f64 = torch.float64
    st = {x: a[x].view(-1, nb) for x in STAT_INPUTS}
    for lo in range(0, rows.numel(), step):
        j = rows[lo : lo + step]
        t = _target_rows(b, r, j)[:, :V].to(f64)
        q = r.caches[r.draft_at[j], :V].to(f64) / r.row_temperature[j].to(f64)[:, None]
        lt = tensor_ops_v2.block_lse(st["target_local_max"][j], st["target_local_sumexp"][j])[0][:, None]
        ld = tensor_ops_v2.block_lse(st["draft_local_max"][j], st["draft_local_sumexp"][j])[0][:, None]
        clp = a["cumulative_log_p"][j - 1].to(f64)[:, None]
        same = ((st["target_local_max"][j] == st["draft_local_max"][j]).all(1)
                & (st["target_local_sumexp"][j] == st["draft_local_sumexp"][j]).all(1))[:, None]
        exact = _max_alone(st["target_local_max"][j], st["target_local_sumexp"][j]) & _max_alone(
            st["draft_local_max"][j], st["draft_local_sumexp"][j])
        fin = torch.isfinite(lt) & torch.isfinite(ld) & torch.isfinite(t)
        la = clp + (t - lt)
        lc = q - ld
        m = MARGIN * (1 + t.abs() + lt.abs() + ld.abs() + torch.where(torch.isfinite(clp), clp.abs(), 0.0)
                      + torch.where(torch.isfinite(q), q.abs(), 0.0))
        below = (clp <= 0) & torch.isfinite(lt) & torch.isfinite(ld)  # p <= 1; lp_t <= lp_d where these hold
        lane0 = ((t == float("-inf")) | (below & ((same & (t <= q)) | (exact[:, None] & (t - lt <= q - ld))))
                 | (fin & (la + m <= TINY_LOG)) | (fin & torch.isfinite(la) & (la + 2 * m <= lc)))
        lane1 = fin & torch.isfinite(la) & (la >= SOME_LOG) & ((lc == float("-inf")) | (torch.isfinite(lc) & (la - 2 * m >= lc)))
        zero[lo : lo + step] = lane0.all(1)
        some[lo : lo + step] = lane1.any(1)
    return zero & ~some, some & ~zero


def _step_rows(b: DeviceBatch) -> StepRows:
    """:func:`~...targetkit.verify_batch.step_rows` of ``b``; of a scale batch, its rows over
    the epoch's shared table and cache (``target``: the table, each case's rows its first;
    ``draft_at``: the state's row of the cache, ``s K + min(i, K - 1)``)."""
    if "scale" not in b.extra:
        return step_rows(b)
    ep: ScaleEpoch = b.extra["scale"]
    assert ep.cache is not None
    rows, eidx, elp, bonus, t = row_flags(b)
    at = eidx * CACHE_K + elp.clamp(max=CACHE_K - 1)
    return StepRows(ep.table, rows.cid, eidx, elp, bonus, t == 0, t, at, ep.cache.view(-1, ep.V), ep.V)


def _target_rows(b: DeviceBatch, r: StepRows, rows: torch.Tensor) -> torch.Tensor:
    """The target logits of ``b``'s logits ``rows`` (over its concatenated cases): a scale
    batch's case's row ``i`` is the shared table's row ``i``."""
    if "scale" not in b.extra:
        return r.target[rows]
    n = np.asarray(b.lengths["expanded_local_pos"], dtype=np.int64)
    return r.target[rows - host_to(np.cumsum(n) - n, rows.device)[r.cid[rows]]]


class _Device(VerifyBatchDevice, ScaleRecordDevice):

    kinds = KINDS

    scale_batches = True

    def scale_minimal_of(self, V: int) -> list[Case]:  # noqa: N803
        return minimal_scale_cases_of(V)

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = 12,
                   share: float = 1.0, kind: str | None = None, scale: bool = False) -> DeviceBatch:
        """``k`` block-verification steps with the drafter's logits (fewer of a large
        vocabulary) as the record's body draws them, with §30's statistics and §31's joint log
        ratios (:func:`~...targetkit.verify_chain.chain_rows`); ``local_residual_mass`` ``[n,
        NB]`` each; with ``scale``, ``k`` production-scale steps over the scale epoch
        ``seeds[0]``'s shared tables (:meth:`_scale_batch`)."""
        if scale:
            return self._scale_batch(seeds, device, k)
        st = draw_steps(seeds, device, k, max_requests, kind, vocab=vocab_of(0.2), method="block", draft=True,
                        greedy=(0.0, 0.3), other_width=0.2, same_in_tour=False)
        ch = chain_rows(st, 31)
        k = len(st.K)
        n, R = st.n.tolist(), st.req.R.tolist()
        nb = -(-st.V // STATS_BLOCK)
        assert st.draft_logits is not None and ch.cumulative_log_p is not None
        arrays = {"cumulative_log_p": (ch.cumulative_log_p, [(m,) for m in n]),
                  "target_logits": (st.target_logits.reshape(-1), [(m, st.Vt) for m in n]),
                  "draft_logits": (st.draft_logits, [(x, int(kk), st.Vd) for x, kk in zip(R, st.K, strict=True)]),
                  "draft_sampled": (st.draft_sampled, [(m,) for m in n]),
                  "expanded_idx_mapping": (st.eidx, [(m,) for m in n]),
                  "expanded_local_pos": (st.elp, [(m,) for m in n]),
                  "temperature": (st.temperature, [(x,) for x in R])}
        arrays |= {x: (ch.stats[x].reshape(-1), [(m, nb) for m in n]) for x in STAT_INPUTS}
        cat, lengths, shapes = laid_out(arrays, ARRAYS)
        outputs = {"local_residual_mass": (torch.float32, [m * nb for m in n])}
        host = [{"shapes": {"local_residual_mass": (m, nb)}} for m in n]
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs,
                           [{"vocab_num_blocks": nb, "vocab_size": st.V} for _ in range(k)], host=host)

    def _scale_epoch(self, seed: int, device: str) -> ScaleEpoch:
        """The scale epoch ``seed``'s shared tables, always with the drafter's cache (§32 reads
        it), kept for the next batch of the epoch."""
        return kept_epoch(self, seed, device, partial(scale_epoch, cache_share=1.0))

    def _scale_batch(self, seeds: tuple[int, int], device: str, k: int) -> DeviceBatch:
        """``k`` production-scale block-verification steps with the drafter's logits over the
        epoch's table and cache (:mod:`~...targetkit.scale_steps`: the filler's greedy requests
        of zero rows, then each step's tail past the limit), each reading their first rows; each
        tail with a random request's row past its first and past the limit whose next draft is
        real (:func:`_residual_past_limit`). The tails' drafts are drawn as
        :func:`~...targetkit.verify_batch.draw_steps` draws them
        (:func:`~...targetkit.scale_steps.tail_drafts`), §30's statistics of their rows are the
        torch oracle's (:func:`~...targetkit.scale_steps.tail_stats`), §31's joint log ratios too
        (:func:`_tail_log_ratios`); the filler's the constants of :data:`FILLS`."""
        ep = self._scale_epoch(seeds[0], device)
        rng = np.random.default_rng(seeds[1])
        tails = scale_tails(rng, k, ep)
        past = _residual_past_limit(rng, tails, ep)
        r = scale_rows(ep, tails, device)
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        V = ep.V
        nb = -(-V // STATS_BLOCK)
        n, B = r.n, r.B
        real = host_to(np.cumsum(n) - n + past + 1, device)  # the row's draft
        ds = tail_drafts(rng, gen, ep, r, k, device, real)
        stats = tail_stats(ep, r, filled(int(r.n.sum()), ep.V, {x: FILLS[x] for x in CHAIN_STATS}, device), device)
        clp = _tail_log_ratios(ep, r, ds, stats)
        nl, Bl = n.tolist(), B.tolist()
        arrays = {"cumulative_log_p": (clp, [(m,) for m in nl]), "draft_sampled": (ds, [(m,) for m in nl]),
                  "expanded_idx_mapping": (r.eidx, [(m,) for m in nl]),
                  "expanded_local_pos": (r.elp, [(m,) for m in nl]), "temperature": (r.temperature, [(x,) for x in Bl])}
        arrays |= {x: (stats[x].reshape(-1), [(m, nb) for m in nl]) for x in STAT_INPUTS}
        cat, lengths, shapes = laid_out(arrays, ARRAYS)
        assert ep.cache is not None
        return DeviceBatch(cat, lengths, shapes, {"target_logits": ep.table, "draft_logits": ep.cache},
                           {"target_logits": nl, "draft_logits": Bl},
                           {"local_residual_mass": (torch.float32, [m * nb for m in nl])},
                           [{"vocab_num_blocks": nb, "vocab_size": V} for _ in nl], {"scale": ep},
                           host=[{"shapes": {"local_residual_mass": (m, nb)}} for m in nl])

    def _scale_oracle(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """A scale batch's writes: the torch oracle on the rows that write alone (the tails'
        random draft rows past their requests' first whose next draft is real; the filler's
        are greedy: nothing written), every case's at once, their target logits and cached
        draft logits read off the shared table and cache a block of rows at a time, each
        distinct row once (alike in its table row, drafter's row, temperature, the
        ``cumulative_log_p`` before it and its statistics: alike in every input it reads)."""
        ep: ScaleEpoch = b.extra["scale"]
        V = ep.V
        nb = -(-V // STATS_BLOCK)
        a, r = b.cat, _step_rows(b)
        n = np.asarray(b.lengths["expanded_local_pos"], dtype=np.int64)
        _, local, at = tail_rows(n, ep.F, r.elp.device.type)
        ds = a["draft_sampled"].long()
        nxt = ds[(at + 1).clamp(max=max(ds.numel() - 1, 0))]
        on = (r.elp[at] != 0) & ~r.bonus[at] & (nxt >= 0) & (r.row_temperature[at] != 0)
        rows, lrows = at[on], local[on]
        st = {x: a[x].view(-1, nb) for x in STAT_INPUTS}
        # a row's partials are a function of what it reads: each distinct one computed once
        key = torch.cat([torch.stack([lrows, r.draft_at[rows], r.row_temperature[rows].to(torch.float32).view(torch.int32).long(),
                                      a["cumulative_log_p"][rows - 1].to(torch.float32).view(torch.int32).long()], 1),
                         *(st[x][rows].to(torch.float32).view(torch.int32).long() for x in STAT_INPUTS)], 1)
        distinct, inverse = torch.unique(key, dim=0, return_inverse=True)
        first = torch.full((distinct.shape[0],), rows.numel(), dtype=torch.int64, device=rows.device)
        first = first.scatter_reduce(0, inverse, torch.arange(rows.numel(), device=rows.device), "amin")
        value = torch.zeros((first.numel(), nb), dtype=torch.float32, device=rows.device)
        bound = torch.zeros((first.numel(), nb), dtype=torch.float64, device=rows.device)
        step = rows_at_once(V, STATS_BLOCK)
        for lo in range(0, first.numel(), step):
            j, lj = rows[first[lo : lo + step]], lrows[first[lo : lo + step]]
            t_lse, t_e = tensor_ops_v2.block_lse(st["target_local_max"][j, :nb], st["target_local_sumexp"][j, :nb])
            d_lse, d_e = tensor_ops_v2.block_lse(st["draft_local_max"][j, :nb], st["draft_local_sumexp"][j, :nb])
            value[lo : lo + step], bound[lo : lo + step] = tensor_ops_v2.local_residual_mass_rows(
                ep.table[lj], r.caches[r.draft_at[j]], t_lse, t_e, d_lse, d_e,
                a["cumulative_log_p"][j - 1], r.row_temperature[j], V)
        index = (rows[:, None] * nb + torch.arange(nb, device=rows.device)).reshape(-1)
        return {"local_residual_mass": (index, value[inverse].reshape(-1), bound[inverse].reshape(-1))}

    def _writes(self, b: DeviceBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        a, r = b.cat, step_rows(b)
        nb, V = int(b.scalars[0]["vocab_num_blocks"]), int(b.scalars[0]["vocab_size"])
        Vt, Vd = b.shapes["target_logits"][0][1], b.shapes["draft_logits"][0][2]
        assert r.draft_at is not None
        return residual_mass(a["target_logits"].view(-1, Vt), a["draft_logits"].view(-1, Vd)[r.draft_at],
                             {x: a[x].view(-1, nb) for x in STAT_INPUTS}, a["cumulative_log_p"], r.row_temperature, r.elp,
                             r.bonus, a["draft_sampled"], V)

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """Every row of every case in one call of the torch oracle, over the concatenated
        cases: each written partial (flat over the cases' ``[n, NB]`` outputs), its value and
        bound. A scale batch's rows that write alone (:meth:`_scale_oracle`)."""
        if "scale" in b.extra:
            return self._scale_oracle(b)
        w, v, bound = self._writes(b)
        index = torch.nonzero(w.reshape(-1)).flatten()
        return {"local_residual_mass": (index, v.reshape(-1)[index], bound.reshape(-1)[index])}


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """The record's features of each case (``features_of``), from the batch's arrays and the
        torch oracle's ``writes`` (computed where not given) on the device; a residual of 0
        (every partial of a row 0, as the NumPy oracle computes it) decided lane by lane
        (:func:`residual_signs`) for the rows the torch oracle puts within a few bounds of 0, on
        the host (:func:`_zero_rows`) for those it leaves undecided."""
        a, r = b.cat, _step_rows(b)
        k = len(b)
        nb = int(b.scalars[0]["vocab_num_blocks"])
        Vt = r.target.shape[1]
        dev = r.elp.device
        n = np.asarray(b.lengths["expanded_local_pos"], dtype=np.int64)
        N = int(n.sum())
        ds = a["draft_sampled"].long()
        nxt = torch.cat([ds[1:], ds.new_zeros(1)]) if N else ds
        rd = ~r.bonus & (r.row_temperature != 0)
        if writes is None and "scale" in b.extra:
            writes = self.oracle_batch(b)
        if writes is None:
            w, v, bound = self._writes(b)
        else:  # the oracle's writes, flat over [N, NB]; unwritten: 0 (as residual_mass leaves them)
            index, value, bnd = writes["local_residual_mass"]
            w = torch.zeros(N * nb, dtype=torch.bool, device=dev).index_fill_(0, index, True).view(N, nb)
            v = torch.zeros(N * nb, dtype=value.dtype, device=dev).index_put_((index,), value).view(N, nb)
            bound = torch.zeros(N * nb, dtype=bnd.dtype, device=dev).index_put_((index,), bnd).view(N, nb)
        on_rows = w[:, 0] if nb else torch.zeros(N, dtype=torch.bool, device=dev)
        near = on_rows & (v.to(torch.float64) <= 4 * bound).all(1)
        cand = torch.nonzero(near).flatten()
        zero = torch.zeros(N, dtype=torch.bool, device=dev)
        sure, nonzero = residual_signs(b, cand, r)
        zero[cand] = sure
        left = cand[~sure & ~nonzero]
        if left.numel():
            zero[left] = host_to(_zero_rows(b, left), dev)
        clp = a["cumulative_log_p"]
        prev = torch.cat([clp.new_zeros(1), clp[:-1]]) if N else clp
        on = per_case_any(rows_of(b.lengths, "expanded_local_pos", None, dev.type), {
            "residual_rows": on_rows, "first_rows_skipped": rd & (r.elp == 0),
            "placeholder_next_skipped": rd & (r.elp > 0) & (nxt < 0),
            "greedy_skipped": ~r.bonus & (r.row_temperature == 0) & (r.elp > 0),
            "zero_residual": zero, "ratio_below_one": on_rows & (prev < 0)})
        last = np.full(k, -1, np.int64)
        rows = torch.nonzero(on_rows).flatten()
        cid = r.cid[rows].cpu().numpy()
        np.maximum.at(last, cid, rows.cpu().numpy() - (np.cumsum(n) - n)[cid])
        V = r.V
        full = {"several_blocks": np.full(k, V > STATS_BLOCK), "padded_blocks": np.full(k, padded_blocks(V)),
                "vocab_past_131072": np.full(k, V > 1 << 17), "many_rows": n > 192,
                "row_offset_past_2_31": np.asarray([x >= 0 and past_limit(int(x) * Vt) for x in last])}
        return feature_sets(on | full, k)

    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """Every row's partials: the rows that write within their bounds (the torch oracle on
        their rows as given), the others their sentinel."""
        a, sc, sm = case.arrays, case.scalars, run.small
        n = a["target_logits"].shape[0]
        V, nb = int(sc["vocab_size"]), int(sc["vocab_num_blocks"])
        P = min(nb, int(case.launch.get("PADDED_VOCAB_NUM_BLOCKS") or nb))
        eidx, elp, temp = a["expanded_idx_mapping"], a["expanded_local_pos"].astype(np.int64), a["temperature"]
        ds = a["draft_sampled"].astype(np.int64)
        nxt = np.append(ds[1:n], -1)[:n]
        on = np.flatnonzero((elp != 0) & ~bonus_rows(elp) & (nxt >= 0) & (temp[eidx] != 0))
        device = run.device
        w = torch.zeros((n, nb), dtype=torch.bool, device=device)
        e = torch.zeros((n, nb), dtype=torch.float32, device=device)
        b = torch.zeros((n, nb), dtype=torch.float64, device=device)
        if on.size:
            rows = host_to(on, device)
            t_lse, t_e = tensor_ops_v2.block_lse(sm["target_local_max"][rows, :P], sm["target_local_sumexp"][rows, :P])
            d_lse, d_e = tensor_ops_v2.block_lse(sm["draft_local_max"][rows, :P], sm["draft_local_sumexp"][rows, :P])
            dr = host_to(np.ascontiguousarray(a["draft_logits"][eidx[on], elp[on]]), device)
            tr = host_to(np.ascontiguousarray(a["target_logits"][on]), device)
            e[rows], b[rows] = tensor_ops_v2.local_residual_mass_rows(
                tr, dr, t_lse, t_e, d_lse, d_e, sm["cumulative_log_p"][rows - 1],
                sm["temperature"][sm["expanded_idx_mapping"][rows]], V)
            w[rows] = True
        return run.outs["local_residual_mass"].mismatches(0, n, w, e, b)

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        """:func:`live_requests`' rows."""
        keep = live_requests(case)
        starts = np.flatnonzero(case.arrays["expanded_local_pos"] == 0)
        ends = np.append(starts[1:], case.arrays["expanded_local_pos"].size)
        return keep_requests(case, keep), list(range(int(starts[keep[0]]), int(ends[keep[-1]])))


def _residual_past_limit(rng: np.random.Generator, tails: ScaleTails, ep: ScaleEpoch) -> np.ndarray:
    """Per tail, a row past the first row ``Z`` an int32 offset cannot reach that §32 writes
    (within its step): the last drafted row of the last random request of three rows or more
    whose last drafted row lies past ``Z``. A tail without such a request of three rows or more
    has its last request grown to 17 rows (in place; a request past ``Z`` before it, its last
    one's drafted rows then are too); one whose such requests are all greedy has the last of
    them made random (:data:`TAIL_TEMPERATURES`' random ones)."""
    Z = first_row(ep.V)
    out = []
    for counts, temps in zip(tails.counts, tails.temperature, strict=True):
        c = np.asarray(counts, dtype=np.int64)
        if not np.any((c >= 3) & (ep.F + np.cumsum(c) - 2 >= Z)):
            counts[-1] = LIVE_ROWS
            c = np.asarray(counts, dtype=np.int64)
        ends = ep.F + np.cumsum(c)
        past = np.flatnonzero((c >= 3) & (ends - 2 >= Z))
        if all(temps[i] == 0 for i in past):
            temps[past[-1]] = float(rng.choice([t for t in TAIL_TEMPERATURES if t]))
        out.append(int(ends[[i for i in past if temps[i] != 0][-1]]) - 2)
    return np.asarray(out, dtype=np.int64)


def _tail_log_ratios(ep: ScaleEpoch, r: ScaleRows, ds: torch.Tensor, stats: dict[str, torch.Tensor]) -> torch.Tensor:
    """§31's ``cumulative_log_p`` of ``k`` steps' rows (``[N]`` float32): the torch oracle on the
    tails' requests alone, written where §31 writes (NaN elsewhere, as
    :func:`~...targetkit.verify_chain.chain_rows` leaves it), the filler's :data:`FILLS`'. §31
    reads one element of a draft row's logits and of its drafter's row (the draft's), so the
    oracle is given those elements alone (``[T, 1]``, the drafts as ``0``, ``-1`` kept)."""
    V = ep.V
    nb = -(-V // STATS_BLOCK)
    dev = r.elp.device
    N = int(r.n.sum())
    _, local, at = tail_rows(r.n, ep.F, dev.type)
    elp = r.elp[at].long()
    head = elp == 0
    counts = torch.bincount(torch.cumsum(head.long(), 0) - 1)
    cu = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    state = r.eidx[at]
    temp = r.temperature[host_to(np.cumsum(r.B) - r.B, dev)[r.cid[at]] + state][head]
    d = ds.long()
    tk = d[(at + 1).clamp(max=N - 1)].clamp(min=0)  # row j's draft (a bonus row's: not read)
    assert ep.cache is not None
    draft = ep.cache.view(-1, V)[state * CACHE_K + elp.clamp(max=CACHE_K - 1), tk].view(-1, 1, 1)
    w, v, _ = tensor_ops_v2.cumulative_log_p(
        ep.table[local, tk].view(-1, 1), stats["target_local_max"][at], stats["target_local_sumexp"][at],
        torch.where(d[at] >= 0, 0, -1), draft, stats["draft_local_max"][at], stats["draft_local_sumexp"][at], cu,
        torch.arange(temp.numel(), device=dev), temp, nb, cu[:-1])
    clp = torch.full((N,), float(FILLS["cumulative_log_p"]), dtype=torch.float32, device=dev)
    clp[at] = torch.where(w, v, float("nan"))
    return clp


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
