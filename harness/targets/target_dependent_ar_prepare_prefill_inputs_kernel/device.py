"""``target_dependent_ar_prepare_prefill_inputs_kernel`` on the device (docs/CONTRACT.md §25): a
Model Runner V2 kernel, fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn
on the GPU 256 at a time, as its record's generator draws them (rows still prefilling a chunk,
rows that verified their drafts and rejected some, chunks of up to 2048 tokens, counts of up to
100000; now and then a ``max_num_reqs`` of 2048 and more), checked against the batched torch
oracle (:func:`~eaglefuzz.oracles.tensor_steps_v2.target_dependent_ar_prepare_prefill_inputs`)
and compared on the GPU (the rejected tokens' slots and the padding included)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ...targetkit.device_batch import DeviceBatch
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
from .layout import NAME
from .record import BLOCK, TARGET

VOCAB = 32000
WIDE = 8
"""One case in this many has 1025 to 3072 more state rows than rows (the padding past one block)."""


def _sizes(b: DeviceBatch) -> dict[str, list[int]]:
    return {"B": b.lengths["idx_mapping"], "R": b.lengths["last_sampled"], "T": b.lengths["target_input_ids"],
            "lookahead": [shape[0] for shape in b.shapes["next_prefill_tokens"]]}


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps: per case ``K`` (16 one case in 8), the longest chunk (8 or 2048), its
        state rows (:data:`WIDE`) and 1 to 4 lookahead rows; per row its computed count (up to
        64 or 100000), and a chunk still prefilling (three in ten: up to the longest, nothing
        sampled) or ``nl`` logits (1 to ``K + 1``) in a query of ``nl`` tokens or a chunk ending
        in them, up to ``nl - 1`` rejected; ends one time in 16; ids of a 32000-id vocabulary."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        rows = draw_rows(rng, k, device, max_requests)
        R = rows.R + np.where(rng.random(k) < 1 / WIDE, rng.integers(BLOCK + 1, 3 * BLOCK + 1, size=k), 0)
        rows = rows_of({"b": rows.B.tolist(), "r": R.tolist()}, "b", "r", device)
        n = rows.n
        K = draw_drafts(rng, k)
        long = np.where(rng.random(k) < 0.5, 8, 2048)
        L = rng.integers(1, 5, size=k)
        zero = torch.zeros(n, dtype=torch.int64, device=device)
        one = zero + 1
        Lr = rows.per_row(long)
        u = torch.rand((3, n), generator=gen, device=device)
        c = chosen(gen, zero, torch.where(u[0] < 0.5, 64, 100000))
        chunked = u[1] < 0.3
        nl = chosen(gen, one, rows.per_row(K + 1))
        qlen = torch.where(u[2] < 0.5, nl, chosen(gen, nl, torch.maximum(nl, Lr)))
        rejected = chosen(gen, zero, nl - 1)
        qlen = torch.where(chunked, chosen(gen, one, Lr), qlen)
        ns, nr = torch.where(chunked, 0, nl - rejected), torch.where(chunked, 0, rejected)
        s = state_rows(rows, gen)
        T = torch.zeros(k, dtype=torch.int64, device=device).index_add_(0, rows.cid, qlen).cpu().numpy()
        total = int(T.sum())
        pos = torch.repeat_interleave(c - (torch.cumsum(qlen, 0) - qlen), qlen, output_size=total)  # c - the row's first
        pos += torch.arange(total, device=device)
        cat = {"target_input_ids": torch.randint(0, VOCAB, (total,), generator=gen, device=device, dtype=torch.int32),
               "target_positions": pos, "idx_mapping": s,
               "last_sampled": torch.randint(0, VOCAB, (int(R.sum()),), generator=gen, device=device),
               "next_prefill_tokens": torch.randint(0, VOCAB, (int((L * R).sum()),), generator=gen, device=device,
                                                    dtype=torch.int32),
               "num_sampled": ns.to(torch.int32), "num_rejected": nr.to(torch.int32),
               "query_start_loc": cumulative(rows, qlen), "seq_lens": (c + qlen).to(torch.int32)}
        Bl, Rl, Tl = rows.B.tolist(), R.tolist(), T.tolist()
        lengths = {"target_input_ids": Tl, "target_positions": Tl, "idx_mapping": Bl, "last_sampled": Rl,
                   "next_prefill_tokens": (L * R).tolist(), "num_sampled": Bl, "num_rejected": Bl,
                   "query_start_loc": [b + 1 for b in Bl], "seq_lens": Bl}
        shapes = {x: [(y,) for y in lengths[x]] for x in cat} | {
            "last_sampled": [(r, 1) for r in Rl], "next_prefill_tokens": [(int(x), r) for x, r in zip(L, Rl, strict=True)]}
        outputs = {"last_token_indices": (torch.int64, Rl), "draft_current_step": (torch.int64, [1] * k),
                   "draft_input_ids": (torch.int32, Tl), "draft_positions": (torch.int64, Tl),
                   "draft_query_start_loc": (torch.int32, [r + 1 for r in Rl]), "draft_seq_lens": (torch.int32, Rl)}
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs,
                           [{"max_num_reqs": r, "num_reqs": b} for r, b in zip(Rl, Bl, strict=True)])

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        return tensor_steps_v2.target_dependent_ar_prepare_prefill_inputs(**b.cat, **_sizes(b))


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        rows = rows_of(b.lengths, "idx_mapping", "last_sampled", a["idx_mapping"].device.type)
        q = a["query_start_loc"].long()
        qlen = q[rows.cu_at + 1] - q[rows.cu_at]
        ns, nr = a["num_sampled"].long(), a["num_rejected"].long()
        keep = qlen - nr
        on = per_case_any(rows, {"chunked_row": ns <= 0, "sampled_row": ns > 0, "rejected_tokens": nr > 0,
                                 "nothing_rejected": (ns > 0) & (nr == 0), "one_token_kept": keep == 1,
                                 "permuted_state_rows": a["idx_mapping"] != rows.local, "query_past_1024": keep > BLOCK + 1})
        B, R = rows.B, rows.R
        on |= {"padding": R > B, "no_padding": R == B, "several_rows": B > 1, "many_requests": B > 64,
               "padding_past_1024": R - B > BLOCK}
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
