"""``_compute_local_logits_stats_kernel`` on the device (docs/CONTRACT.md §30): verification
steps drawn on the GPU in batches of 256 (16 of a 151936- or 262144-id vocabulary), as its
record's generator draws them (:mod:`~...targetkit.verify_batch`: greedy and random requests,
the drafter's cache or none, narrower and wider draft vocabularies, masked logits, the logits
styles with log-probabilities; the tour's large vocabularies and hundreds of rows), checked
against the batched torch oracle (:func:`~eaglefuzz.oracles.tensor_ops_v2.local_logits_stats_rows`,
the maxima and argmaxes bit for bit, the sums within their bounds) and compared on the GPU,
every statistic of every row and block; and production-scale steps whose target logits pass
``2**31`` elements (the int32 row offset ``logit_idx * target_logits_stride`` of vLLM up to
0.24.0's ``_compute_block_stats_kernel``, fixed by #47383; #46560 is the same class in the
sampler): on a GPU that holds them, batches of 256 drawn on the device over one scale epoch's
shared table and drafter's cache (:mod:`~...targetkit.scale_steps`), checked as an ordinary
batch against the same torch oracle, once per distinct row; elsewhere one step drawn with
NumPy, checked a block of rows at a time and confirmed by the NumPy and Numba oracles on the
live request (:mod:`~...targetkit.scale_device`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.device_draws import lazy_full, scale_vocab
from ...targetkit.runner_v2_verify import STATS, STATS_BLOCK
from ...targetkit.scale import past_limit
from ...targetkit.scale_device import ScaleRecordDevice, ScaleRun, first_row, requests_past_limit
from ...targetkit.scale_rows import bonus_rows, minimal_request_rows, scale_request_rows
from ...targetkit.scale_steps import (
    ScaleEpoch,
    distinct_stats,
    kept_epoch,
    scale_epoch,
    scale_rows,
    scale_tails,
)
from ...targetkit.step_batch import (
    feature_sets,
    per_case_any,
    per_case_sum,
    rows_of,
)
from ...targetkit.verify_batch import KINDS, VerifyBatchDevice, draw_steps, row_flags, step_rows
from ...targetkit.verify_chain import rows_at_once
from .layout import NAME
from .record import TARGET

K = 16
"""Speculative steps of a scale step (``num_speculative_tokens``: vLLM's most)."""


def _step(counts: list[int], V: int, temperature: np.ndarray, with_draft: bool) -> Case:  # noqa: N803
    """A step of requests of ``counts`` logits rows (state rows ``0 .. B-1``), zero logits (and a
    zero drafter's cache ``[B, K, V]`` when ``with_draft``): the caller writes the live rows."""
    B, n = len(counts), int(sum(counts))
    arrays: dict[str, np.ndarray] = {"target_logits": lazy_full((n, V), np.float32)}
    if with_draft:
        arrays["draft_logits"] = lazy_full((B, K, V), np.float32)
    arrays |= {"expanded_idx_mapping": np.repeat(np.arange(B, dtype=np.int64), counts),
               "expanded_local_pos": np.concatenate([np.arange(c, dtype=np.int32) for c in counts]),
               "temperature": np.asarray(temperature, dtype=np.float32)}
    return Case(NAME, arrays, {"vocab_size": int(V)}, {})


def scale_case(rng: np.random.Generator) -> Case:
    """A production verification step just past ``2**31`` target logits (a current model's
    vocabulary, ``max_num_seqs x (1 + K)`` rows): greedy requests of 16 drafts whose rows are
    zeros up to a few rows before the limit, then the live request of 16 drafts across it,
    greedy or random (temperature 0.7, 1 or 1.3), its rows random logits (a random row's top-k
    masked to ``-inf`` now and then), with the drafter's cache (its rows random too) in half
    the steps: 8 GiB of target logits (and as much cache), sparse."""
    V = scale_vocab(rng)
    counts = scale_request_rows(rng, first_row(V))
    B = len(counts)
    temperature = np.zeros(B, np.float32)
    temperature[-1] = rng.choice([0.0, 0.7, 1.0, 1.3])
    case = _step(counts, V, temperature, bool(rng.random() < 0.5))
    a = case.arrays
    live = slice(int(sum(counts[:-1])), None)
    x = (rng.standard_normal((counts[-1], V)) * 3).astype(np.float32)
    if temperature[-1] and rng.random() < 0.3:  # top-k: all but k logits of each row masked
        keep = int(rng.integers(1, min(64, V) + 1))
        np.put_along_axis(x, np.argsort(x, axis=1)[:, : V - keep], -np.inf, axis=1)
    a["target_logits"][live] = x
    if "draft_logits" in a:
        a["draft_logits"][B - 1] = (rng.standard_normal((K, V)) * 3).astype(np.float32)
    return case.replace(note="a production-scale step (eaglefuzz fuzz --mode device)")


def minimal_scale_cases(case: Case) -> list[Case]:
    """:func:`minimal_scale_cases_of` ``case``'s vocabulary."""
    return minimal_scale_cases_of(case.scalars["vocab_size"])


def minimal_scale_cases_of(V: int) -> list[Case]:  # noqa: N803
    """The smallest steps with a drafted row past ``2**31`` target logits of vocabulary ``V``, a
    table of zeros, no drafter's cache: greedy requests of 17 rows up to the limit, then one of
    one draft whose row (the first past the limit) holds a single logit 1 at its last column,
    greedy, then random (temperature 1), simplest first."""
    counts = minimal_request_rows(first_row(V))
    out = []
    for t in (0.0, 1.0):
        temperature = np.zeros(len(counts), np.float32)
        temperature[-1] = t
        m = _step(counts, V, temperature, False)
        m.arrays["target_logits"][first_row(V), V - 1] = 1.0
        out.append(m.replace(note="the int32 row offset past 2**31, minimised"))
    return out


def _case_start(rows: Any, flags: torch.Tensor) -> torch.Tensor:
    """Per row, the count of ``flags`` in its case's rows before the case's first row."""
    total = torch.cumsum(flags.long(), 0)
    first = host_to(np.cumsum(rows.B) - rows.B, flags.device)
    before = torch.where(first > 0, total[(first - 1).clamp(min=0)], torch.zeros_like(first))
    return before[rows.cid]


def live_requests(case: Case) -> list[int]:
    """The requests the NumPy and Numba oracles confirm a scale finding on: those with a row
    at or past the limit, and the one before them."""
    elp = case.arrays["expanded_local_pos"]
    starts = np.flatnonzero(elp == 0)
    return requests_past_limit(starts, np.append(starts[1:], elp.size), case.arrays["target_logits"].shape[1])


def restrict(case: Case, keep: list[int]) -> tuple[Case, list[int]]:
    """``case`` with only the requests ``keep`` (their rows, their state rows renumbered from
    0: temperatures and drafter's cache rows alike), and the rows kept."""
    a = case.arrays
    elp = a["expanded_local_pos"]
    starts = np.flatnonzero(elp == 0)
    ends = np.append(starts[1:], elp.size)
    rows = np.concatenate([np.arange(starts[r], ends[r]) for r in keep])
    states = a["expanded_idx_mapping"][starts[keep]]
    arrays = {"target_logits": np.array(a["target_logits"][rows])}
    if "draft_logits" in a:
        arrays["draft_logits"] = np.array(a["draft_logits"][states])
    arrays |= {"expanded_idx_mapping": np.repeat(np.arange(len(keep), dtype=np.int64), ends[keep] - starts[keep]),
               "expanded_local_pos": np.array(elp[rows]), "temperature": np.array(a["temperature"][states])}
    return case.replace(arrays=arrays), rows.tolist()


def _joined(parts: dict[str, list[tuple[torch.Tensor, ...]]]) -> dict[str, tuple[Any, ...]]:
    """Each statistic's written elements, values and bounds, the parts joined (the argmax
    exact: no bound)."""
    out = {}
    for name, ps in parts.items():
        index, value, bound = (torch.cat(x) for x in zip(*ps, strict=True))
        out[name] = (index, value) if name == "target_local_argmax" else (index, value, bound)
    return out


class _Device(VerifyBatchDevice, ScaleRecordDevice):

    kinds = KINDS

    scale_batches = True

    def scale_minimal_of(self, V: int) -> list[Case]:  # noqa: N803
        return minimal_scale_cases_of(V)

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = 12,
                   share: float = 1.0, kind: str | None = None, scale: bool = False) -> DeviceBatch:
        """``k`` steps (:func:`~...targetkit.verify_batch.draw_steps`; fewer of a large
        vocabulary), the statistics' outputs ``[n, cdiv(V, 8192)]`` each; with ``scale``,
        ``k`` production-scale steps over the scale epoch ``seeds[0]``'s shared tables
        (:mod:`~...targetkit.scale_steps`)."""
        if scale:
            return self._scale_batch(seeds, device, k)
        st = draw_steps(seeds, device, k, max_requests, kind)
        k = len(st.K)
        n, R = st.n.tolist(), st.req.R.tolist()
        nb = -(-st.V // STATS_BLOCK)
        cat = {"target_logits": st.target_logits.reshape(-1)}
        lengths = {"target_logits": [x * st.Vt for x in n]}
        shapes = {"target_logits": [(x, st.Vt) for x in n]}
        if st.draft_logits is not None:
            cat["draft_logits"] = st.draft_logits
            lengths["draft_logits"] = (st.req.R * st.K * st.Vd).tolist()
            shapes["draft_logits"] = [(r, int(kk), st.Vd) for r, kk in zip(R, st.K, strict=True)]
        cat |= {"expanded_idx_mapping": st.eidx, "expanded_local_pos": st.elp, "temperature": st.temperature}
        lengths |= {"expanded_idx_mapping": n, "expanded_local_pos": n, "temperature": R}
        shapes |= {x: [(y,) for y in lengths[x]] for x in ("expanded_idx_mapping", "expanded_local_pos", "temperature")}
        outputs = {x: (torch.int64 if x == "target_local_argmax" else torch.float32, [m * nb for m in n]) for x in STATS}
        host = [{"shapes": dict.fromkeys(STATS, (m, nb))} for m in n]
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, [{"vocab_size": st.V} for _ in range(k)], host=host)

    def _scale_epoch(self, seed: int, device: str) -> ScaleEpoch:
        """The scale epoch ``seed``'s shared tables (kept for the next batch of the epoch)."""
        return kept_epoch(self, seed, device, scale_epoch)

    def _scale_batch(self, seeds: tuple[int, int], device: str, k: int) -> DeviceBatch:
        """``k`` production-scale steps (:func:`~...targetkit.scale_steps.scale_tails`) over
        the epoch's table and cache, each reading their first rows."""
        ep = self._scale_epoch(seeds[0], device)
        r = scale_rows(ep, scale_tails(np.random.default_rng(seeds[1]), k, ep), device)
        n, B = r.n.tolist(), r.B.tolist()
        nb = -(-ep.V // STATS_BLOCK)
        cat = {"expanded_idx_mapping": r.eidx, "expanded_local_pos": r.elp, "temperature": r.temperature}
        lengths = {"expanded_idx_mapping": n, "expanded_local_pos": n, "temperature": B}
        shared = {"target_logits": ep.table} | ({} if ep.cache is None else {"draft_logits": ep.cache})
        outputs = {x: (torch.int64 if x == "target_local_argmax" else torch.float32, [m * nb for m in n]) for x in STATS}
        return DeviceBatch(cat, lengths, {x: [(y,) for y in lengths[x]] for x in cat}, shared,
                           {"target_logits": n, "draft_logits": B}, outputs, [{"vocab_size": ep.V} for _ in n],
                           {"scale": ep}, host=[{"shapes": dict.fromkeys(STATS, (m, nb))} for m in n])

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """Every case's rows by the torch oracle: per statistic its written elements (flat, over
        the cases' outputs), their values and bounds. A scale batch's rows are computed once
        per distinct row (:meth:`_scale_rows`)."""
        if "scale" in b.extra:
            return self._scale_oracle(b)
        r = step_rows(b)
        V = int(b.scalars[0]["vocab_size"])
        draft = r.draft()
        nb = -(-V // STATS_BLOCK)
        parts: dict[str, list[tuple[torch.Tensor, ...]]] = {}
        step = rows_at_once(V, STATS_BLOCK)
        for lo in range(0, r.target.shape[0], step):  # a block of rows at a time: a case alone may be 2**31 logits
            hi = lo + step
            res = tensor_ops_v2.local_logits_stats_rows(
                r.target[lo:hi], r.greedy[lo:hi], r.bonus[lo:hi], None if draft is None else draft[lo:hi],
                r.row_temperature[lo:hi], V, STATS_BLOCK)
            for name, (written, value, bound) in res.items():
                index = torch.nonzero(written.reshape(-1)).flatten()
                parts.setdefault(name, []).append((index + lo * nb, value.reshape(-1)[index], bound.reshape(-1)[index]))
        return _joined(parts)

    def _scale_oracle(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """A scale batch's writes: the torch oracle on each distinct row (its table row, a
        filler's zero row as one, its temperature, whether it is a bonus row, its drafter's
        row), every case's rows taking their row's."""
        ep: ScaleEpoch = b.extra["scale"]
        V = ep.V
        nb = -(-V // STATS_BLOCK)
        n = np.asarray(b.lengths["expanded_local_pos"], dtype=np.int64)
        dev = b.cat["expanded_local_pos"].device
        rows, eidx, elp, bonus, t = row_flags(b)
        content = torch.where(rows.local < ep.F, 0, rows.local)  # the filler's rows are zeros, as row 0 is
        res, inverse = distinct_stats(ep, content, t, bonus, eidx, elp)
        out_start = host_to(np.cumsum(n) - n, dev)[rows.cid] * nb + rows.local * nb
        parts: dict[str, list[tuple[torch.Tensor, ...]]] = {}
        for name, (written, value, bound) in res.items():
            w = written[inverse]
            r, blk = torch.nonzero(w, as_tuple=True)
            parts[name] = [(out_start[r] + blk, value[inverse[r], blk], bound[inverse[r], blk])]
        return _joined(parts)


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """The record's features of each case (``features_of``), from the batch's arrays on the
        device: one copy to the host for all."""
        if "scale" in b.extra:
            return self._scale_features(b)
        r = step_rows(b)
        V = int(b.scalars[0]["vocab_size"])
        Vt = b.shapes["target_logits"][0][1]
        k = len(b)
        rows = rows_of(b.lengths, "expanded_local_pos", None, r.target.device.type)
        greedy = r.greedy & ~r.bonus
        rnd = ~r.greedy & ~r.bonus
        x = r.target[:, :V]
        # a greedy row among its case's first 64: a tied block maximum, a negative partial block
        first64 = greedy & ((torch.cumsum(greedy.long(), 0) - _case_start(rows, greedy)) <= 64)
        nb = -(-V // STATS_BLOCK)
        width = STATS_BLOCK if nb > 1 else V
        pad = torch.full((x.shape[0], nb * width), float("-inf"), device=x.device)
        pad[:, :V] = x
        blocks = pad.view(-1, nb, width)
        tied = ((blocks == blocks.amax(-1, keepdim=True)).sum(-1) > 1).any(-1)
        tail = V % STATS_BLOCK
        negative = (x[:, V - tail :].amax(1) < 0) if tail else torch.zeros_like(greedy)
        t = r.row_temperature
        on = per_case_any(rows, {"greedy_row": greedy, "random_row": rnd,
                                 "masked_logits": rnd & torch.isneginf(x).any(1),
                                 "tied_maximum": first64 & tied, "negative_partial_block": first64 & negative,
                                 "low_temperature": rnd & (t > 0) & (t < 0.5)})
        has_draft = "draft_logits" in b.cat
        n = np.asarray(b.lengths["expanded_local_pos"])
        B = per_case_sum(rows, {"B": r.elp == 0})["B"]
        R = np.asarray(b.lengths["temperature"])
        Vd = b.shapes["draft_logits"][0][2] if has_draft else Vt
        full = {"draft_logits": on["random_row"] & has_draft, "one_hot_drafts": np.full(k, not has_draft),
                "bonus_rows_skipped": np.ones(k, bool), "narrower_draft_vocab": np.full(k, has_draft and Vd < Vt),
                "wider_draft_vocab": np.full(k, has_draft and Vd > Vt), "several_blocks": np.full(k, V > STATS_BLOCK),
                "untouched_state_rows": has_draft & (R > B), "vocab_past_131072": np.full(k, V > 1 << 17),
                "many_rows": n > 192, "row_offset_past_2_31": np.asarray([past_limit((m - 1) * Vt) for m in n])}
        return feature_sets(on | full, k)

    def _scale_features(self, b: DeviceBatch) -> list[frozenset[str]]:
        """:meth:`batch_features` of a scale batch, each row's logits flags computed once per
        table row (the filler's zero rows as row 0)."""
        ep: ScaleEpoch = b.extra["scale"]
        V, k = ep.V, len(b)
        dev = b.cat["expanded_local_pos"].device
        rows, _, _, bonus, t = row_flags(b)
        greedy, rnd = (t == 0) & ~bonus, (t != 0) & ~bonus
        x = ep.table[:, :V]
        nb = -(-V // STATS_BLOCK)
        width = STATS_BLOCK if nb > 1 else V
        tied = torch.zeros(x.shape[0], dtype=torch.bool, device=dev)
        negative = torch.zeros_like(tied)
        content = torch.where(rows.local < ep.F, 0, rows.local)
        used = torch.unique(content)  # the filler's rows (zeros, as row 0) and the live ones: no other row is read
        pad = torch.full((used.numel(), nb * width), float("-inf"), device=dev)
        pad[:, :V] = x[used]
        blocks = pad.view(-1, nb, width)
        tied[used] = ((blocks == blocks.amax(-1, keepdim=True)).sum(-1) > 1).any(-1)
        tail = V % STATS_BLOCK
        if tail:
            negative[used] = x[used, V - tail :].amax(1) < 0
        masked = torch.isneginf(x[used]).any(1)
        has_masked = torch.zeros_like(tied)
        has_masked[used] = masked
        first64 = greedy & ((torch.cumsum(greedy.long(), 0) - _case_start(rows, greedy)) <= 64)
        on = per_case_any(rows, {"greedy_row": greedy, "random_row": rnd, "masked_logits": rnd & has_masked[content],
                                 "tied_maximum": first64 & tied[content],
                                 "negative_partial_block": first64 & negative[content],
                                 "low_temperature": rnd & (t > 0) & (t < 0.5)})
        n = np.asarray(b.lengths["expanded_local_pos"])
        has_draft = ep.cache is not None
        full = {"draft_logits": on["random_row"] & has_draft, "one_hot_drafts": np.full(k, not has_draft),
                "bonus_rows_skipped": np.ones(k, bool), "several_blocks": np.full(k, V > STATS_BLOCK),
                "vocab_past_131072": np.full(k, V > 1 << 17), "many_rows": n > 192,
                "row_offset_past_2_31": np.asarray([past_limit((m - 1) * V) for m in n])}
        return feature_sets(on | full, k)

    def reached(self, case: Case) -> frozenset[str]:
        """The scale feature alone at production scale (the others look at every row)."""
        n, W = case.arrays["target_logits"].shape
        if past_limit((n - 1) * W):
            return frozenset({"row_offset_past_2_31"})
        return TARGET.features_of(case)

    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """Every statistic, a block of rows at a time, against the torch oracle (written within
        its bound, untouched ones their sentinel)."""
        a, device = case.arrays, run.device
        V = int(case.scalars["vocab_size"])
        eidx, elp, temp = a["expanded_idx_mapping"], a["expanded_local_pos"], a["temperature"]
        greedy = host_to(temp[eidx] == 0, device)
        bonus = bonus_rows(elp)
        count = torch.zeros((), dtype=torch.int64, device=device)
        draft = a.get("draft_logits")
        table = run.tables["target_logits"]
        for lo, hi in table.blocks():
            dr = None
            if draft is not None:
                read = ~bonus[lo:hi] & (temp[eidx[lo:hi]] != 0)
                dr = torch.zeros((hi - lo, draft.shape[2]), dtype=torch.float32, device=device)
                if read.any():
                    dr[host_to(read, device)] = host_to(np.ascontiguousarray(draft[eidx[lo:hi][read], elp[lo:hi][read]]), device)
            res = tensor_ops_v2.local_logits_stats_rows(
                table.rows(lo, hi), greedy[lo:hi], host_to(bonus[lo:hi], device), dr,
                run.small["temperature"][run.small["expanded_idx_mapping"][lo:hi]], V, STATS_BLOCK)
            for name, (w, e, b) in res.items():
                count += run.outs[name].mismatches(lo, hi, w, e, b)
            del res, dr
        return count

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        return restrict(case, live_requests(case))


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
