"""``_combine_sampled_and_draft_tokens_kernel`` on the device (docs/CONTRACT.md §16): a Model
Runner V2 kernel, fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the
GPU 256 at a time, as its record's generator draws them (rows still prefilling, rows whose
logits start in the prompt's tail, at the prompt's end, decoding with and without drafts; ids
of a current vocabulary; now and then a prefill chunk past token 32767 first), checked against
the batched torch oracle (:func:`~eaglefuzz.oracles.tensor_steps_v2.combine_sampled_and_draft_tokens`)
and compared on the GPU (``input_ids``' other elements untouched included)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ....oracles.host_copy import host_to
from ...generation.strategies import INT16_MAX
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.runner_v2 import npow2
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    chosen,
    cumulative,
    draw_drafts,
    draw_rows,
    feature_sets,
    per_case_any,
    rows_of,
    state_rows,
)
from .cases import VOCABS
from .layout import NAME
from .record import TARGET

CHUNK = 8
"""One case in this many starts with a prefill chunk of 32768-36862 tokens (the tour's shape):
the logits of the rows after it past token 32767."""


def _places(b: DeviceBatch, device: str) -> dict[str, Any]:
    """What the batched oracle needs of ``b`` besides its arrays: each row's places (its case's
    state rows, ``[B + 1]`` entries, draft table, input ids and logits indices) and ``K``."""
    rows = rows_of(b.lengths, "idx_mapping", "prefill_len", device)
    K = np.asarray([shape[1] for shape in b.shapes["draft_tokens"]], dtype=np.int64)
    draft = np.asarray(b.lengths["draft_tokens"], dtype=np.int64)
    ids, logits = (np.asarray(b.outputs[n][1], dtype=np.int64) for n in ("input_ids", "logits_indices"))
    return {"rows": rows, "K": rows.per_row(K), "K_case": K, "state_base": rows.state_base, "cu_at": rows.cu_at,
            "draft_base": rows.per_row(np.cumsum(draft) - draft), "ids_base": rows.per_row(np.cumsum(ids) - ids),
            "logits_base": rows.per_row(np.cumsum(logits) - logits), "logits_total": int(logits.sum())}


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps: per case ``K`` (1-4 or 1-16 drafts), a vocabulary of the record's; per row
        its drafts ``d`` (0 to ``K``), its query (``d + 1`` tokens, now and then up to 40 more),
        its computed tokens (up to 64 or 4000) and its kind (decoding: a prompt before its
        drafts; prefilling: a prompt past its sequence; the prompt's tail: the logits start in
        the prompt; at the prompt's end), an end of each range one time in 16; the other state
        rows' prompts 1-4000, last sampled and draft tokens of the vocabulary. One case in
        :data:`CHUNK` starts with a prefill chunk past token 32767."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        rows = draw_rows(rng, k, device, max_requests)
        n, B, R = rows.n, rows.B, rows.R
        K = draw_drafts(rng, k)
        V = np.asarray(VOCABS)[rng.integers(0, len(VOCABS), size=k)]
        chunk = rows.per_row(rng.random(k) < 1 / CHUNK) & (rows.local == 0)
        zero = torch.zeros(n, dtype=torch.int64, device=device)
        d = chosen(gen, zero, rows.per_row(K))
        extra = torch.where(torch.rand(n, generator=gen, device=device) < 0.5, 0, chosen(gen, zero, zero + 40))
        qlen = d + 1 + extra
        c = chosen(gen, zero, torch.where(torch.rand(n, generator=gen, device=device) < 0.5, 64, 4000))
        seq = c + qlen
        kind = torch.randint(0, 4, (n,), generator=gen, device=device)
        one = zero + 1
        decode = chosen(gen, one, (seq - d - 1).clamp(min=1))
        prefill = seq + chosen(gen, one, zero + 64)
        tail = torch.where(d >= 1, chosen(gen, seq - d, seq - 1), seq - 1)
        prompt = torch.stack([decode, prefill, tail, seq])[kind, torch.arange(n, device=device)].clamp(min=1)
        long = chosen(gen, zero + INT16_MAX + 1, zero + INT16_MAX + 4095)  # a prefill chunk first
        d, qlen, c = torch.where(chunk, 0, d), torch.where(chunk, long, qlen), torch.where(chunk, 0, c)
        prompt = torch.where(chunk, long + chosen(gen, one, zero + 3999), prompt)
        seq = c + qlen
        s = state_rows(rows, gen)
        prompts = chosen(gen, torch.ones(int(R.sum()), dtype=torch.int64, device=device),
                         torch.full((int(R.sum()),), 4000, dtype=torch.int64, device=device))
        prompts[rows.state_base + s] = prompt
        Vs = host_to(V, device)
        owner = torch.repeat_interleave(torch.arange(k, device=device), host_to(R, device),
                                        output_size=int(R.sum()))
        last = (torch.rand(int(R.sum()), generator=gen, device=device, dtype=torch.float64) * Vs[owner]).long()
        per_draft = torch.repeat_interleave(torch.arange(k, device=device), host_to(R * K, device),
                                            output_size=int((R * K).sum()))
        drafts = (torch.rand(per_draft.numel(), generator=gen, device=device, dtype=torch.float64) * Vs[per_draft]).long()
        cat = {"idx_mapping": s, "last_sampled_tokens": last, "query_start_loc": cumulative(rows, qlen),
               "seq_lens": seq.to(torch.int32), "prefill_len": prompts.to(torch.int32), "draft_tokens": drafts,
               "cu_num_logits": cumulative(rows, d + 1)}
        # each case's tokens and logits: its outputs' sizes (one wait for the device per batch)
        sums = torch.zeros((k, 2), dtype=torch.int64, device=device)
        sums.index_add_(0, rows.cid, torch.stack([qlen, d + 1], 1))
        T, N = sums.cpu().numpy().T
        Bl, Rl = B.tolist(), R.tolist()
        lengths = {"idx_mapping": Bl, "last_sampled_tokens": Rl, "query_start_loc": [b + 1 for b in Bl], "seq_lens": Bl,
                   "prefill_len": Rl, "draft_tokens": (R * K).tolist(), "cu_num_logits": [b + 1 for b in Bl]}
        shapes = {n: [(x,) for x in lengths[n]] for n in cat} | {
            "last_sampled_tokens": [(r, 1) for r in Rl], "draft_tokens": [(r, kk) for r, kk in zip(Rl, K.tolist(), strict=True)]}
        return DeviceBatch(cat, lengths, shapes, {}, {},
                           {"input_ids": (torch.int32, T.tolist()), "logits_indices": (torch.int64, N.tolist())},
                           [{"num_reqs": b} for b in Bl])

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        a = b.cat
        p = _places(b, a["idx_mapping"].device.type)
        return tensor_steps_v2.combine_sampled_and_draft_tokens(
            **{n: a[n] for n in ("idx_mapping", "last_sampled_tokens", "query_start_loc", "seq_lens", "prefill_len",
                                 "draft_tokens", "cu_num_logits")},
            K=p["K"], state_base=p["state_base"], cu_at=p["cu_at"], draft_base=p["draft_base"], ids_base=p["ids_base"],
            logits_base=p["logits_base"], logits_total=p["logits_total"])


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        p = _places(b, a["idx_mapping"].device.type)
        rows, at = p["rows"], p["cu_at"]
        q, cu = a["query_start_loc"].long(), a["cu_num_logits"].long()
        qlen, nl = q[at + 1] - q[at], cu[at + 1] - cu[at]
        d = nl - 1
        seq = a["seq_lens"].long()
        L = a["prefill_len"].long()[p["state_base"] + a["idx_mapping"]]
        past = seq > L
        bonus = past & (seq - nl >= L)
        on = per_case_any(rows, {
            "prefilling_row": ~past, "prompt_tail_row": past & (seq - nl < L), "decoding_row": bonus,
            "drafts_written": past & (d > 0), "decoding_without_drafts": bonus & (d == 0),
            "query_longer_than_logits": qlen > nl, "permuted_state_rows": a["idx_mapping"] != rows.local})
        K = p["K_case"]
        on["block_wider"] = np.asarray([npow2(x + 1) > x + 1 for x in K.tolist()])
        on["several_rows"], on["many_requests"] = rows.B > 1, rows.B > 64
        T = np.asarray(b.outputs["input_ids"][1], dtype=np.int64)
        on["offsets_past_32767"] = T > INT16_MAX
        features = feature_sets(on, len(b))
        if writes is None:
            return features
        index, value = writes["input_ids"]
        bounds = host_to(np.cumsum(T)[:-1], index.device)
        big = torch.zeros(len(b), dtype=torch.int64, device=index.device)
        big.index_add_(0, torch.searchsorted(bounds, index, right=True), (value.long() > INT16_MAX).long())
        return [f | {"ids_past_32767"} if x else f for f, x in zip(features, (big > 0).tolist(), strict=True)]


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
