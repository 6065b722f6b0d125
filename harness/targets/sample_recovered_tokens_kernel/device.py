"""``sample_recovered_tokens_kernel`` on the device (docs/CONTRACT.md §13): steps of up to 1024
requests (a quarter up to 4096), up to 16 drafts each, vocabularies up to 262144 and
probability tables of up to 2**28 elements (1 GiB each) drawn on the GPU as softmax rows
(peaked, flat, sparse; the target's top-k in most table epochs, whose kept positions the torch
oracle reads alone), with and without draft probabilities, ``-1`` padding, rows whose scores
are all zero (the recovered id is then 0, a tie of every token), and the noise
as vLLM draws it (``inv_q = 1 / Exp(1)``, ``[B, V]``), float64 in one step in four
(``USE_FP64_GUMBEL``). Launched with vLLM's ``BLOCK_SIZE = 8192``; checked on the device
against the torch oracle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...targetkit.device import DeviceCase, DeviceTarget
from ...targetkit.device_batch import STEP_FEATURES, DeviceBatch, step_features
from ...targetkit.device_draws import (
    MAX_TABLE,
    SCALE_REQUEST_TOKENS,
    SCALE_TABLE,
    draw_step,
    draw_steps,
    draw_vocab,
    lazy_full,
    pad_drafts,
    pad_from,
    sample_from,
    scale_batch_rows,
    scale_counts,
    scale_request_steps,
    scale_rows,
    scale_steps,
    scale_vocab,
    softmax_table,
    sparse_noise,
    sparse_rows,
    token_index,
    topk_table,
)
from ...targetkit.draft_rows import cu_of, pad_tails
from ...targetkit.fused import WINNERS, compiled_winners, piece_on
from ...targetkit.scale import flat_limit, past_limit
from .layout import BLOCK_SIZE, NAME
from .record import TARGET, processed_tokens, scale_features_of

MAX_REQUESTS = 1024
BATCH = 256
"""Cases per batch on a GPU (a step's launch takes some 15 us, the batch's draw, oracle and
buffers a few hundred device operations: 256 cases share them)."""
TABLE_EPOCH = 32
"""Batches that share one set of tables and noise (each case reads its first rows): 8192 cases."""
TOPK_SHARE = 0.75
"""Epochs whose target rows are top-k (:func:`~...targetkit.device_draws.topk_table`; every
scale epoch): the oracle then reads a row's kept positions alone. The others are dense."""
CANDIDATES = 8
"""Draft ids drawn per table row, of which each case's draft token on that row takes one."""


def scale_case(rng: np.random.Generator) -> Case:
    """A production step past ``2**31`` elements (docs/CONTRACT.md §13.2), of one of two kinds:
    more than ``2**31 / V`` draft tokens (the tables' rows ``t*V + v``), or more than
    ``2**31 / V`` requests, most of them prefills without drafts (the noise's rows ``r*V + v``;
    vLLM draws a noise row for every request). Top-k rows (the other tokens' probability 0), with
    or without draft probabilities, and the noise ``1 / Exp(1)`` at a few tokens per row, 1 (``q
    = 1``) elsewhere. Drawn with NumPy alone, sparse (a few MB as a corpus file)."""
    V = scale_vocab(rng)
    k = int(rng.choice([1, 4, 16]))
    if rng.random() < 0.5:  # many draft tokens
        d = scale_counts(rng, scale_rows(rng, V))
    else:  # many requests, the last ones (and a few others) with drafts
        d = np.zeros(scale_rows(rng, V), dtype=np.int64)
        tail = int(rng.integers(1, 9))
        d[-tail:] = rng.integers(1, 17, size=tail)
        d[rng.integers(0, d.size, size=4)] = rng.integers(1, 17, size=4)
    N, B = int(d.sum()), int(d.size)
    draft, draft_ids = sparse_rows(rng, N, V, k)
    with_draft = rng.random() < 0.5
    target = sparse_rows(rng, N, V, k, draft_ids)[0] if with_draft else draft
    ids = draft_ids[np.arange(N), rng.integers(0, k, size=N)].astype(np.int32)
    pad_tails(rng, ids, d.tolist(), float(rng.choice([0.0, 0.05])))
    arrays = {
        "cu_num_draft_tokens": cu_of(d.tolist()),
        "draft_token_ids": ids,
        "target_probs": target,
        "inv_q": sparse_noise(rng, B, V, np.float64 if B * V < SCALE_TABLE // 2 and rng.random() < 0.25 else np.float32, k,
                              (np.repeat(np.repeat(np.arange(B), d), k), draft_ids.reshape(-1))),
    }
    if with_draft:
        arrays["draft_probs"] = draft
    return Case(NAME, arrays, {"max_spec_len": int(d.max()), "vocab_size": V}, {"block_size": None},
                note="a production-scale step (eaglefuzz fuzz --mode device)")


