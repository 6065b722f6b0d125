"""``_rejection_kernel`` on the device (docs/CONTRACT.md §33): verification steps drawn on the GPU
in batches of 256 (16 of a 151936- or 262144-id vocabulary), as its record's generator draws
them (:func:`~...targetkit.verify_batch.draw_steps` with the record's choices: up to 12
requests of up to 16 drafts, any method a batch (standard, synthetic rates, block
verification, FLy), greedy and random requests, the drafter's cache (never the target's own
rows) or one-hot drafts, ``-1`` drafts, masked logits, the logits styles with
log-probabilities, two or three 8192-wide blocks one batch in ten; the tour's large
vocabularies, 65 to 128 requests, and greedy-free synthetic steps at positions past 65535),
with §30's statistics, §31's joint log ratios and §32's residual partials left by their torch
oracles (:mod:`~...targetkit.verify_chain`, as ``rejection_sample`` hands them over), and
settled as the record's generator settles them (:func:`~...targetkit.runner_v2_verify.settle_step`),
by §33's windows alone (:func:`~...targetkit.verify_chain.settle_rejection`; the record's also
settle §34's winners, which this kernel does not compute): a request whose acceptance test
lands within its window (the extended tier's) is re-keyed, its seed XOR-ed with ``RE_KEY``
times the attempt, up to eight times, then its drafts made placeholders.
Checked against the batched torch oracle (:func:`~eaglefuzz.oracles.tensor_ops_v2.rejection_steps`:
every slot of ``sampled`` the steps visit and every count exactly, the log-sum-exps within
their bounds, the other slots untouched) and compared on the GPU; and production-scale
standard-verification steps whose target logits pass ``2**31`` elements (the request's rows
counted from ``cu_num_logits`` as loaded, int32, in vLLM up to 0.24.0: the class of #46560 and
#47383; the draft's logit ``target_logits[j, x]`` read at ``logit_idx *
target_logits_stride``), checked in batches over an epoch's shared tables
(:func:`~...targetkit.scale_steps.standard_steps`: the filler's greedy zero rows, then each
step's tail past the limit, drawn and settled by §33 alone) like an ordinary batch,
against the torch oracle (:func:`~eaglefuzz.oracles.tensor_ops_v2.rejection_steps`: the
filler's requests once, the tails' alone), and confirmed by the NumPy and Numba oracles on the
live requests (:mod:`~...targetkit.scale_device`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...targetkit.device_batch import DeviceBatch, laid_out
from ...targetkit.runner_v2_verify import (
    METHODS,
    NOT_READ,
    STATS,
    STATS_BLOCK,
    keep_requests,
    padded_blocks,
)
from ...targetkit.scale import FEW_READS_BATCH, past_limit
from ...targetkit.scale_device import (
    ScaleRecordDevice,
    ScaleRun,
    live_requests,
    minimal_standard_case,
    standard_scale_case,
)
from ...targetkit.scale_steps import K as CACHE_K
from ...targetkit.scale_steps import (
    ScaleEpoch,
    StandardSteps,
    kept_epoch,
    scale_epoch,
    standard_steps,
)
from ...targetkit.step_batch import feature_sets, owners, per_case_any, rows_of
from ...targetkit.verify_batch import LONG_CONTEXT, VerifyBatchDevice, draw_steps
from ...targetkit.verify_chain import (
    BatchRequests,
    batch_requests,
    method_of,
    rejection_batch,
    rejection_of,
    settle_rejection,
    vocab_of,
)
from .layout import ARRAYS, build
from .record import TARGET

FILLS = {"target_local_max": 0.0, "target_local_sumexp": NOT_READ, "draft_local_max": NOT_READ,
         "draft_local_sumexp": NOT_READ, "draft_sampled": 1}
"""The greedy requests before the live ones: zero rows (§30: block maxima 0, sums never
written), every draft token 1 (not the argmax 0: rejected at the first step, the argmax 0 kept)."""


def fill_greedy(case: Case, requests: int) -> Case:
    """``case`` whose first ``requests`` requests are greedy zero rows: §30's block argmaxes of
    their draft rows (each block's first lane), their bonus rows never written (``-1``,
    :data:`NOT_READ`)."""
    a = case.arrays
    cu = a["cu_num_logits"].astype(np.int64)
    nb = a["target_local_argmax"].shape[1]
    rows = int(cu[requests])
    a["target_local_argmax"][:rows] = np.arange(nb, dtype=np.int64) * STATS_BLOCK
    bonus = cu[1 : requests + 1] - 1
    a["target_local_argmax"][bonus] = -1
    a["target_local_max"][bonus] = NOT_READ
    return case


def scale_case(rng: np.random.Generator) -> Case:
    """A production standard-verification step just past ``2**31`` target logits
    (:func:`~...targetkit.scale_device.standard_scale_case`): greedy requests of zero rows up to
    the limit, the sentinel request on the first row past it, a random request of 16 drafts."""
    case, greedy = standard_scale_case(rng, build, FILLS)
    return fill_greedy(case, greedy)


def minimal_scale_cases(case: Case) -> list[Case]:
    """:func:`minimal_scale_cases_of` ``case``'s vocabulary."""
    return minimal_scale_cases_of(case.arrays["target_logits"].shape[1])


