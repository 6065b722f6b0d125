"""``rejection_random_sample_kernel`` on the device (docs/CONTRACT.md §11): steps of up to 1024
requests (a quarter up to 4096), up to 16 drafts each, mixed batches, vocabularies up to 262144
and probability tables of up to 2**28 elements (1 GiB each) drawn on the GPU as softmax rows
(peaked, flat, sparse), with and without draft probabilities, ``-1`` padding, synthetic mode in
one step in eight. The uniforms are ``torch.rand`` float64, as vLLM draws them; without draft
probabilities two thirds of them sit on the acceptance boundary (``u = p`` and the next float64
above it). With draft probabilities they stay off it, and out of the division window: compiled
Triton's approximate division may decide otherwise within 2 ulp of the quotient
(docs/CONTRACT.md §11.3). Checked on the device
against the torch oracle."""

from __future__ import annotations

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
    draw_step,
    draw_steps,
    draw_vocab,
    greedy_mask,
    greedy_masks,
    lazy_full,
    pad_drafts,
    pad_from,
    sample_from,
    scale_batch_rows,
    scale_counts,
    scale_rows,
    scale_steps,
    scale_vocab,
    softmax_table,
    sparse_rows,
    synthetic_rates,
    token_index,
)
from ...targetkit.draft_rows import cu_of, pad_tails
from ...targetkit.scale import FEW_READS_BATCH, flat_limit
from .layout import NAME, WINDOW_ULPS
from .layout import clear_window as clear_window_host
from .record import TARGET

MAX_REQUESTS = 1024
BATCH = 256
"""Cases per batch on a GPU."""
TABLE_EPOCH = 64
"""Batches that share one pair of tables (each case reads its first rows): drawing, staging and
guarding tables of up to 2 GiB costs far more than the kernel's reads of one element per row."""
CANDIDATES = 8
SUBNORMAL = float(np.float32(1e-40))
"""A float32 subnormal probability (below ``np.finfo(np.float32).tiny``, above 0)."""
"""Draft ids drawn per table row (from the draft table, and from the target table), of which
each case's draft token on that row takes one."""


def clear_window(u: torch.Tensor, ids: torch.Tensor, target: torch.Tensor, draft: torch.Tensor, V: int,  # noqa: N803
                 rows: torch.Tensor | None = None) -> torch.Tensor:
    """``u`` with every uniform in its draft's division window (``layout.window_bounds``: within
    ``WINDOW_ULPS`` float32 steps of the IEEE quotient ``p / q``) moved to the window's lower end,
    as the CPU's generators do: torch.rand does land there now and then, and a compiled division
    may decide such a uniform either way (docs/CONTRACT.md §11.2-§11.3). ``rows``: each draft
    token's row of the tables (default: its index)."""
    rows = torch.arange(ids.numel(), device=u.device) if rows is None else rows.long()
    at = rows * V + ids.long().clamp(min=0)
    p, q = target.reshape(-1)[at], draft.reshape(-1)[at]
    quot = p / q  # torch's float32 division is correctly rounded, on the CPU and on CUDA
    lo, hi = quot.clone(), quot.clone()
    for _ in range(WINDOW_ULPS):
        lo = torch.nextafter(lo, torch.full_like(lo, -float("inf")))
        hi = torch.nextafter(hi, torch.full_like(hi, float("inf")))
    lo, hi = lo.double().clamp(min=0), hi.double()
    inside = (ids >= 0) & (q > 0) & torch.isfinite(quot) & (quot >= 0) & (u > lo) & (u <= hi)
    return torch.where(inside, lo, u)