def minimal_scale_cases(case: Case) -> list[Case]:
    """The smallest cases whose reads pass flat index ``2**31`` with ``case``'s vocabulary, the
    simplest first, for each wrap ``case`` has: the tables' (:func:`minimal_table_case`) and
    the noise's (:func:`minimal_noise_case`). The scale minimiser
    (:mod:`~...checking.device_mode.scale_lane`) keeps the first that still fails."""
    V = case.scalars["vocab_size"]
    t, r = processed_tokens(case)
    out = []
    if t.size and past_limit(int(t.max()) * V + V - 1):
        out.append(minimal_table_case(V))
    if r.size and past_limit(int(r.max()) * V + V - 1):
        out.append(minimal_noise_case(V))
    return out


def minimal_table_case(V: int) -> Case:  # noqa: N803
    """The smallest case whose table reads pass flat index ``2**31`` with vocabulary ``V``: the
    first token whose row starts past it (``t0 = ceil(2**31 / V)``: vLLM's int32 product is
    ``t*V``, the lane is added to the pointer after it), the tokens before it in requests of
    16; a table of zeros without draft probabilities, draft ids 0, noise 1: every score 0, each
    recovered id 0."""
    first = -(-flat_limit() // V)  # the first row that starts past 2**31: its product t*V wraps
    N = first + 1
    counts = [16] * (first // 16) + ([first % 16] if first % 16 else []) + [1]
    return Case(NAME, {
        "cu_num_draft_tokens": cu_of(counts),
        "draft_token_ids": np.zeros(N, dtype=np.int32),
        "target_probs": lazy_full((N, V), np.float32),
        "inv_q": np.ones((len(counts), V), dtype=np.float32),
    }, {"max_spec_len": max(counts), "vocab_size": V}, {"block_size": None},
        note="the int32 flat index of the tables past 2**31, minimised")


def minimal_noise_case(V: int) -> Case:  # noqa: N803
    """The smallest case whose noise reads pass flat index ``2**31`` with vocabulary ``V``:
    request ``r0 = ceil(2**31 / V)``, the only one with a draft, after ``r0`` prefills; a
    one-row table of ones, noise 1 but 2 at its row's last token, draft id ``-1``: the
    recovered id ``V - 1``."""
    first = -(-flat_limit() // V)  # the first row that starts past 2**31: its product r*V wraps
    inv_q = lazy_full((first + 1, V), np.float32, 1.0)
    inv_q[first, V - 1] = 2.0
    return Case(NAME, {
        "cu_num_draft_tokens": cu_of([0] * first + [1]),
        "draft_token_ids": np.full(1, -1, dtype=np.int32),
        "target_probs": np.ones((1, V), dtype=np.float32),
        "inv_q": inv_q,
    }, {"max_spec_len": 1, "vocab_size": V}, {"block_size": None},
        note="the int32 flat index of the noise past 2**31, minimised")


def _scale_rows(d: np.ndarray, B: np.ndarray, V: int) -> dict[str, np.ndarray]:  # noqa: N803
    """Per step (draft counts ``d`` concatenated, ``B`` requests each), whether a processed
    token's table row, or its request's noise row, reaches past ``2**31`` (the record's
    ``scale_features_of``: every token of a step is processed, ``max_spec_len`` its longest
    request's)."""
    first = np.cumsum(B) - B
    N = np.add.reduceat(d, np.minimum(first, max(d.size - 1, 0))) * (B > 0) if d.size else np.zeros(B.size, np.int64)
    last = np.full(B.size, -1, dtype=np.int64)  # each step's last request with a draft, in the step
    has = np.flatnonzero(d > 0)
    step = np.searchsorted(np.cumsum(B), has, side="right")
    np.maximum.at(last, step, has - first[step])
    limit = flat_limit()
    return {"table_rows_past_2_31": (N > 0) & ((N - 1) * V + V - 1 >= limit),
            "noise_rows_past_2_31": (last >= 0) & (last * V + V - 1 >= limit)}


def known_winners(memo: dict, mode: object, key: torch.Tensor, sizes: tuple[int, int, int],
                  compute: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Each row of ``key`` (distinct ``(table row, noise row, draft id or -1)`` rows of tables
    of ``sizes = (rows, noise rows, V)``)'s winner: from ``memo[mode]`` (its keys' codes in
    order and their winners) where it holds the row, else ``compute``'s, added to it."""
    R, Q, V = sizes  # noqa: N806
    if not key.shape[0] or R * Q * (V + 1) >= 1 << 62:  # no key, or codes past int64: no memo
        return compute(key)
    codes = (key[:, 0] * Q + key[:, 1]) * (V + 1) + key[:, 2] + 1
    old = memo.get(mode)
    if old is None:
        win = compute(key)
        order = torch.argsort(codes)
        memo[mode] = (codes[order], win[order])
        return win
    known, known_win = old
    at = torch.searchsorted(known, codes).clamp_(max=known.numel() - 1)
    win = known_win[at]
    miss = torch.nonzero(known[at] != codes, as_tuple=True)[0]
    if miss.numel():
        new = compute(key[miss])
        win[miss] = new
        codes, both = torch.cat([known, codes[miss]]), torch.cat([known_win, new])
        order = torch.argsort(codes)
        memo[mode] = (codes[order], both[order])
    return win


class RecoveredDevice(DeviceTarget):
    not_drawn = {"wider_rows": "§13.4: max_spec_len past every d_r is generated by the harness (vLLM passes max(d))",
                 "other_block_size": "§13.4: a BLOCK_SIZE other than vLLM's 8192 is generated by the harness"}
    name = "sample_recovered_tokens_kernel"
    launch_names = ("block_size",)  # null: vLLM's 8192 (the record's layout)
    record = TARGET
    scale = True

    def scale_case(self, rng: np.random.Generator) -> Case:
        return scale_case(rng)

    def scale_minimal(self, case: Case) -> list[Case]:
        return minimal_scale_cases(case)

    scale_batches = True

    def scale_batch_vocab(self, tables_seed: int) -> int:
        """The first draw of :meth:`_tables` with ``scale``."""
        return scale_vocab(np.random.default_rng(tables_seed))

    def scale_minimal_of(self, V: int) -> list[Case]:  # noqa: N803
        """Both wraps' minimal cases (the tables', then the noise's): a batch's epoch passes
        ``2**31`` in one of them."""
        return [minimal_table_case(V), minimal_noise_case(V)]

    def reached(self, case: Case) -> frozenset[str]:
        """The scale features alone (the others need every score: a minute at this scale)."""
        return scale_features_of(case)

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        step = draw_step(rng, max_requests, device == "cpu", tables=True)
        N, V, B = step.N, step.V, step.B
        target = softmax_table(rng, gen, N, V, device)
        with_draft = rng.random() < 0.6
        draft = softmax_table(rng, gen, N, V, device) if with_draft else None
        ids = pad_drafts(rng, sample_from(draft if with_draft else target, gen), step)
        if N and V and rng.random() < 0.5:  # rows whose scores are all 0 (recovered id 0: docs/CONTRACT.md §13.2)
            empty = torch.rand((N, 1), generator=gen, device=device) < 0.5
            if with_draft:  # the draft's row equals the target's: an empty residual
                draft = torch.where(empty, target, draft)
            else:  # a one-hot target on the draft token (a row of one finite logit)
                hot = torch.zeros_like(target).scatter_(1, ids.long().clamp(0, V - 1)[:, None], 1.0)
                target = torch.where(empty & (ids >= 0)[:, None], hot, target)
        dtype = torch.float64 if rng.random() < 0.25 else torch.float32
        q = torch.empty((B, V), dtype=dtype, device=device).exponential_(generator=gen)
        q.clamp_(min=float(torch.finfo(dtype).tiny))  # an exponential sample of 0 would make inv_q inf
        inputs = {
            "cu_num_draft_tokens": host_to(step.cu, device),
            "draft_token_ids": ids,
            "target_probs": target,
            "inv_q": q.reciprocal(),
        }
        if draft is not None:
            inputs["draft_probs"] = draft
        outputs = {"output_token_ids": (torch.int32, N)}
        return DeviceCase(inputs, outputs, {"max_spec_len": step.L, "vocab_size": V})

    batch = BATCH
    table_epoch = TABLE_EPOCH

    def _tables(self, seed: int, device: str, max_requests: int, share: float = 1.0, scale: bool = False) -> dict[str, Any]:
        """The epoch ``seed``'s vocabulary, target and draft tables of ``R`` rows (the target's
        top-k rows in :data:`TOPK_SHARE` of the epochs and every scale epoch, with their
        ``"support"``, else dense; a quarter of the target's rows one-hot, at the token its ids are drawn on: all scores 0 without
        draft probabilities; a quarter of the draft's rows equal to the target's: an empty
        residual), the noise of ``R`` rows (float64 in one epoch in four), and
        :data:`CANDIDATES` ids per row sampled from each table (kept for the epoch); ``share``
        of the full row count in a short epoch. With ``scale``, a current model's vocabulary
        and, in half of the epochs, tables past ``2**31`` elements
        (:func:`~...targetkit.device_draws.scale_batch_rows` rows) and noise of a quarter of
        their rows, in the others noise past ``2**31`` elements (float32) and tables of
        :data:`~...targetkit.device_draws.SCALE_REQUEST_TOKENS` rows (``"requests"``: which
        one the epoch is)."""
        key = (seed, device, max_requests, share, scale, flat_limit())
        if self._epoch[0] == key:
            return self._epoch[1]
        self._epoch = (None, None)
        if device != "cpu":
            torch.cuda.empty_cache()
        rng = np.random.default_rng(seed)
        gen = torch.Generator(device=device).manual_seed(seed)
        if scale:
            V = scale_vocab(rng)
            requests = bool(rng.random() < 0.5)
            R = SCALE_REQUEST_TOKENS if requests else scale_batch_rows(V)
            R_noise = scale_batch_rows(V) if requests else R // 4 + 16
        else:
            V = draw_vocab(rng, device == "cpu")
            full = max(1, min(MAX_TABLE // V, 64 * max_requests))
            R = min(full, max(16, int(full * share)))  # 16: a request of 16 drafts always fits
            requests, R_noise = False, R
        support = None
        if scale or rng.random() < TOPK_SHARE:
            target, support = topk_table(rng, gen, R, V, device)
            hot_at = support[:, :1]
        else:
            target = softmax_table(rng, gen, R, V, device)
            hot_at = torch.multinomial(target, 1, generator=gen)
        draft = softmax_table(rng, gen, R, V, device)
        hot = torch.rand((R, 1), generator=gen, device=device) < 0.25
        target = torch.where(hot, torch.zeros_like(target).scatter_(1, hot_at, 1.0), target)
        draft = torch.where(torch.rand((R, 1), generator=gen, device=device) < 0.25, target, draft)
        dtype = torch.float64 if rng.random() < 0.25 and not requests else torch.float32
        q = torch.empty((R_noise, V), dtype=dtype, device=device).exponential_(generator=gen)
        q.clamp_(min=float(torch.finfo(dtype).tiny))
        tables = {"V": V, "R": R, "R_noise": R_noise, "requests": requests, "support": support,
                  "target_probs": target, "draft_probs": draft, "inv_q": q.reciprocal_(),
                  "target_ids": torch.multinomial(target, CANDIDATES, replacement=True, generator=gen).to(torch.int32),
                  "draft_ids": torch.multinomial(draft, CANDIDATES, replacement=True, generator=gen).to(torch.int32),
                  "winners": {}}  # the epoch's winners found so far (oracle_batch)
        self._epoch = (key, tables)
        return tables

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0, scale: bool = False) -> DeviceBatch:
        """``k`` steps (as :meth:`draw` draws one) of the epoch's vocabulary, each reading the
        first rows of the epoch's tables and noise (``share``: of the full row count,
        :func:`~...targetkit.device_batch.epoch_of`); with or without draft probabilities for
        the whole batch; ids and padding per case. With ``scale``: production-scale steps past
        ``2**31`` elements in their tables' rows
        (:func:`~...targetkit.device_draws.scale_steps`) or, in an epoch of ``"requests"``, in
        their noise's (:func:`~...targetkit.device_draws.scale_request_steps`)."""
        tables = self._tables(seeds[0], device, max_requests, share, scale)
        V, R = tables["V"], tables["R"]
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        with_draft = rng.random() < 0.6
        if not scale:
            steps = draw_steps(rng, k, max_requests, device == "cpu", V, R)
        elif tables["requests"]:
            steps = scale_request_steps(rng, k, V, tables["R_noise"])
        else:
            steps = scale_steps(rng, k, V, R)
        N, B, L = steps.N, steps.B, steps.L
        n = int(N.sum())
        req, j, rows_t = token_index(steps, device)
        cand = tables["draft_ids" if with_draft else "target_ids"]
        ids = cand[rows_t, torch.randint(0, CANDIDATES, (n,), generator=gen, device=device)]
        ids = torch.where(j >= host_to(pad_from(rng, steps), device)[req], torch.full_like(ids, -1), ids)
        cat = {"cu_num_draft_tokens": host_to(steps.cu, device), "draft_token_ids": ids}
        lengths = {"cu_num_draft_tokens": B.tolist(), "draft_token_ids": N.tolist()}
        shapes = {n_: [(x,) for x in lengths[n_]] for n_ in lengths}
        first = np.cumsum(B) - B
        extra = {"V": V, "L": int(L.max()), "table_row": rows_t, "support": tables["support"], "winners": tables["winners"],
                 "noise_row": host_to(np.arange(int(B.sum())) - np.repeat(first, B), device),
                 "cu": host_to(np.cumsum(steps.d), device), "d": steps.d, "B": B}
        shared = {"target_probs": tables["target_probs"], "inv_q": tables["inv_q"]} | (
            {"draft_probs": tables["draft_probs"]} if with_draft else {})
        rows = {"target_probs": N.tolist(), "draft_probs": N.tolist(), "inv_q": B.tolist()}
        return DeviceBatch(cat, lengths, shapes, shared, {n_: rows[n_] for n_ in shared},
                           {"output_token_ids": (torch.int32, N.tolist())},
                           [{"max_spec_len": int(x), "vocab_size": V} for x in L], extra)

    batch_decides = STEP_FEATURES | {"draft_probs", "no_draft_probs", "fp64_gumbel", "other_block_size", "later_tile",
                                     "winner_past_32767", "partial_last_tile", "minus_one_draft",
                                     "table_rows_past_2_31", "noise_rows_past_2_31"}

    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """From the sizes and modes, and (``writes``: the batched oracle's) each processed
        token's winner, as the record's ``features_of`` takes it from the scores' argmax (vLLM's
        tiles of ``BLOCK_SIZE``), and the ``-1`` drafts: a few reductions on the device."""
        with_draft = "draft_probs" in b.shared
        V = b.extra["V"]
        out = step_features(b.extra["d"], b.extra["B"], [s["max_spec_len"] for s in b.scalars], V, {
            "draft_probs": with_draft, "no_draft_probs": not with_draft,
            "fp64_gumbel": b.shared["inv_q"].dtype == torch.float64, "other_block_size": False},
            _scale_rows(b.extra["d"], np.asarray(b.extra["B"]), V))
        if writes is None or not len(b):
            return out
        index, win = writes["output_token_ids"]
        ids = b.cat["draft_token_ids"]
        bounds = host_to(np.cumsum(b.lengths["draft_token_ids"])[:-1].astype(np.int64), ids.device)
        of_win = torch.searchsorted(bounds, index.long(), right=True)
        of_id = torch.searchsorted(bounds, torch.arange(ids.numel(), device=ids.device), right=True)
        partial = V % BLOCK_SIZE != 0 and V > BLOCK_SIZE
        flags = {"later_tile": (of_win, win >= BLOCK_SIZE), "winner_past_32767": (of_win, win > 32767),
                 "partial_last_tile": (of_win, (win // BLOCK_SIZE == (V - 1) // BLOCK_SIZE) & partial),
                 "minus_one_draft": (of_id, (ids < 0) & (not with_draft))}
        per = torch.zeros((len(flags), len(b)), dtype=torch.int64, device=ids.device)
        for n, (at, on) in enumerate(flags.values()):
            per[n].index_add_(0, at, on.long())
        hit = (per > 0).cpu().numpy()
        return [f | {n for n, row in zip(flags, hit, strict=True) if row[k]} for k, f in enumerate(out)]

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """:func:`~....oracles.tensor_ops.sample_recovered_tokens` of the batch, each distinct
        token (table row, noise row, draft id) computed once in its table epoch: the batches of
        an epoch read the first rows of the same tables, so most of a batch's tokens were
        another batch's (``extra["winners"]``, the epoch's winners so far, kept apart with and
        without draft probabilities; the epoch's support checked once; over whole rows by
        :data:`~...targetkit.fused.WINNERS`, compiled where it is switched on)."""
        a, e, sh = b.cat, b.extra, b.shared
        V, draft = e["V"], sh.get("draft_probs")
        t, key, inverse = tensor_ops.recovered_keys(
            cu_num_draft_tokens=e["cu"], draft_token_ids=a["draft_token_ids"], vocab_size=V, max_spec_len=e["L"],
            with_draft=draft is not None, table_row=e["table_row"], noise_row=e["noise_row"])
        memo, support = e.get("winners", {}), e.get("support")
        if support is not None and not memo.get("support checked"):
            tensor_ops.check_support(sh["target_probs"].reshape(-1, V), None if draft is None else draft.reshape(-1, V), support)
            memo["support checked"] = True
        chunk = piece_on(WINNERS, a["draft_token_ids"].device)
        chunk = chunk if chunk is WINNERS.plain else compiled_winners(chunk)
        win = known_winners(memo, draft is not None, key, (sh["target_probs"].numel() // max(V, 1), sh["inv_q"].numel() // max(V, 1), V),
                            lambda k: tensor_ops.recovered_winners(k, sh["target_probs"], draft, sh["inv_q"], V, support, chunk))
        return {"output_token_ids": (t, win[inverse].clamp(max=V - 1).to(torch.int32))}

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        a = dc.inputs
        return tensor_ops.sample_recovered_tokens(
            cu_num_draft_tokens=a["cu_num_draft_tokens"], draft_token_ids=a["draft_token_ids"],
            draft_probs=a.get("draft_probs"), target_probs=a["target_probs"], inv_q=a["inv_q"],
            vocab_size=dc.scalars["vocab_size"], max_spec_len=dc.scalars["max_spec_len"],
        )

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        TARGET.launch(impl, views, Case(kernel=self.name, arrays={}, scalars=dict(dc.scalars), launch=dict.fromkeys(self.launch_names)))


DEVICE = RecoveredDevice()
"""This target's device mode (``--mode device``)."""