def minimal_scale_cases_of(V: int) -> list[Case]:  # noqa: N803
    """The smallest step with a random request's draft row past ``2**31`` target logits of
    vocabulary ``V`` (:func:`~...targetkit.scale_device.minimal_standard_case`)."""
    m, greedy = minimal_standard_case(V, build, FILLS)
    return [fill_greedy(m, greedy)]


def _rejection(b: DeviceBatch, q: BatchRequests | None = None) -> dict[str, torch.Tensor]:
    """§33 of batch ``b``'s requests: its draw's (``extra["rejection"]``), or a case alone's."""
    res = b.extra.get("rejection")
    return rejection_of(b, q=q) if res is None else res


class _Device(VerifyBatchDevice, ScaleRecordDevice):

    kinds = LONG_CONTEXT

    scale_batches = True
    scale_batch_size = FEW_READS_BATCH

    def scale_minimal_of(self, V: int) -> list[Case]:  # noqa: N803
        return minimal_scale_cases_of(V)

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = 12,
                   share: float = 1.0, kind: str | None = None, scale: bool = False) -> DeviceBatch:
        """``k`` verification steps (fewer of a large vocabulary) as the record's body draws
        them, with the intermediates of §30-§32 (:func:`~...targetkit.verify_chain.chain_rows`),
        settled (:data:`ATTEMPTS`); per case ``sampled`` ``[B, K + 1]``, ``num_sampled`` and
        the two log-sum-exps ``[B]``; ``extra["rejection"]`` §33 of its requests
        (:func:`~...targetkit.verify_chain.settle_rejection`'s). With ``scale``, ``k``
        production-scale standard-verification steps over the scale epoch ``seeds[0]``'s
        shared tables (:meth:`_scale_batch`)."""
        if scale:
            return self._scale_batch(seeds, device, k)
        method = str(np.random.default_rng(seeds).choice(METHODS))  # the batch's, before its steps
        st = draw_steps(seeds, device, k, max_requests, kind, vocab=vocab_of(0.1), method=method, same=False,
                        other_width=0.2, tour=LONG_CONTEXT,
                        tour_choices={"long_context": {"method": "synthetic", "greedy": (0.0,)}})
        b = rejection_batch(st)
        b.extra["rejection"] = settle_rejection(b, st)  # §33 of the batch as settled, which its check takes
        return b

    def _scale_epoch(self, seed: int, device: str) -> ScaleEpoch:
        """The scale epoch ``seed``'s shared tables (kept for the next batch of the epoch)."""
        return kept_epoch(self, seed, device, scale_epoch)

    def _scale_batch(self, seeds: tuple[int, int], device: str, k: int) -> DeviceBatch:
        """``k`` production-scale standard-verification steps over the epoch's table and cache
        (:func:`~...targetkit.scale_steps.standard_steps`: the filler's greedy requests of zero
        rows, then each step's tail past the limit, drawn and settled), each reading their first
        rows; ``extra["rejection"]`` §33 of every request: the filler's once
        (:func:`_filler_rejection`, the same in every step), the settled tails' their own."""
        ep = self._scale_epoch(seeds[0], device)
        s = standard_steps(seeds, device, k, ep, resample=False)
        r = s.rows
        nb = s.nb
        n, B = r.n.tolist(), r.B.tolist()
        arrays = {x: (s.stats[x].reshape(-1), [(m, nb) for m in n]) for x in STATS}
        arrays |= {"draft_sampled": (s.draft_sampled, [(m,) for m in n]),
                   "cu_num_logits": (host_to(s.cu_num_logits(), device), [(x + 1,) for x in B]),
                   "idx_mapping": (host_to(s.idx_mapping(), device), [(x,) for x in B]),
                   "temperature": (r.temperature, [(x,) for x in B]), "seed": (s.seed, [(x,) for x in B]),
                   "pos": (s.pos, [(m,) for m in n])}
        cat, lengths, shapes = laid_out(arrays, ARRAYS)
        outputs = {"sampled": (torch.int64, [x * (CACHE_K + 1) for x in B]), "num_sampled": (torch.int32, B),
                   "target_rejected_logsumexp": (torch.float32, B), "draft_rejected_logsumexp": (torch.float32, B)}
        scalars = [{"vocab_num_blocks": nb, "num_speculative_steps": CACHE_K, "use_block_verification": False,
                    "fly_window_size": 0, "fly_entropy_threshold": 0.3} for _ in B]
        host = [{"shapes": {"sampled": (x, CACHE_K + 1)}} for x in B]
        shared = {"target_logits": ep.table} | ({} if ep.cache is None else {"draft_logits": ep.cache})
        return DeviceBatch(cat, lengths, shapes, shared, {"target_logits": n, "draft_logits": B}, outputs, scalars,
                           {"scale": ep, "rejection": _scale_rejection(s)}, host)

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """Every request of every case in one call of the torch oracle: the slots of ``sampled``
        the steps write (flat over the cases' ``[B, K + 1]`` outputs), every count, every
        log-sum-exp with its bound (a drawn batch's §33 made by its draw, on the arrays as
        drawn)."""
        res = _rejection(b)
        dev = res["num_sampled"].device
        B = np.asarray(b.lengths["idx_mapping"], dtype=np.int64)
        K = res["K"]
        rcid = owners(B, dev.type)
        local = torch.arange(int(B.sum()), device=dev) - host_to(np.cumsum(B) - B, dev)[rcid]
        sizes = np.asarray(b.outputs["sampled"][1], dtype=np.int64)
        base = host_to(np.cumsum(sizes) - sizes, dev)[rcid] + local * (K + 1)
        r, i = torch.nonzero(res["sampled_written"], as_tuple=True)
        out = {"sampled": (base[r] + i, res["sampled"][r, i]),
               "num_sampled": (torch.arange(int(B.sum()), device=dev), res["num_sampled"])}
        for x in ("target_rejected_logsumexp", "draft_rejected_logsumexp"):
            out[x] = (torch.arange(int(B.sum()), device=dev), res[x], res[x + "_bound"])
        return out


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """The record's features of each case (``features_of``), from the torch oracle's
        decisions (none within a window: exactly the NumPy oracle's) and the batch's arrays;
        FLy's confirmed deferrals against the standard test's counts (the record's plain run)."""
        q = batch_requests(b)
        a = b.cat
        k = len(b)
        dev = q.cu.device
        acc = _rejection(b, q)["num_sampled"].long()
        method = method_of(b)
        d = q.d
        greedy = a["temperature"][q.state] == 0
        rnd = ~greedy
        fly_more = torch.zeros_like(greedy)
        if method == "fly":
            fly_more = acc > rejection_of(b, "standard", q)["num_sampled"].long()
        draft_row = q.elp < d[q.req]
        N = q.req.numel()
        nxt = torch.cat([a["draft_sampled"][1:].long(), a["draft_sampled"].new_zeros(1).long()]) if N else a["draft_sampled"]
        on = per_case_any(rows_of(b.lengths, "idx_mapping", None, dev.type), {
            "greedy_request": greedy & (d > 0), "random_request": rnd & (d > 0),
            "all_accepted": rnd & (d > 0) & (acc == d), "first_rejected": (d > 0) & (acc == 0),
            "later_rejected": (acc > 0) & (acc < d), "greedy_corrected": greedy & (acc < d),
            "fly_deferral_confirmed": fly_more, "no_drafts": d == 0})
        on |= per_case_any(rows_of(b.lengths, "draft_sampled", None, dev.type), {
            "minus_one_draft": draft_row & (nxt < 0), "positions_past_65535": draft_row & (a["pos"] > 0xFFFF)})
        rates = np.zeros(k, bool)
        if "synthetic_conditional_rates" in a:
            x = a["synthetic_conditional_rates"]
            rates = per_case_any(rows_of(b.lengths, "synthetic_conditional_rates", None, dev.type),
                                 {"r": (x == 0) | (x == 1)})["r"]
        n = np.asarray(b.lengths["draft_sampled"], dtype=np.int64)
        last = np.full(k, -1, np.int64)
        rows = torch.nonzero(draft_row).flatten()
        cid = q.cid[rows].cpu().numpy()
        np.maximum.at(last, cid, rows.cpu().numpy() - (np.cumsum(n) - n)[cid])
        ep: ScaleEpoch | None = b.extra.get("scale")  # a scale batch's tables are shared
        V = q.V if ep is None else ep.V
        Vt = b.shapes["target_logits"][0][1] if ep is None else ep.V
        B = np.asarray(b.lengths["idx_mapping"], dtype=np.int64)
        has_draft = "draft_logits" in a if ep is None else ep.cache is not None
        full = {x: np.full(k, method == m) for x, m in (("standard", "standard"), ("synthetic", "synthetic"),
                                                         ("block_verification", "block"), ("fly", "fly"))}
        full |= {"draft_logits": np.full(k, has_draft), "one_hot_drafts": np.full(k, not has_draft),
                 "rates_zero_or_one": rates, "several_blocks": np.full(k, V > STATS_BLOCK),
                 "padded_blocks": np.full(k, padded_blocks(V)), "vocab_past_131072": np.full(k, V > 1 << 17),
                 "many_requests": B > 64,
                 "row_offset_past_2_31": np.asarray([x >= 0 and past_limit(int(x) * Vt) for x in last])}
        return feature_sets(on | full, k)

    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """Every request's ``sampled`` (the steps visited; the others their sentinel),
        ``num_sampled`` exactly, the two log-sum-exps within their bounds, against
        :func:`~eaglefuzz.oracles.tensor_ops_v2.rejection_steps` (standard and synthetic steps;
        a decision within its window the run's)."""
        sc = case.scalars
        if sc.get("use_block_verification") or sc.get("fly_window_size", 0):
            raise ValueError("a production-scale step of the rejection kernel verifies by the standard method")
        sm, dl = run.small, run.tables.get("draft_logits")
        nb = int(sc["vocab_num_blocks"])
        P = min(nb, int(case.launch.get("PADDED_VOCAB_NUM_BLOCKS") or nb))
        K = int(sc["num_speculative_steps"])
        s = sm["idx_mapping"].to(torch.int64)
        rates = sm.get("synthetic_conditional_rates")
        res = tensor_ops_v2.rejection_steps(
            run.tables["target_logits"].view, sm["target_local_argmax"], sm["target_local_max"], sm["target_local_sumexp"],
            sm["draft_sampled"], None if dl is None else dl.view, sm["draft_local_max"], sm["draft_local_sumexp"],
            sm["cu_num_logits"], s, None if dl is None else s * dl.view.shape[1], sm["temperature"], sm["seed"],
            sm["pos"], P, K, "standard" if rates is None else "synthetic",
            None if rates is None else rates[None, :K].expand(s.numel(), K), decided=run.outs["num_sampled"].view)
        every = torch.ones(s.numel(), dtype=torch.bool, device=run.device)
        expected = {"sampled": (res["sampled_written"], res["sampled"], torch.zeros(res["sampled"].shape, dtype=torch.float64,
                                                                                   device=run.device)),
                    "num_sampled": (every, res["num_sampled"], torch.zeros(s.numel(), dtype=torch.float64, device=run.device))}
        for name in ("target_rejected_logsumexp", "draft_rejected_logsumexp"):
            expected[name] = (every, res[name], res[name + "_bound"])
        bad = torch.zeros((), dtype=torch.int64, device=run.device)
        for name, out in run.outs.items():
            w, e, b = expected[name]
            bad += out.mismatches(0, w.shape[0], w, e, b)
        return bad

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        keep = live_requests(case)
        return keep_requests(case, keep), keep