def scale_case(rng: np.random.Generator) -> Case:
    """A production step past ``2**31`` table elements (docs/CONTRACT.md §11.2): a vocabulary of
    a current model, more than ``2**31 / V`` draft tokens (requests of 8 to 16 drafts, some
    prefills without), top-k rows (the other tokens' probability 0), with or without draft
    probabilities, mostly random requests, ``-1`` padding now and then. Drawn with NumPy alone,
    sparse (a few MB as a corpus file)."""
    V = scale_vocab(rng)
    N = scale_rows(rng, V)
    d = scale_counts(rng, N)
    B = int(d.size)
    k = int(rng.choice([1, 4, 16]))
    draft, draft_ids = sparse_rows(rng, N, V, k)
    with_draft = rng.random() < 0.5
    target = sparse_rows(rng, N, V, k, draft_ids)[0] if with_draft else draft  # the draft's top-k tokens
    ids = draft_ids[np.arange(N), rng.integers(0, k, size=N)].astype(np.int32)
    pad_tails(rng, ids, d.tolist(), float(rng.choice([0.0, 0.05])))
    arrays = {
        "cu_num_draft_tokens": cu_of(d.tolist()),
        "draft_token_ids": ids,
        "target_probs": target,
        "bonus_token_ids": rng.integers(0, V, size=(B, 1)).astype(np.int32),
        "recovered_token_ids": rng.integers(0, V, size=N).astype(np.int32),
        "uniform_probs": rng.random(N),
        "is_greedy": rng.random(B) < float(rng.choice([0.0, 0.0, 0.3])),
    }
    if with_draft:
        arrays["draft_probs"] = draft
        arrays["uniform_probs"] = clear_window_host(arrays, V)
    return Case(NAME, arrays, {"max_spec_len": int(d.max()), "vocab_size": V}, {},
                note="a production-scale step (eaglefuzz fuzz --mode device)")


def minimal_scale_cases(case: Case) -> list[Case]:
    """:func:`minimal_scale_cases_of` ``case``'s vocabulary."""
    return minimal_scale_cases_of(case.scalars["vocab_size"])


