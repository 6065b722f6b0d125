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
from ...core.case import Case
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.runner_v2_verify import (
    MAX_MODEL_LEN,
    METHODS,
    SAMPLE_BLOCK,
    STATS,
    STATS_BLOCK,
    keep_requests,
)
from ...targetkit.scale import flat_limit, past_limit
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
    epoch_vocab,
    scale_epoch,
    scale_rows,
    scale_tails,
    tail_rows,
)
from ...targetkit.scale_steps import K as CACHE_K
from ...targetkit.step_batch import feature_sets, per_case_any, rows_of
from ...targetkit.verify_batch import LONG_CONTEXT, VerifyBatchDevice, draw_steps
from ...targetkit.verify_chain import (
    ATTEMPTS,
    batch_requests,
    re_key,
    rejection_batch,
    resample_of,
    resample_requests,
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
SCALE_FP64 = 0.25
"""The share of scale batches on the float64 noise path (one batch's outputs share a dtype), as
:func:`~...targetkit.verify_batch.draw_steps` draws it."""
MAX_ATTEMPTS = 64
"""Settling attempts of a scale batch at most: :data:`~...targetkit.verify_chain.ATTEMPTS`
re-keyings, placeholder drafts, then more re-keyings (a production case meets no window)."""


class _Device(VerifyBatchDevice, ScaleRecordDevice):

    kinds = TOUR

    scale_batches = True

    def scale_batch_vocab(self, tables_seed: int) -> int:
        return epoch_vocab(tables_seed)

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
        cat, lengths, shapes = _laid_out(arrays)
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
        key = (seed, device, flat_limit())
        if getattr(self, "_epoch", (None,))[0] != key:
            self._epoch = (None, None)  # the last epoch's tables freed before the next are drawn
            if device != "cpu":
                torch.cuda.empty_cache()
            self._epoch = (key, scale_epoch(seed, device))
        return self._epoch[1]

    def _scale_batch(self, seeds: tuple[int, int], device: str, k: int) -> DeviceBatch:
        """``k`` production-scale standard-verification steps over the epoch's table and cache
        (:mod:`~...targetkit.scale_steps`), each reading their first rows: the filler's greedy
        requests of zero rows (every draft :data:`FILLS`' 1, seeds and positions 0: §33 rejects
        each at its first draft, so ``rejected_step`` 0, log-sum-exps 0, nothing drawn), then
        the step's tail (:func:`~...targetkit.scale_steps.scale_tails`, its last request
        starting past the limit and a random one there: :func:`_drawn_past_limit`) drawn as
        :func:`~...targetkit.verify_batch.draw_steps` draws a step (a random id, half of them
        the target's favourite at the row; in three steps in ten a quarter of those past a
        request's first row ``-1``; any seed; a position per request below one of
        :data:`SCALE_POSITIONS`, then consecutive; float64 noise one batch in four), §33 of
        the tails' requests alone (:func:`~eaglefuzz.oracles.tensor_ops_v2.rejection_steps` on
        §30's statistics of their rows, each distinct row once) and settled as
        :func:`~...targetkit.runner_v2_verify.settle_step` settles a step: a tail request whose
        §33 test or §34 winner lands within its window re-keyed, after
        :data:`~...targetkit.verify_chain.ATTEMPTS` its drafts made placeholders (then
        re-keyed again until none does: production meets no window). ``extra["tails"]``: §34
        of the tails' requests as settled, and their requests in the batch."""
        ep = self._scale_epoch(seeds[0], device)
        rng = np.random.default_rng(seeds[1])
        tails = scale_tails(rng, k, ep)
        _drawn_past_limit(rng, tails, ep)
        r = scale_rows(ep, tails, device)
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        V, F = ep.V, ep.F
        n, B = r.n, r.B
        k, N, S = len(n), int(n.sum()), int(B.sum())
        cid, local, at = tail_rows(n, F, device)
        T = at.numel()
        elp, bonus = r.elp[at].long(), r.bonus[at]
        # the drafts: row j's at j + 1 (a request's first row: the token before, any id)
        tok = (torch.rand(T, generator=gen, device=device) * V).long().clamp(max=V - 1)
        live = ep.table[F:, :V]
        fav = torch.where(torch.isfinite(live), live, float("-inf")).argmax(1)[local - F]
        take = (torch.rand(T, generator=gen, device=device) < 0.5) & (elp > 0)
        tok = torch.where(take, torch.cat([fav.new_zeros(1), fav[:-1]]), tok)
        refused = torch.as_tensor(rng.random(k) < 0.3, device=device)[cid]
        tok = torch.where(refused & (torch.rand(T, generator=gen, device=device) < 0.25) & (elp > 0), -1, tok)
        ds = torch.full((N,), FILLS["draft_sampled"], dtype=torch.int32, device=device)
        # the tails' requests (each its own state row), their seeds and positions
        head = elp == 0
        treq = torch.cumsum(head.long(), 0) - 1
        Rt = int(head.sum())
        first = torch.nonzero(head).flatten()
        cu_t = torch.cat([first, torch.full((1,), T, dtype=torch.int64, device=device)])
        eidx = r.eidx[at]
        req = torch.as_tensor(np.cumsum(B) - B, device=device)[cid[first]] + eidx[first]  # request = state row
        top = torch.as_tensor(rng.choice(SCALE_POSITIONS, size=k) - 64, dtype=torch.float64, device=device)[cid[first]]
        p0 = (torch.rand(Rt, generator=gen, device=device, dtype=torch.float64) * top).to(torch.int64)
        pos_t = p0[treq] + elp
        seed_t = torch.randint(-(2**63), 2**63 - 1, (Rt,), generator=gen, device=device, dtype=torch.int64)
        temp_t = r.temperature[req]
        fp64 = bool(rng.random() < SCALE_FP64)
        stats = _tail_stats(ep, local, temp_t[treq], bonus, eidx, elp)
        target = _RowTable(ep.table, local)
        dl = None if ep.cache is None else ep.cache.view(-1, V)
        dfirst = eidx[first] * CACHE_K
        Kt = torch.full((Rt,), CACHE_K, dtype=torch.int64, device=device)
        st = torch.arange(Rt, device=device)
        nb = -(-V // STATS_BLOCK)
        ds_t = tok.clone()

        def chain() -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
            res = tensor_ops_v2.rejection_steps(
                target, stats["target_local_argmax"], stats["target_local_max"], stats["target_local_sumexp"], ds_t, dl,
                stats["draft_local_max"], stats["draft_local_sumexp"], cu_t, st, dfirst, temp_t, seed_t, pos_t, nb,
                CACHE_K, "standard")
            r34 = resample_requests(target, dl, dfirst, Kt, cu_t, st, res["num_sampled"], res["target_rejected_logsumexp"],
                                    res["draft_rejected_logsumexp"], None, ds_t, temp_t, seed_t, pos_t, V, fp64)
            return res, r34

        for attempt in range(1, MAX_ATTEMPTS + 1):
            res, r34 = chain()
            w = res["window"] | r34["window"]
            if not bool(w.any()):
                break
            if attempt == ATTEMPTS + 1:  # placeholders: nothing of the request verified
                ds_t[w[treq] & (elp > 0)] = -1
            else:
                re_key(seed_t, torch.nonzero(w).flatten(), attempt)
        else:
            raise RuntimeError(f"_resample_kernel: a window after {MAX_ATTEMPTS} settling attempts of a scale step")
        ds[at] = ds_t.to(torch.int32)
        seed = torch.zeros(S, dtype=torch.int64, device=device)
        seed[req] = seed_t
        pos = torch.zeros(N, dtype=torch.int64, device=device)
        pos[at] = pos_t
        rejected = torch.zeros(S, dtype=torch.int32, device=device)
        rejected[req] = res["num_sampled"]
        lse = {}
        for x in ("target_rejected_logsumexp", "draft_rejected_logsumexp"):
            lse[x] = torch.zeros(S, dtype=torch.float32, device=device)
            lse[x][req] = res[x]
        per = [np.asarray(ep.fill + c, dtype=np.int64) for c in tails.counts]
        cu = np.concatenate([np.concatenate([[0], np.cumsum(p)]) for p in per]).astype(np.int32)
        nl, Bl = n.tolist(), B.tolist()
        arrays = {"target_rejected_logsumexp": (lse["target_rejected_logsumexp"], [(x,) for x in Bl]),
                  "draft_rejected_logsumexp": (lse["draft_rejected_logsumexp"], [(x,) for x in Bl]),
                  "rejected_step": (rejected, [(x,) for x in Bl]),
                  "cu_num_logits": (torch.as_tensor(cu, device=device), [(x + 1,) for x in Bl]),
                  "expanded_idx_mapping": (r.eidx, [(m,) for m in nl]), "draft_sampled": (ds, [(m,) for m in nl]),
                  "temperature": (r.temperature, [(x,) for x in Bl]), "seed": (seed, [(x,) for x in Bl]),
                  "pos": (pos, [(m,) for m in nl])}
        cat, lengths, shapes = _laid_out(arrays)
        rnb = -(-V // SAMPLE_BLOCK)
        dt = torch.float64 if fp64 else torch.float32
        outputs = {"resampled_local_argmax": (torch.int64, [x * rnb for x in Bl]),
                   "resampled_local_max": (dt, [x * rnb for x in Bl])}
        scalars = [{"use_fp64": fp64, "use_block_verification": False, "vocab_size": V} for _ in Bl]
        host = [{"shapes": dict.fromkeys(outputs, (x, rnb))} for x in Bl]
        shared = {"target_logits": ep.table} | ({} if ep.cache is None else {"draft_logits": ep.cache})
        return DeviceBatch(cat, lengths, shapes, shared, {"target_logits": nl, "draft_logits": Bl}, outputs, scalars,
                           {"scale": ep, "tails": (req, r34)}, host=host)

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
            start = torch.as_tensor(np.cumsum(rows) - rows, device=dev)
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
                Kc = torch.as_tensor([x[1] for x in b.shapes["draft_logits"]], device=dev)[q.cid[q.cu[r]]]
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
            first = torch.as_tensor(np.cumsum(reqs.B) - reqs.B, device=dev)
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
        rest = torch.from_numpy(~draws).to(run.device)
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
            res = tensor_ops_v2.resample_rows(*(None if x is None else torch.from_numpy(np.ascontiguousarray(x)).to(run.device)
                                                for x in (a["target_logits"][j[r]], draft, y,
                                                          a["target_rejected_logsumexp"][r], a["draft_rejected_logsumexp"][r],
                                                          ltau, temp[r], a["seed"][s[r]], a["pos"][j[r]])),
                                              V, bool(sc.get("use_fp64")), SAMPLE_BLOCK)  # fmt: skip
            rows = torch.from_numpy(r).to(run.device)
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


def _tail_stats(ep: ScaleEpoch, local: torch.Tensor, t: torch.Tensor, bonus: torch.Tensor, state: torch.Tensor,
                elp: torch.Tensor) -> dict[str, torch.Tensor]:  # fmt: skip
    """§30's statistics of the tails' rows (their table rows ``local``, temperatures ``t``,
    bonus flags, state rows within their steps and steps), each distinct row once (its table
    row, temperature, bonus, drafter's row): ``-1``/NaN where unwritten, as §33 reads them."""
    V = ep.V
    draft_at = torch.where((t != 0) & ~bonus, state * CACHE_K + elp.clamp(max=CACHE_K - 1), -1)
    if ep.cache is None:
        draft_at = torch.full_like(draft_at, -1)
    key = torch.stack([local, t.view(torch.int32).long(), bonus.long(), draft_at], 1)
    uniq, inverse = torch.unique(key, dim=0, return_inverse=True)
    tu = uniq[:, 1].to(torch.int32).view(torch.float32)
    parts: dict[str, list[torch.Tensor]] = {x: [] for x in STATS}
    step = rows_at_once(V, STATS_BLOCK)
    for lo in range(0, uniq.shape[0], step):
        u, tt = uniq[lo : lo + step], tu[lo : lo + step]
        draft = None if ep.cache is None else ep.cache.view(-1, V)[u[:, 3].clamp(min=0)]
        res = tensor_ops_v2.local_logits_stats_rows(ep.table[u[:, 0]], tt == 0, u[:, 2] > 0, draft, tt, V, STATS_BLOCK)
        for x in STATS:
            w, v, _ = res[x]
            argmax = x == "target_local_argmax"
            parts[x].append(torch.where(w, v.to(torch.int64 if argmax else torch.float32), -1 if argmax else float("nan")))
    return {x: torch.cat(parts[x])[inverse] for x in STATS}


class _RowTable:
    """Rows ``rows`` of ``table`` as a ``[len(rows), W]`` table read where indexed (no copy),
    where the torch oracles of §33 and §34 take the target logits
    (:func:`~eaglefuzz.oracles.tensor_ops_v2.rejection_steps` reads elements of its
    ``reshape(-1)``, :func:`~...targetkit.verify_chain.resample_requests` whole rows): the
    tails' rows are the epoch's live rows."""

    def __init__(self, table: torch.Tensor, rows: torch.Tensor, flat: bool = False) -> None:
        self.table, self.rows, self.flat = table, rows, flat
        self.W = table.shape[1]
        self.shape = (rows.numel(), self.W)
        self.device = table.device

    def reshape(self, *shape: int) -> _RowTable:
        if shape != (-1,):
            raise ValueError("a row table is read flat or by rows")
        return _RowTable(self.table, self.rows, True)

    def numel(self) -> int:
        return self.rows.numel() * self.W

    def __getitem__(self, idx: torch.Tensor) -> torch.Tensor:
        if self.flat:
            return self.table[self.rows[idx // self.W], idx % self.W]
        return self.table[self.rows[idx]]


def _laid_out(arrays: dict[str, tuple[torch.Tensor, list[tuple[int, ...]]]]) -> tuple[dict, dict, dict]:
    """A batch's ``cat``, ``lengths`` and ``shapes`` of ``arrays`` (name -> (concatenated tensor,
    per-case shapes)), in the kernel's signature's order."""
    cat, lengths, shapes = {}, {}, {}
    for x in ARRAYS:
        if x in arrays:
            cat[x], shapes[x] = arrays[x]
            lengths[x] = [int(np.prod(sh)) for sh in shapes[x]]
    return cat, lengths, shapes


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
