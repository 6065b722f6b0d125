"""``_compute_cumulative_log_p_kernel`` on the device (docs/CONTRACT.md §31): block-verification
steps drawn on the GPU in batches of 256 (16 of a 151936- or 262144-id vocabulary), as its
record's generator draws them (:func:`~...targetkit.verify_batch.draw_steps` with the record's
choices: up to 12 requests of up to 16 drafts, greedy and random requests, the drafter's cache
(a narrower or wider vocabulary now and then, the target's own rows now and then: ratios of 1)
or one-hot drafts, ``-1`` drafts, masked logits, the logits styles with log-probabilities, two
or three 8192-wide blocks one batch in five; the tour's large vocabularies and 65 to 128
requests), §30's statistics left by the torch oracle of §30 (:mod:`~...targetkit.verify_chain`,
as ``rejection_sample`` hands them over), checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_ops_v2.cumulative_log_p`: every row of every case, the
written values within their bounds, the others untouched) and compared on the GPU; and
production-scale block-verification steps whose target logits pass ``2**31`` elements (the
request's rows counted from ``cu_num_logits`` as loaded, int32: the class of #46560 and #47383,
fixed in vLLM 0.25.0 where this kernel first ships with its rows in int64), checked on the
device against the same torch oracle and confirmed by the NumPy and Numba oracles on the live
request (:mod:`~...targetkit.scale_rows`); the scale lane checks them in batches over an
epoch's shared table and drafter's cache (:mod:`~...targetkit.scale_steps`, :meth:`_Device._scale_batch`),
the batched oracle on the steps' tails alone. §31 decides nothing (no window): every drawn step
is kept."""

from __future__ import annotations

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
    _rng_chooser,
    block_lse,
    chain,
    draw_step,
    keep_requests,
    padded_blocks,
    settle_step,
)
from ...targetkit.scale import FEW_READS_BATCH, past_limit
from ...targetkit.scale_device import (
    ScaleRecordDevice,
    ScaleRun,
    first_row,
    live_requests,
    sentinel_step,
)
from ...targetkit.scale_rows import join_steps, minimal_request_rows, scale_request_rows, splice
from ...targetkit.scale_steps import (
    CHAIN_STATS,
    ScaleEpoch,
    filled,
    kept_epoch,
    random_past_limit,
    scale_epoch,
    scale_rows,
    scale_tails,
    tail_drafts,
    tail_rows,
    tail_stats,
)
from ...targetkit.scale_steps import K as CACHE_K
from ...targetkit.step_batch import feature_sets, per_case_any, rows_of
from ...targetkit.verify_batch import MANY_REQUESTS, VerifyBatchDevice, draw_steps
from ...targetkit.verify_chain import batch_requests, chain_rows, vocab_of
from .layout import ARRAYS, build
from .record import TARGET

FILLS = {"target_local_max": 0.0, "target_local_sumexp": NOT_READ, "draft_local_max": NOT_READ,
         "draft_local_sumexp": NOT_READ}
"""The greedy requests' statistics before the live request (§30: a zero row's maxima are 0, its
sums never written)."""


def scale_case(rng: np.random.Generator) -> Case:
    """A production block-verification step just past ``2**31`` target logits (a current
    model's vocabulary): greedy requests of 16 drafts, zero rows, up to a few rows before the
    limit, then a random request of 16 drafts drawn and settled as the record draws them (its
    logits, drafts, the drafter's cache or one-hot drafts, §30's statistics of its rows), 8 to
    16 of its rows past the limit."""
    V = scale_vocab(rng)
    step = draw_step(_rng_chooser(rng), B=1, K=16, V=V, method="block", min_drafts=16, greedy=(0.0,), other_width=0.0,
                     same=False)
    step, ch = settle_step(step)
    live = join_steps(build(step, ch), sentinel(V, step.draft_logits is not None))
    counts = scale_request_rows(rng, first_row(V))[:-1]
    return splice(live, counts, FILLS).replace(note="a production-scale step (eaglefuzz fuzz --mode device)")


def sentinel(V: int, with_draft: bool) -> Case:  # noqa: N803
    """:func:`~...targetkit.scale_device.sentinel_step` by block verification (the drafter's
    cache, if any, a 2 at the drafted token): its joint log ratio is negative (-11.5 one-hot,
    about -1 with the cache), so a read of another row shows. Scale steps end with it; the
    minimal step is it alone after the greedy requests."""
    step = sentinel_step(V, with_draft, 2.0, "block")
    return build(step, chain(step))


def minimal_scale_cases(case: Case) -> list[Case]:
    """:func:`minimal_scale_cases_of` ``case``'s vocabulary."""
    return minimal_scale_cases_of(case.arrays["target_logits"].shape[1])