def minimal_scale_cases_of(V: int) -> list[Case]:  # noqa: N803
    """The smallest cases that read past flat index ``2**31`` with vocabulary ``V``, simplest
    first: one row past it (token ``t0 = ceil(2**31 / V)``, draft id 0: the first row of the
    table an int32 cannot reach), the tokens before it in greedy requests of 16 (read by no
    program), one random request with that single draft; plain values (a table of zeros without
    draft probabilities, uniforms 0.5: the draft is rejected, its recovered id 1; the bonus 2).
    The scale minimiser (:mod:`~...checking.device_mode.scale_lane`) keeps the first that still
    fails."""
    t0 = -(-flat_limit() // V)
    N = t0 + 1
    counts = [16] * (t0 // 16) + ([t0 % 16] if t0 % 16 else []) + [1]
    B = len(counts)
    plain = Case(NAME, {
        "cu_num_draft_tokens": cu_of(counts),
        "draft_token_ids": np.zeros(N, dtype=np.int32),
        "target_probs": lazy_full((N, V), np.float32),
        "bonus_token_ids": np.full((B, 1), 2, dtype=np.int32),
        "recovered_token_ids": np.full(N, 1, dtype=np.int32),
        "uniform_probs": np.full(N, 0.5),
        "is_greedy": np.arange(B) < B - 1,
    }, {"max_spec_len": max(counts), "vocab_size": V}, {}, note="the int32 flat index past 2**31, minimised")
    return [plain]


class RandomDevice(DeviceTarget):
    not_drawn = {"wider_rows": "§11.4: max_spec_len past every d_r is generated by the harness (vLLM passes max(d))"}
    name = "rejection_random_sample_kernel"
    launch_names = ()  # a case of this target has no launch fields
    record = TARGET
    scale = True

    def scale_case(self, rng: np.random.Generator) -> Case:
        return scale_case(rng)

    def scale_minimal(self, case: Case) -> list[Case]:
        return minimal_scale_cases(case)

    scale_batches = True
    scale_batch_size = FEW_READS_BATCH

    def scale_batch_vocab(self, tables_seed: int) -> int:
        """The first draw of :meth:`_tables` with ``scale``."""
        return scale_vocab(np.random.default_rng(tables_seed))

    def scale_minimal_of(self, V: int) -> list[Case]:  # noqa: N803
        return minimal_scale_cases_of(V)

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        step = draw_step(rng, max_requests, device == "cpu", tables=True)
        N, V, B = step.N, step.V, step.B
        target = softmax_table(rng, gen, N, V, device)
        with_draft = rng.random() < 0.6
        draft = softmax_table(rng, gen, N, V, device) if with_draft else None
        ids = sample_from(draft if with_draft else target, gen)
        if not with_draft and rng.random() < 0.5:  # n-gram drafts: any id
            ids = torch.randint(0, V, (N,), generator=gen, device=device, dtype=torch.int32)
        ids = pad_drafts(rng, ids, step)
        u = torch.rand((N,), generator=gen, device=device, dtype=torch.float64)
        if not with_draft and N:  # a third of the uniforms at u = p / 1 (accept) or just above it (reject)
            p = target.reshape(-1)[torch.arange(N, device=device) * V + ids.long().clamp(min=0)].double()
            above = torch.nextafter(p, torch.full_like(p, 2.0))
            pick = torch.randint(0, 3, (N,), generator=gen, device=device)
            u = torch.where(pick == 0, p, torch.where(pick == 1, above, u))
        if with_draft and N:
            u = clear_window(u, ids, target, draft, V)
        inputs = {
            "cu_num_draft_tokens": host_to(step.cu, device),
            "draft_token_ids": ids,
            "target_probs": target,
            "bonus_token_ids": torch.randint(0, V, (B, 1), generator=gen, device=device, dtype=torch.int32),
            "recovered_token_ids": torch.randint(0, V, (N,), generator=gen, device=device, dtype=torch.int32),
            "uniform_probs": u,
            "is_greedy": host_to(greedy_mask(rng, B) & (rng.random() < 0.5), device),
        }
        if draft is not None:
            inputs["draft_probs"] = draft
        if rng.random() < 0.125:
            inputs["synthetic_conditional_rates"] = host_to(synthetic_rates(rng, step.L), device)
        outputs = {"output_token_ids": (torch.int32, B * (step.L + 1))}
        return DeviceCase(inputs, outputs, {"max_spec_len": step.L, "vocab_size": V})

    batch = BATCH
    table_epoch = TABLE_EPOCH

    def _tables(self, seed: int, device: str, max_requests: int, share: float = 1.0, scale: bool = False) -> dict[str, Any]:
        """The shared tables of the epoch ``seed`` (kept for the next batch of the epoch): a
        vocabulary, target and draft tables of ``R`` rows (as many as any step of the epoch
        draws; ``share`` of the full count in a short epoch; with ``scale``, a current model's
        vocabulary and :func:`~...targetkit.device_draws.scale_batch_rows` rows: past ``2**31``
        elements), and :data:`CANDIDATES` ids per row sampled from each."""
        key = (seed, device, max_requests, share, scale, flat_limit())
        if self._epoch[0] == key:
            return self._epoch[1]
        self._epoch = (None, None)  # the last epoch's tables freed before the next are drawn
        if device != "cpu":
            torch.cuda.empty_cache()
        rng = np.random.default_rng(seed)
        gen = torch.Generator(device=device).manual_seed(seed)
        if scale:
            V = scale_vocab(rng)
            R = scale_batch_rows(V)
        else:
            V = draw_vocab(rng, device == "cpu")
            full = max(1, min(MAX_TABLE // V, 64 * max_requests))
            R = min(full, max(16, int(full * share)))  # 16: a request of 16 drafts always fits
        target, draft = softmax_table(rng, gen, R, V, device), softmax_table(rng, gen, R, V, device)
        if rng.random() < 0.25:  # a draft model that agrees on every fourth row: p == q, the quotient exactly 1
            draft[::4] = target[::4]
        tables = {"V": V, "R": R, "target_probs": target, "draft_probs": draft,
                  "target_ids": torch.multinomial(target, CANDIDATES, replacement=True, generator=gen).to(torch.int32),
                  "draft_ids": torch.multinomial(draft, CANDIDATES, replacement=True, generator=gen).to(torch.int32)}
        if rng.random() < 0.25:  # subnormal target probabilities (a peaked softmax underflows) at drafted ids
            rows = torch.arange(1, R, 4, device=device)
            target[rows[:, None], tables["draft_ids"][rows].long()] = SUBNORMAL
        self._epoch = (key, tables)
        return tables

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0, scale: bool = False) -> DeviceBatch:
        """``k`` steps (each as :meth:`draw` draws one) of the epoch's vocabulary, each reading
        the first rows of the epoch's tables (``share``: of the full row count,
        :func:`~...targetkit.device_batch.epoch_of`); with or without draft probabilities and
        synthetic mode (one batch in eight) for the whole batch; ids, uniforms, padding, greedy
        requests per case. With ``scale``: production-scale steps
        (:func:`~...targetkit.device_draws.scale_steps`: each past the first row whose offset
        ``t * V`` an int32 cannot hold) over tables past ``2**31`` elements."""
        tables = self._tables(seeds[0], device, max_requests, share, scale)
        V, R = tables["V"], tables["R"]
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        with_draft = rng.random() < 0.6
        steps = scale_steps(rng, k, V, R) if scale else draw_steps(rng, k, max_requests, device == "cpu", V, R)
        N, B, L = steps.N, steps.B, steps.L
        n = int(N.sum())
        req, j, rows_t = token_index(steps, device)
        cand = tables["draft_ids" if with_draft else "target_ids"]
        ids = cand[rows_t, torch.randint(0, CANDIDATES, (n,), generator=gen, device=device)]
        ngram = rng.random(k) < 0.5
        if ngram.any() and not with_draft:  # n-gram drafts: any id
            ngram_t = host_to(np.repeat(ngram, B), device)[req]
            ids = torch.where(ngram_t, torch.randint(0, V, (n,), generator=gen, device=device, dtype=torch.int32), ids)
        pad = j >= host_to(pad_from(rng, steps), device)[req]
        ids = torch.where(pad, torch.full_like(ids, -1), ids)
        u = torch.rand((n,), generator=gen, device=device, dtype=torch.float64)
        target, draft = tables["target_probs"], tables["draft_probs"]
        if not with_draft and n:  # a third at u = p / 1 (accept) or just above it (reject)
            p = target.reshape(-1)[rows_t * V + ids.long().clamp(min=0)].double()
            above = torch.nextafter(p, torch.full_like(p, 2.0))
            pick = torch.randint(0, 3, (n,), generator=gen, device=device)
            u = torch.where(pick == 0, p, torch.where(pick == 1, above, u))
        if with_draft and n:
            u = clear_window(u, ids, target, draft, V, rows_t)
        greedy = greedy_masks(rng, steps, 0.5)
        synthetic = rng.random() < 0.125
        cat = {
            "cu_num_draft_tokens": host_to(steps.cu, device),
            "draft_token_ids": ids,
            "bonus_token_ids": torch.randint(0, V, (int(B.sum()), 1), generator=gen, device=device, dtype=torch.int32),
            "recovered_token_ids": torch.randint(0, V, (n,), generator=gen, device=device, dtype=torch.int32),
            "uniform_probs": u,
            "is_greedy": host_to(greedy, device),
        }
        lengths = {"cu_num_draft_tokens": B.tolist(), "draft_token_ids": N.tolist(), "bonus_token_ids": B.tolist(),
                   "recovered_token_ids": N.tolist(), "uniform_probs": N.tolist(), "is_greedy": B.tolist()}
        shapes = {n: [(x,) for x in lengths[n]] for n in lengths} | {"bonus_token_ids": [(int(b), 1) for b in B]}
        extra: dict[str, Any] = {"V": V, "L": int(L.max()), "table_row": rows_t,
                                 "cu": host_to(np.cumsum(steps.d), device),
                                 "d": steps.d, "B": B, "greedy": greedy}
        if synthetic:
            rates = synthetic_rates(rng, int(L.max()))
            n = np.maximum(L, 1)
            cat["synthetic_conditional_rates"] = host_to(np.concatenate([rates[:x] for x in n]), device)
            lengths["synthetic_conditional_rates"] = n.tolist()
            shapes["synthetic_conditional_rates"] = [(int(x),) for x in n]
            extra["rates"] = host_to(rates, device)
        out = B * (L + 1)  # each request's first output element: its case's, plus L + 1 a request before it
        per_case = host_to(np.stack([np.cumsum(out) - out, np.cumsum(B) - B, L + 1, B]).astype(np.int64), device)
        case = torch.repeat_interleave(torch.arange(B.size, device=device), per_case[3], output_size=int(B.sum()))
        base, first, width = per_case[:3, case]
        extra["out_start"] = base + (torch.arange(case.numel(), device=device) - first) * width
        shared = {"target_probs": target} | ({"draft_probs": draft} if with_draft else {})
        return DeviceBatch(cat, lengths, shapes, shared, {n: N.tolist() for n in shared},
                           {"output_token_ids": (torch.int32, out.tolist())},
                           [{"max_spec_len": int(x), "vocab_size": V} for x in L], extra)

    batch_decides = STEP_FEATURES | {"draft_probs", "no_draft_probs", "synthetic_mode", "mixed_batch", "all_random",
                                     "no_drafts_row", "flat_index_past_2_31"}

    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        d, B, greedy = b.extra["d"], np.asarray(b.extra["B"]), b.extra["greedy"]
        with_draft = "draft_probs" in b.shared
        first = np.cumsum(B) - B
        at = np.minimum(first, max(greedy.size - 1, 0))
        g = np.add.reduceat(greedy.astype(np.int64), at) * (B > 0) if greedy.size else np.zeros(B.size, np.int64)
        empty = (~greedy & (d == 0)).astype(np.int64)
        e = np.add.reduceat(empty, at) * (B > 0) if empty.size else np.zeros(B.size, np.int64)
        return step_features(d, B, [s["max_spec_len"] for s in b.scalars], b.extra["V"], {
            "draft_probs": with_draft, "no_draft_probs": not with_draft,
            "synthetic_mode": "synthetic_conditional_rates" in b.cat},
            {"mixed_batch": (g > 0) & (g < B), "all_random": g == 0, "no_drafts_row": e > 0,
             "flat_index_past_2_31": self._past_limit(b)})

    @staticmethod
    def _past_limit(b: DeviceBatch) -> np.ndarray:
        """Per case, whether one of the tables' reads the batched oracle made (``extra["reads"]``:
        each read's token and flat index) lies past ``2**31`` (the record's
        ``flat_index_past_2_31``)."""
        t, flat = b.extra["reads"]
        past = flat >= flat_limit()
        ends = host_to(np.cumsum(np.add.reduceat(b.extra["d"], np.cumsum(b.extra["B"]) - b.extra["B"])
                                          if b.extra["d"].size else np.zeros(len(b), np.int64)), t.device)
        case = torch.searchsorted(ends, t[past], right=True)
        return torch.zeros(len(b), dtype=torch.int64, device=t.device).index_add_(
            0, case, torch.ones_like(case)).cpu().numpy() > 0

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Every case at once (the torch oracle over the shared tables' rows); the tables' reads
        it made are kept for :meth:`batch_features` (``extra["reads"]``)."""
        a, e = b.cat, b.extra
        writes, e["reads"] = tensor_ops.rejection_random_sample(
            cu_num_draft_tokens=e["cu"], draft_token_ids=a["draft_token_ids"], draft_probs=b.shared.get("draft_probs"),
            target_probs=b.shared["target_probs"], bonus_token_ids=a["bonus_token_ids"],
            recovered_token_ids=a["recovered_token_ids"], uniform_probs=a["uniform_probs"], is_greedy=a["is_greedy"],
            max_spec_len=e["L"], vocab_size=e["V"], synthetic_conditional_rates=e.get("rates"),
            table_row=e["table_row"], out_start=e["out_start"], with_reads=True)
        return writes

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        a = dc.inputs
        return tensor_ops.rejection_random_sample(
            cu_num_draft_tokens=a["cu_num_draft_tokens"], draft_token_ids=a["draft_token_ids"],
            draft_probs=a.get("draft_probs"), target_probs=a["target_probs"], bonus_token_ids=a["bonus_token_ids"],
            recovered_token_ids=a["recovered_token_ids"], uniform_probs=a["uniform_probs"], is_greedy=a["is_greedy"],
            max_spec_len=dc.scalars["max_spec_len"], vocab_size=dc.scalars["vocab_size"],
            synthetic_conditional_rates=a.get("synthetic_conditional_rates"),
        )

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        L = dc.scalars["max_spec_len"]
        views = dict(views, output_token_ids=views["output_token_ids"].view(-1, L + 1))
        TARGET.launch(impl, views, Case(kernel=self.name, arrays={}, scalars=dict(dc.scalars), launch=dict.fromkeys(self.launch_names)))


DEVICE = RandomDevice()
"""This target's device mode (``--mode device``)."""