def _filler_rejection(s: StandardSteps) -> dict[str, torch.Tensor]:
    """§33 of the filler's requests (every step's first ``q``: greedy zero rows, the same arrays
    in every step), from the first step's arrays, the table read in place."""
    ep = s.epoch
    F, q, V = ep.F, ep.q, ep.V
    dev = s.draft_sampled.device
    dl = None if ep.cache is None else ep.cache.view(-1, V)
    st = torch.arange(q, device=dev)
    cu = host_to(np.concatenate([[0], np.cumsum(ep.fill)]).astype(np.int64), dev)
    f = {x: s.stats[x][:F] for x in STATS}
    return tensor_ops_v2.rejection_steps(
        ep.table[:F], f["target_local_argmax"], f["target_local_max"], f["target_local_sumexp"], s.draft_sampled[:F], dl,
        f["draft_local_max"], f["draft_local_sumexp"], cu, st, None if dl is None else st * CACHE_K,
        s.rows.temperature[:q], s.seed[:q], s.pos[:F], s.nb, CACHE_K, "standard")


def _scale_rejection(s: StandardSteps) -> dict[str, torch.Tensor]:
    """§33 of every request of a scale batch (per request, global): the filler's
    (:func:`_filler_rejection`) in every step, then its tail's (settled:
    :attr:`~...targetkit.scale_steps.StandardSteps.rejection`); ``K`` per request."""
    q = s.epoch.q
    tail = s.rejection
    dev = s.draft_sampled.device
    t = np.asarray([len(c) for c in s.tails.counts], dtype=np.int64)
    idx = np.concatenate([np.concatenate([np.arange(q), q + f + np.arange(x)]) for f, x in zip(np.cumsum(t) - t, t,
                                                                                              strict=True)])
    at = host_to(idx.astype(np.int64), dev)
    filler = _filler_rejection(s) if q else {x: v[:0] for x, v in tail.items()}
    out = {x: torch.cat([filler[x], tail[x]])[at] for x in tail}
    out["K"] = torch.full((at.numel(),), CACHE_K, dtype=torch.int64, device=dev)
    return out


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