def minimal_scale_cases_of(V: int) -> list[Case]:  # noqa: N803
    """The smallest step with a random request's draft row past ``2**31`` target logits of
    vocabulary ``V``, a table of zeros: greedy requests of 17 rows up to the limit, then
    :func:`sentinel` (one-hot drafts) whose row is the first past it."""
    counts = minimal_request_rows(first_row(V))[:-1]
    return [splice(sentinel(V, False), counts, FILLS).replace(note="the int32 row offset past 2**31, minimised")]


STAT_INPUTS = ("target_local_max", "target_local_sumexp", "draft_local_max", "draft_local_sumexp")
"""§30's statistics this kernel reads."""


class _Device(VerifyBatchDevice, ScaleRecordDevice):

    kinds = MANY_REQUESTS

    scale_batches = True
    scale_batch_size = FEW_READS_BATCH

    def scale_minimal_of(self, V: int) -> list[Case]:  # noqa: N803
        return minimal_scale_cases_of(V)

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = 12,
                   share: float = 1.0, kind: str | None = None, scale: bool = False) -> DeviceBatch:
        """``k`` block-verification steps (fewer of a large vocabulary) as the record's body
        draws them, with §30's statistics (:func:`~...targetkit.verify_chain.chain_rows`);
        ``cumulative_log_p`` ``[n]`` each; with ``scale``, ``k`` production-scale steps over the
        scale epoch ``seeds[0]``'s shared tables (:meth:`_scale_batch`)."""
        if scale:
            return self._scale_batch(seeds, device, k)
        st = draw_steps(seeds, device, k, max_requests, kind, vocab=vocab_of(0.2), method="block", other_width=0.2,
                        tour=MANY_REQUESTS)
        ch = chain_rows(st, 30)
        k = len(st.K)
        n, R, B = st.n.tolist(), st.req.R.tolist(), st.req.B.tolist()
        nb = -(-st.V // STATS_BLOCK)
        arrays = {"target_logits": (st.target_logits.reshape(-1), [(m, st.Vt) for m in n]),
                  "draft_sampled": (st.draft_sampled, [(m,) for m in n]),
                  "cu_num_logits": (st.cu_num_logits, [(x + 1,) for x in B]),
                  "idx_mapping": (st.idx_mapping, [(x,) for x in B]),
                  "temperature": (st.temperature, [(r,) for r in R])}
        arrays |= {x: (ch.stats[x].reshape(-1), [(m, nb) for m in n]) for x in STAT_INPUTS}
        if st.draft_logits is not None:
            arrays["draft_logits"] = (st.draft_logits, [(r, int(kk), st.Vd) for r, kk in zip(R, st.K, strict=True)])
        cat, lengths, shapes = laid_out(arrays, ARRAYS)
        outputs = {"cumulative_log_p": (torch.float32, n)}
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, [{"vocab_num_blocks": nb} for _ in range(k)])

    def _scale_epoch(self, seed: int, device: str) -> ScaleEpoch:
        """The scale epoch ``seed``'s shared tables (kept for the next batch of the epoch)."""
        return kept_epoch(self, seed, device, scale_epoch)

    def _scale_batch(self, seeds: tuple[int, int], device: str, k: int) -> DeviceBatch:
        """``k`` production-scale block-verification steps over the epoch's table and cache
        (:mod:`~...targetkit.scale_steps`: the filler's greedy requests of zero rows, then each
        step's tail past the limit), each reading their first rows. The tails' drafts are drawn
        as :func:`~...targetkit.verify_batch.draw_steps` draws them (a random id, half of them
        the target's favourite at the row; in three steps in ten a quarter of those past a
        request's first row ``-1``); §30's statistics of the tails' rows are the torch oracle's
        (each distinct row once: its table row, temperature, bonus, drafter's row), the
        filler's the constants of :data:`FILLS` (a zero row's maxima, sums never read)."""
        ep = self._scale_epoch(seeds[0], device)
        rng = np.random.default_rng(seeds[1])
        tails = scale_tails(rng, k, ep)
        random_past_limit(rng, tails, ep)
        r = scale_rows(ep, tails, device)
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        nb = -(-ep.V // STATS_BLOCK)
        n, B = r.n, r.B
        ds = tail_drafts(rng, gen, ep, r, k, device)
        stats = tail_stats(ep, r, filled(int(r.n.sum()), ep.V, {x: FILLS[x] for x in CHAIN_STATS}, device), device)
        cu, idx = tails.cu_num_logits(ep), tails.idx_mapping(ep)
        nl, Bl = n.tolist(), B.tolist()
        arrays = {"draft_sampled": (ds, [(m,) for m in nl]),
                  "cu_num_logits": (host_to(cu, device), [(x + 1,) for x in Bl]),
                  "idx_mapping": (host_to(idx, device), [(x,) for x in Bl]),
                  "temperature": (r.temperature, [(x,) for x in Bl])}
        arrays |= {x: (stats[x].reshape(-1), [(m, nb) for m in nl]) for x in STAT_INPUTS}
        cat, lengths, shapes = laid_out(arrays, ARRAYS)
        shared = {"target_logits": ep.table} | ({} if ep.cache is None else {"draft_logits": ep.cache})
        return DeviceBatch(cat, lengths, shapes, shared, {"target_logits": nl, "draft_logits": Bl},
                           {"cumulative_log_p": (torch.float32, nl)}, [{"vocab_num_blocks": nb} for _ in nl],
                           {"scale": ep})

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """Every request of every case in one call of the torch oracle, over the concatenated
        cases: each written row (flat over the cases' outputs), its value and bound. A scale
        batch's tails alone (:meth:`_scale_oracle`)."""
        if "scale" in b.extra:
            return self._scale_oracle(b)
        q = batch_requests(b)
        a = b.cat
        nb = int(b.scalars[0]["vocab_num_blocks"])
        Vt = b.shapes["target_logits"][0][1]
        dl = a.get("draft_logits")
        w, v, bound = tensor_ops_v2.cumulative_log_p(
            a["target_logits"].view(-1, Vt), *(a[x].view(-1, nb) for x in STAT_INPUTS[:2]), a["draft_sampled"],
            None if dl is None else dl.view(-1, 1, b.shapes["draft_logits"][0][2]),
            *(a[x].view(-1, nb) for x in STAT_INPUTS[2:]), q.cu, q.state, a["temperature"], nb, q.draft_first)
        index = torch.nonzero(w).flatten()
        return {"cumulative_log_p": (index, v[index], bound[index])}

    def _scale_oracle(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """A scale batch's writes: the torch oracle on the tails' requests alone (the filler's
        are greedy: nothing written), every case's tail at once. §31 reads one element of a
        draft row's logits and of its drafter's row (the draft's), so the oracle is given
        those elements alone (``[T, 1]``, the drafts as ``0``, ``-1`` kept) and the rows'
        statistics as the cases hold them."""
        ep: ScaleEpoch = b.extra["scale"]
        V = ep.V
        nb = int(b.scalars[0]["vocab_num_blocks"])
        a = b.cat
        q = batch_requests(b)
        n = np.asarray(b.lengths["draft_sampled"], dtype=np.int64)
        dev = q.cu.device
        _, local, at = tail_rows(n, ep.F, dev.type)
        req, elp = q.req[at], q.elp[at]
        treq, counts = torch.unique_consecutive(req, return_counts=True)
        cu = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
        ds = a["draft_sampled"].long()
        tok = ds[(at + 1).clamp(max=ds.numel() - 1)]  # row j's draft (a bonus row's: not read)
        tk = tok.clamp(min=0)
        draft = None
        if ep.cache is not None:
            draft = ep.cache.view(-1, V)[a["idx_mapping"][req] * CACHE_K + elp.clamp(max=CACHE_K - 1), tk].view(-1, 1, 1)
        w, v, bound = tensor_ops_v2.cumulative_log_p(
            ep.table[local, tk].view(-1, 1), *(a[x].view(-1, nb)[at] for x in STAT_INPUTS[:2]),
            torch.where(ds[at] >= 0, 0, -1), draft, *(a[x].view(-1, nb)[at] for x in STAT_INPUTS[2:]), cu,
            torch.arange(treq.numel(), device=dev), a["temperature"][q.state[treq]], nb,
            None if draft is None else cu[:-1])
        index = torch.nonzero(w).flatten()
        return {"cumulative_log_p": (at[index], v[index], bound[index])}

    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """The record's features of each case (``features_of``), from the batch's arrays: the
        random draft rows' log-probabilities of their drafts on the host (the record's float64
        arithmetic, :func:`~...targetkit.runner_v2_verify.block_lse`), the rest on the device. A
        scale batch reads its rows' elements of the shared table and cache."""
        q = batch_requests(b)
        a = b.cat
        if "scale" in b.extra:
            ep: ScaleEpoch = b.extra["scale"]
            V = ep.V
            n = np.asarray(b.lengths["draft_sampled"], dtype=np.int64)
            start = host_to(np.cumsum(n) - n, q.cu.device)

            def target_at(j: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
                return ep.table[j - start[q.cid[j]], x]

            def draft_at(j: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
                return ep.cache.view(-1, V)[a["idx_mapping"][q.req[j]] * CACHE_K + q.elp[j], x]

            return self._features(b, q, V, target_at, None if ep.cache is None else draft_at)
        Vt = b.shapes["target_logits"][0][1]
        dl = a.get("draft_logits")

        def target_ordinary(j: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return a["target_logits"].view(-1, Vt)[j, x]

        def draft_ordinary(j: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return dl.view(-1, b.shapes["draft_logits"][0][2])[q.draft_first[q.req[j]] + q.elp[j], x]

        return self._features(b, q, Vt, target_ordinary, None if dl is None else draft_ordinary)

    def _features(self, b: DeviceBatch, q: Any, Vt: int, target_at: Any, draft_at: Any) -> list[frozenset[str]]:  # noqa: N803
        """:meth:`batch_features`, the drafts' target logits and drafter's logits read by
        ``target_at(rows, tokens)`` and ``draft_at(rows, tokens)`` (``None``: one-hot drafts)."""
        a = b.cat
        k = len(b)
        nb = int(b.scalars[0]["vocab_num_blocks"])
        dev = q.cu.device
        greedy = a["temperature"][q.state] == 0
        d = q.d
        rd = (q.elp < d[q.req]) & ~greedy[q.req]
        rows = torch.nonzero(rd).flatten()
        tok = a["draft_sampled"][rows + 1].long()
        ok = tok >= 0
        j, x = rows[ok], tok[ok]

        def host(name: str, width: int) -> np.ndarray:
            return a[name].view(-1, width)[j].cpu().numpy()

        lt = target_at(j, x).cpu().numpy().astype(np.float64) - block_lse(
            host("target_local_max", nb), host("target_local_sumexp", nb))
        ld = np.zeros_like(lt)
        has_draft = draft_at is not None
        if has_draft:
            r = q.req[j]
            q_ = draft_at(j, x).cpu().numpy().astype(np.float64)
            ld = q_ / a["temperature"][q.state[r]].cpu().numpy().astype(np.float64) - block_lse(
                host("draft_local_max", nb), host("draft_local_sumexp", nb))
        with np.errstate(invalid="ignore"):
            above, masked = lt - ld > 0, np.isneginf(lt)

        def at_rows(flags: np.ndarray | torch.Tensor, where: torch.Tensor) -> torch.Tensor:
            out = torch.zeros(q.req.numel(), dtype=torch.bool, device=dev)
            out[where] = host_to(flags, dev)
            return out

        n = np.asarray(b.lengths["draft_sampled"], dtype=np.int64)
        B = np.asarray(b.lengths["idx_mapping"], dtype=np.int64)
        on = per_case_any(rows_of(b.lengths, "draft_sampled", None, dev.type),
                          {"random_request": rd, "minus_one_draft": at_rows(~ok, rows),
                           "ratio_above_one": at_rows(above, j), "masked_draft": at_rows(masked, j)})
        on |= per_case_any(rows_of(b.lengths, "idx_mapping", None, dev.type),
                           {"greedy_request": greedy & (d > 0), "no_drafts": d == 0})
        # the last random draft row of each case (its offset row * Vt: past 2**31 at production scale)
        last = np.full(k, -1, np.int64)
        cid = q.cid[rows].cpu().numpy()
        np.maximum.at(last, cid, rows.cpu().numpy() - (np.cumsum(n) - n)[cid])
        V = q.V if q.V else Vt
        full = {"draft_logits": on["random_request"] & has_draft, "one_hot_drafts": np.full(k, not has_draft),
                "several_blocks": np.full(k, V > STATS_BLOCK), "padded_blocks": np.full(k, padded_blocks(V)),
                "vocab_past_131072": np.full(k, V > 1 << 17), "many_requests": B > 64,
                "row_offset_past_2_31": np.asarray([x >= 0 and past_limit(int(x) * Vt) for x in last])}
        return feature_sets(on | full, k)

    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """Every row's ``cumulative_log_p`` against the torch oracle (within its bound; untouched
        rows their sentinel)."""
        sm, dl = run.small, run.tables.get("draft_logits")
        out = run.outs["cumulative_log_p"]
        w, e, b = tensor_ops_v2.cumulative_log_p(
            run.tables["target_logits"].view, sm["target_local_max"], sm["target_local_sumexp"], sm["draft_sampled"],
            None if dl is None else dl.view, sm.get("draft_local_max"), sm.get("draft_local_sumexp"), sm["cu_num_logits"],
            sm["idx_mapping"], sm["temperature"], int(case.scalars["vocab_num_blocks"]))
        return out.mismatches(0, out.n, w, e, b)

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        """:func:`live_requests`' rows."""
        keep = live_requests(case)
        cu = case.arrays["cu_num_logits"].astype(np.int64)
        return keep_requests(case, keep), list(range(int(cu[keep[0]]), int(cu[keep[-1] + 1])))


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
