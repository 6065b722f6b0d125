"""``_resample_kernel`` on the device (docs/CONTRACT.md §34): verification steps drawn on the GPU
in batches of 256 (16 of a 151936- or 262144-id vocabulary), as its record's generator draws
them (:func:`~...targetkit.verify_batch.draw_steps` with the record's choices: up to 12
requests of up to 16 drafts, any method a batch, greedy and random requests, the drafter's
cache (never the target's own rows) or one-hot drafts, ``-1`` drafts, masked logits, the logits
styles with log-probabilities, two to four 1024-wide blocks one batch in five, either noise
path; the tour's positions past 65535, 65 to 128 requests and large vocabularies), §33's
counts and log-sum-exps (and block verification's §31 ratios) left by the torch oracles of
§30-§33 (:mod:`~...targetkit.verify_chain`, as ``rejection_sample`` hands them over), settled as
the record's generator settles them (:func:`~...targetkit.runner_v2_verify.settle_step`: a
request whose §33 test or §34 winner lands within its window re-keyed, up to eight times, then
its drafts made placeholders). Checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_ops_v2.resample_rows`: every block of every drawn row, its
winner exactly, its perturbed value within its bound, the rows not drawn untouched) and compared
on the GPU; and production-scale steps whose target logits pass ``2**31`` elements (the
request's rows counted from ``cu_num_logits`` as loaded, int32, in vLLM up to 0.24.0: the class
of #46560 and #47383; the drawn row read at ``resample_token_idx * target_logits_stride``),
checked on the device against the same torch oracle (every block's winner and value) and
confirmed by the NumPy and Numba oracles on the live requests (:mod:`~...targetkit.scale_device`).
The scale lane checks them in batches of standard-verification steps over an epoch's shared table
and drafter's cache (:mod:`~...targetkit.scale_steps`, :meth:`_Device._scale_batch`): the
filler's greedy requests of zero rows (nothing drawn), per step a tail whose last request starts
past the limit, §33's outputs of the tails' requests alone left by the torch oracles, settled off
windows as the ordinary draws are; the batched oracle is §34 of the tails' requests."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...targetkit.device_batch import DeviceBatch, laid_out
from ...targetkit.fused import lane_noise_on
from ...targetkit.runner_v2_verify import (
    MAX_MODEL_LEN,
    METHODS,
    SAMPLE_BLOCK,
    keep_requests,
)
from ...targetkit.scale import past_limit
from ...targetkit.scale_device import (
    ScaleRecordDevice,
    ScaleRun,
    first_row,
    live_requests,
    minimal_standard_case,
    standard_scale_case,
)
from ...targetkit.scale_rows import ROW_BLOCK
from ...targetkit.scale_steps import (
    TAIL_TEMPERATURES,
    ScaleEpoch,
    ScaleTails,
    kept_epoch,
    scale_epoch,
    standard_steps,
)
from ...targetkit.scale_steps import K as CACHE_K
from ...targetkit.step_batch import feature_sets, per_case_any, rows_of
from ...targetkit.verify_batch import LONG_CONTEXT, VerifyBatchDevice, draw_steps
from ...targetkit.verify_chain import (
    batch_requests,
    rejection_batch,
    resample_of,
    resample_vocab,
    rows_at_once,
    settle_chain,
)
from .layout import ARRAYS, build
from .record import TARGET

FILLS = {"draft_sampled": 1}
"""The greedy requests before the live ones: zero rows, every draft token 1 (not the argmax 0:
§33 rejects it at the first step, so ``rejected_step`` 0 and nothing drawn), their
log-sum-exps §33's (0: a greedy request's)."""


def scale_case(rng: np.random.Generator) -> Case:
    """A production standard-verification step just past ``2**31`` target logits
    (:func:`~...targetkit.scale_device.standard_scale_case`): greedy requests of zero rows up to
    the limit (nothing drawn), the sentinel request (its rejected row, the first past the limit,
    drawn), a random request of 16 drafts (its rejected or bonus row drawn), either noise path."""
    return standard_scale_case(rng, build, FILLS)[0]


def minimal_scale_cases(case: Case) -> list[Case]:
    """The smallest step with a drawn row past ``2**31`` target logits of ``case``'s vocabulary
    (:func:`~...targetkit.scale_device.minimal_standard_case`)."""
    return [minimal_standard_case(case.arrays["target_logits"].shape[1], build, FILLS)[0]]


TOUR = LONG_CONTEXT
"""The record's tour's kinds of batch (a third each)."""
CUT_LOOKS = 16
"""Rejected drafts per case whose lanes ``features_of`` looks at for a cut residual lane."""


SCALE_POSITIONS = (5000, MAX_MODEL_LEN)
"""A scale step's tail requests' positions start below one of these (drawn per step): a short
context (the record's ``scale_case``), or any position up to ``max_model_len`` (past 65535
nearly always, as the record's tour's long contexts)."""


class _Device(VerifyBatchDevice, ScaleRecordDevice):

    kinds = TOUR

    scale_batches = True

    def scale_minimal_of(self, V: int) -> list[Case]:  # noqa: N803
        return [minimal_standard_case(V, build, FILLS)[0]]

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = 12,
                   share: float = 1.0, kind: str | None = None, scale: bool = False) -> DeviceBatch:
        """``k`` verification steps (fewer of a large vocabulary) as the record's body draws
        them, settled, with §33's outputs (:func:`~...targetkit.verify_chain.rejection_batch`,
        :func:`~...targetkit.verify_chain.settle`); per case ``resampled_local_argmax`` and
        ``resampled_local_max`` ``[B, cdiv(V, 1024)]``; ``extra["draws"]`` §34 of its requests
        (:func:`~...targetkit.verify_chain.settle_chain`'s). With ``scale``, ``k``
        production-scale standard-verification steps over the scale epoch ``seeds[0]``'s shared
        tables (:meth:`_scale_batch`)."""
        if scale:
            return self._scale_batch(seeds, device, k)
        method = str(np.random.default_rng(seeds).choice(METHODS))  # the batch's, before its steps
        st = draw_steps(seeds, device, k, max_requests, kind, vocab=resample_vocab, method=method, same=False,
                        other_width=0.2, tour=TOUR,
                        tour_choices={"long_context": {"greedy": (0.0, 0.3)}, "large_vocab": {"greedy": (0.0,)}})
        rb = rejection_batch(st)
        res, r34 = settle_chain(rb, st)  # §33 and §34 of the steps as settled
        k = len(st.K)
        n, R, B, K = st.n.tolist(), st.req.R.tolist(), st.req.B.tolist(), st.K.tolist()
        rnb = -(-st.V // SAMPLE_BLOCK)
        arrays = {x: (rb.cat[x], rb.shapes[x]) for x in ARRAYS if x in rb.cat}
        arrays |= {"target_rejected_logsumexp": (res["target_rejected_logsumexp"], [(x,) for x in B]),
                   "draft_rejected_logsumexp": (res["draft_rejected_logsumexp"], [(x,) for x in B]),
                   "rejected_step": (res["num_sampled"], [(x,) for x in B]),
                   "expanded_idx_mapping": (st.eidx, [(m,) for m in n])}
        cat, lengths, shapes = laid_out(arrays, ARRAYS)
        dt = torch.float64 if st.use_fp64 else torch.float32
        outputs = {"resampled_local_argmax": (torch.int64, [x * rnb for x in B]),
                   "resampled_local_max": (dt, [x * rnb for x in B])}
        scalars = [{"use_fp64": bool(st.use_fp64), "use_block_verification": st.method == "block", "vocab_size": st.V}
                   for _ in range(k)]
        host = [{"shapes": dict.fromkeys(outputs, (x, rnb))} for x in B]
        del R, K
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, scalars, {"draws": r34}, host=host)

    def _draws(self, b: DeviceBatch) -> dict[str, torch.Tensor]:
        """§34 of batch ``b``'s requests: its draw's (``extra["draws"]``, of the same arrays), or
        a case alone's."""
        a = b.cat
        res = b.extra.get("draws")
        if res is not None:
            return res
        return resample_of(b, a["rejected_step"], a["target_rejected_logsumexp"], a["draft_rejected_logsumexp"],
                           bool(b.scalars[0]["use_fp64"]))

    def _scale_epoch(self, seed: int, device: str) -> ScaleEpoch:
        """The scale epoch ``seed``'s shared tables (kept for the next batch of the epoch)."""
        return kept_epoch(self, seed, device, scale_epoch)

    def _scale_batch(self, seeds: tuple[int, int], device: str, k: int) -> DeviceBatch:
        """``k`` production-scale standard-verification steps over the epoch's table and cache,
        each reading their first rows (:func:`~...targetkit.scale_steps.standard_steps`): the
        filler's greedy requests of zero rows (every draft :data:`FILLS`' 1, seeds and
        positions 0: §33 rejects each at its first draft, so ``rejected_step`` 0, log-sum-exps
        0, nothing drawn), then the step's tail, its last request starting past the limit and
        a random one there (:func:`_drawn_past_limit`), its positions below one of
        :data:`SCALE_POSITIONS`, §33 of its requests the torch oracle's, settled off §33's and
        §34's windows as the ordinary draws are. ``extra["tails"]``: §34 of the tails'
        requests as settled, and their requests in the batch."""
        ep = self._scale_epoch(seeds[0], device)
        ss = standard_steps(seeds, device, k, ep, tuple(x - 64 for x in SCALE_POSITIONS), _drawn_past_limit)
        r, V = ss.rows, ep.V
        S = int(r.B.sum())
        req, res = ss.tail_request, ss.rejection
        rejected = torch.zeros(S, dtype=torch.int32, device=device)
        rejected[req] = res["num_sampled"]
        lse = {}
        for x in ("target_rejected_logsumexp", "draft_rejected_logsumexp"):
            lse[x] = torch.zeros(S, dtype=torch.float32, device=device)
            lse[x][req] = res[x]
        nl, Bl = r.n.tolist(), r.B.tolist()
        arrays = {"target_rejected_logsumexp": (lse["target_rejected_logsumexp"], [(x,) for x in Bl]),
                  "draft_rejected_logsumexp": (lse["draft_rejected_logsumexp"], [(x,) for x in Bl]),
                  "rejected_step": (rejected, [(x,) for x in Bl]),
                  "cu_num_logits": (host_to(ss.cu_num_logits(), device), [(x + 1,) for x in Bl]),
                  "expanded_idx_mapping": (r.eidx, [(m,) for m in nl]),
                  "draft_sampled": (ss.draft_sampled, [(m,) for m in nl]),
                  "temperature": (r.temperature, [(x,) for x in Bl]), "seed": (ss.seed, [(x,) for x in Bl]),
                  "pos": (ss.pos, [(m,) for m in nl])}
        cat, lengths, shapes = laid_out(arrays, ARRAYS)
        rnb = -(-V // SAMPLE_BLOCK)
        fp64 = ss.use_fp64
        dt = torch.float64 if fp64 else torch.float32
        outputs = {"resampled_local_argmax": (torch.int64, [x * rnb for x in Bl]),
                   "resampled_local_max": (dt, [x * rnb for x in Bl])}
        scalars = [{"use_fp64": fp64, "use_block_verification": False, "vocab_size": V} for _ in Bl]
        host = [{"shapes": dict.fromkeys(outputs, (x, rnb))} for x in Bl]
        shared = {"target_logits": ep.table} | ({} if ep.cache is None else {"draft_logits": ep.cache})
        return DeviceBatch(cat, lengths, shapes, shared, {"target_logits": nl, "draft_logits": Bl}, outputs, scalars,
                           {"scale": ep, "tails": (req, ss.resample)}, host=host)

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """Every drawn request of every case in one call of the torch oracle (a block of rows
        at a time; a drawn batch's made by its draw, on the arrays as drawn): each block's
        winner, and its value with its bound. A scale batch's: its tails' requests' §34 as its
        draw settled them (the filler's requests draw nothing)."""
        if "scale" in b.extra:
            req, res = b.extra["tails"]
        else:
            res = self._draws(b)
            req = None
        nb = res["argmax"].shape[1]
        r = torch.nonzero(res["draws"]).flatten()
        at = r if req is None else req[r]
        index = (at[:, None] * nb + torch.arange(nb, device=r.device)).reshape(-1)
        dt = b.outputs["resampled_local_max"][0]
        return {"resampled_local_argmax": (index, res["argmax"][r].reshape(-1)),
                "resampled_local_max": (index, res["max"][r].reshape(-1).to(dt), res["bound"][r].reshape(-1))}


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """The record's features of each case (``features_of``), from the batch's arrays: a cut
        residual lane (``q >= p`` in the record's float32) among the first 16 rejected drafts of
        each case, on the device. A scale batch reads its rows of the shared table and cache."""
        q = batch_requests(b)
        a = b.cat
        dev = q.cu.device
        n = q.req.numel()
        if "scale" in b.extra:
            ep: ScaleEpoch = b.extra["scale"]
            Vt = V = ep.V
            rows = np.asarray(b.lengths["draft_sampled"], dtype=np.int64)
            start = host_to(np.cumsum(rows) - rows, dev)
            local_state = a["expanded_idx_mapping"][q.cu[:-1].clamp(max=max(n - 1, 0))]

            def target_rows(j: torch.Tensor) -> torch.Tensor:
                return ep.table[j - start[q.cid[j]], :V]

            def draft_rows(r: torch.Tensor, kk: torch.Tensor) -> torch.Tensor:
                return ep.cache.view(-1, V)[local_state[r] * CACHE_K + kk.clamp(max=CACHE_K - 1), :V]

            has_draft = ep.cache is not None
        else:
            Vt = b.shapes["target_logits"][0][1]
            V = q.V
            has_draft = "draft_logits" in a

            def target_rows(j: torch.Tensor) -> torch.Tensor:
                return a["target_logits"].view(-1, Vt)[j, :V]

            def draft_rows(r: torch.Tensor, kk: torch.Tensor) -> torch.Tensor:
                Vd = b.shapes["draft_logits"][0][2]
                Kc = host_to([x[1] for x in b.shapes["draft_logits"]], dev)[q.cid[q.cu[r]]]
                return a["draft_logits"].view(-1, Vd)[q.draft_first[r] + torch.minimum(kk, Kc - 1), :V]

        return self._features(b, q, Vt, V, has_draft, target_rows, draft_rows)

    def _features(self, b: DeviceBatch, q: Any, Vt: int, V: int, draft: bool, target_rows: Any,  # noqa: N803
                  draft_rows: Any) -> list[frozenset[str]]:  # fmt: skip
        """:meth:`batch_features`, the rejected rows' target logits read by ``target_rows(rows)``
        and the drafter's rows by ``draft_rows(requests, steps)`` (``draft``: whether there are
        any), a block of rows at a time."""
        a = b.cat
        k_ = len(b)
        dev = q.cu.device
        n = q.req.numel()
        d = q.d
        kk = a["rejected_step"].long()
        j = q.cu[:-1] + kk
        bonus = kk == d
        ds = a["draft_sampled"].long()
        y = torch.where(bonus, torch.zeros_like(kk), ds[(j + 1).clamp(max=max(n - 1, 0))]) if n else kk
        greedy = a["temperature"][q.state] == 0
        rnd = ~greedy
        rejected = rnd & ~bonus
        block = bool(b.scalars[0]["use_block_verification"])
        reqs = rows_of({"r": (np.asarray(b.lengths["cu_num_logits"]) - 1).tolist()}, "r", None, dev.type)
        cut = torch.zeros_like(rejected)
        if draft:
            look = rejected & (y >= 0)
            rank = torch.cumsum(look.long(), 0)
            first = host_to(np.cumsum(reqs.B) - reqs.B, dev)
            before = torch.where(first > 0, rank[(first - 1).clamp(min=0)], torch.zeros_like(first))
            look &= (rank - before[reqs.cid]) <= CUT_LOOKS
            look_at = torch.nonzero(look).flatten()
            step = rows_at_once(V, SAMPLE_BLOCK)
            for lo in range(0, look_at.numel(), step):
                r = look_at[lo : lo + step]
                lq = draft_rows(r, kk[r]) / a["temperature"][q.state[r]][:, None] - a["draft_rejected_logsumexp"][r][:, None]
                lp = target_rows(j[r]) - a["target_rejected_logsumexp"][r][:, None]
                cut[r] = (lq >= lp).any(1)
        drawn = rnd | bonus
        on = per_case_any(reqs, {
            "bonus_draw": rnd & bonus, "residual_draw": rejected & (y >= 0) & draft,
            "one_hot_residual": rejected & (y >= 0) & (not draft), "placeholder_rejected": rejected & (y < 0),
            "greedy_bonus": greedy & bonus, "greedy_skipped": greedy & ~bonus,
            "block_shift": rejected & (kk > 0) & (y >= 0) & (block and draft),
            "fp64_noise": rnd & bool(b.scalars[0]["use_fp64"]), "residual_lanes_cut": cut,
            "positions_past_65535": drawn & (a["pos"][j.clamp(max=max(n - 1, 0))] > 0xFFFF)})
        last = np.zeros(k_, np.int64)
        rows = np.asarray(b.lengths["draft_sampled"], dtype=np.int64)
        cid = reqs.cid.cpu().numpy()
        np.maximum.at(last, cid, j.cpu().numpy() - (np.cumsum(rows) - rows)[cid])
        full = {"several_blocks": np.full(k_, V > SAMPLE_BLOCK), "vocab_past_131072": np.full(k_, V > 1 << 17),
                "many_requests": reqs.B > 64, "row_offset_past_2_31": np.asarray([past_limit(int(x) * Vt) for x in last])}
        return feature_sets(on | full, k_)

    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """Every request's winners and values per 1024-wide block: a request that draws (random,
        or at its bonus) within :func:`~eaglefuzz.oracles.tensor_ops_v2.resample_rows`'s
        candidates and bounds, the others their sentinel; its rows gathered from the case as
        given, a block of requests at a time."""
        a, sc = case.arrays, case.scalars
        V = int(sc["vocab_size"])
        cu = a["cu_num_logits"].astype(np.int64)
        k = a["rejected_step"].astype(np.int64)
        j = cu[:-1] + k
        s = a["expanded_idx_mapping"][j]
        temp = a["temperature"][s]
        bonus = j == cu[1:] - 1
        draws = ~((temp == 0) & ~bonus)
        la, lm = run.outs["resampled_local_argmax"], run.outs["resampled_local_max"]
        bad = torch.zeros((), dtype=torch.int64, device=run.device)
        rest = host_to(~draws, run.device)
        for out in (la, lm):
            bits = out.view.view(torch.int64 if out.view.element_size() == 8 else torch.int32)
            bad += (bits[rest] != out.sentinel).sum()
        r_all = np.flatnonzero(draws)
        dl = a.get("draft_logits")
        clp = a.get("cumulative_log_p")
        step = max(1, ROW_BLOCK // max(1, a["target_logits"].shape[1]))
        ds = a["draft_sampled"].astype(np.int64)
        for q in range(0, r_all.size, step):
            r = r_all[q : q + step]
            y = np.where(bonus[r], -1, ds[np.minimum(j[r] + 1, ds.size - 1)])
            draft = None
            if dl is not None:
                draft = dl[s[r], np.minimum(k[r], dl.shape[1] - 1)]
            ltau = None
            if sc.get("use_block_verification"):
                ltau = np.where(k[r] > 0, clp[np.maximum(j[r] - 1, 0)], 0).astype(np.float32)
            res = tensor_ops_v2.resample_rows(*(None if x is None else host_to(np.ascontiguousarray(x), run.device)
                                                for x in (a["target_logits"][j[r]], draft, y,
                                                          a["target_rejected_logsumexp"][r], a["draft_rejected_logsumexp"][r],
                                                          ltau, temp[r], a["seed"][s[r]], a["pos"][j[r]])),
                                              V, bool(sc.get("use_fp64")), SAMPLE_BLOCK, lane_noise_on(run.device))  # fmt: skip
            rows = host_to(r, run.device)
            bad += tensor_ops_v2.gumbel_mismatches(res, la.view[rows], lm.view[rows], SAMPLE_BLOCK)
            del res
        return bad

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        keep = live_requests(case)
        return keep_requests(case, keep), keep


def _drawn_past_limit(rng: np.random.Generator, tails: ScaleTails, ep: ScaleEpoch) -> None:
    """Each tail (in place) with its last request starting at or past the first row ``Z`` an
    int32 offset cannot reach (the row §34 draws is its rejected or bonus row, at or past its
    first, whatever §33 decides): where it starts before, the requests before it grown by the
    rows missing (a lone request gets one of them before it, its temperature drawn as the
    tail's are); then, where every request starting past ``Z`` is greedy (it draws only at its
    bonus), the last of those random (:data:`~...targetkit.scale_steps.TAIL_TEMPERATURES`'
    random ones): its case then draws a row an int32 offset cannot reach."""
    Z = first_row(ep.V)
    temps = TAIL_TEMPERATURES[2:] if ep.masked else TAIL_TEMPERATURES
    for counts, temperature in zip(tails.counts, tails.temperature, strict=True):
        gap = Z - ep.F - sum(counts[:-1])
        if gap > 0 and len(counts) == 1:
            counts.insert(0, gap)
            temperature.insert(0, float(rng.choice(temps)))
        elif gap > 0:
            counts[0] += gap
        starts = ep.F + np.cumsum(counts) - np.asarray(counts)
        past = [i for i in range(len(counts)) if starts[i] >= Z]
        if all(temperature[i] == 0 for i in past):
            temperature[past[-1]] = float(rng.choice([t for t in TAIL_TEMPERATURES if t]))


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
