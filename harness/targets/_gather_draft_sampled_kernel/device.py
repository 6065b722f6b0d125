"""``_gather_draft_sampled_kernel`` on the device (docs/CONTRACT.md §23): a Model Runner V2
kernel, fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the GPU 256
at a time, as its record's generator draws them (decoding rows, rows whose step starts inside
the prompt, prefill chunks; models of 4096 and 131072 tokens), checked against the batched
torch oracle (:func:`~eaglefuzz.oracles.tensor_steps_v2.gather_draft_sampled`) and compared on
the GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ....oracles.host_copy import host_to
from ...generation.strategies import INT16_MAX
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    chosen,
    draw_drafts,
    draw_rows,
    feature_sets,
    per_case_sum,
    rows_of,
    state_rows,
)
from .layout import NAME
from .record import BLOCK, TARGET

MODELS = (4096, 4096, 131072)
"""``max_model_len`` of a case (the record's: most batches' positions below 32767)."""
VOCAB = 151936


def _places(b: DeviceBatch, device: str) -> tuple[Any, torch.Tensor]:
    """The logits rows of ``b`` (:class:`~...targetkit.step_batch.Rows`: per case its
    ``num_logits``, over its state rows) and where each one's case's tokens start."""
    rows = rows_of(b.lengths, "logits_indices", "prefill_len", device)
    T = np.asarray(b.lengths["input_ids"], dtype=np.int64)
    return rows, rows.per_row(np.cumsum(T) - T)


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps: per case ``K`` (1-4 or 1-16 drafts) and a model length of
        :data:`MODELS`; per row its logits (1 to ``K + 1``), its query (as many tokens, or up
        to 30 more), its computed tokens (up to 64, or to the model's length) and its kind
        (decoding past its prompt; starting inside it: its draft slots placeholders; a prefill
        chunk: one logit), an end of each range one time in 16; positions ``c + i``; input ids
        of a 151936-token vocabulary; the other state rows' prompts up to the model's length."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        rows = draw_rows(rng, k, device, max_requests)
        n, R = rows.n, rows.R
        K = draw_drafts(rng, k)
        M = np.asarray(MODELS)[rng.integers(0, len(MODELS), size=k)]
        zero = torch.zeros(n, dtype=torch.int64, device=device)
        one = zero + 1
        nl = chosen(gen, one, rows.per_row(K + 1))
        half = torch.rand((2, n), generator=gen, device=device) < 0.5
        qlen = nl + torch.where(half[0], 0, chosen(gen, zero, zero + 30))
        c = chosen(gen, zero, torch.where(half[1], 64, rows.per_row(M) - 64))
        first = c + qlen - nl
        kind = torch.randint(0, 3, (n,), generator=gen, device=device)  # decode, inside, prefill
        inside = first + chosen(gen, one, nl)
        decode = torch.where(first >= 1, chosen(gen, one, first.clamp(min=1)), inside)
        prompt = torch.where(kind == 0, decode, torch.where(kind == 1, inside, c + qlen + chosen(gen, zero, zero + 64)))
        nl = torch.where(kind == 2, 1, nl)
        s = state_rows(rows, gen)
        sums = torch.zeros((k, 2), dtype=torch.int64, device=device)
        sums.index_add_(0, rows.cid, torch.stack([qlen, nl], 1))
        T, N = (x.astype(np.int64) for x in sums.cpu().numpy().T)  # the batch's one wait for the device
        row = torch.repeat_interleave(torch.arange(n, device=device), qlen, output_size=int(T.sum()))
        end = torch.cumsum(qlen, 0)
        positions = c[row] + torch.arange(int(T.sum()), device=device) - (end - qlen)[row]
        ids = torch.randint(0, VOCAB, (int(T.sum()),), generator=gen, device=device, dtype=torch.int32)
        lrow = torch.repeat_interleave(torch.arange(n, device=device), nl, output_size=int(N.sum()))
        i = torch.arange(int(N.sum()), device=device) - (torch.cumsum(nl, 0) - nl)[lrow]
        local_end = end - rows.per_row(np.cumsum(T) - T)
        owner = torch.repeat_interleave(torch.arange(k, device=device), host_to(R, device),
                                        output_size=int(R.sum()))
        prefill = chosen(gen, torch.ones(int(R.sum()), dtype=torch.int64, device=device), host_to(M, device)[owner])
        prefill[rows.state_base + s] = prompt
        cat = {"input_ids": ids, "positions": positions, "logits_indices": local_end[lrow] - nl[lrow] + i,
               "expanded_idx_mapping": s[lrow], "expanded_local_pos": i.to(torch.int32), "prefill_len": prefill.to(torch.int32)}
        Tl, Nl = T.tolist(), N.tolist()
        lengths = {"input_ids": Tl, "positions": Tl, "logits_indices": Nl, "expanded_idx_mapping": Nl,
                   "expanded_local_pos": Nl, "prefill_len": R.tolist()}
        return DeviceBatch(cat, lengths, {x: [(y,) for y in lengths[x]] for x in cat}, {}, {},
                           {"draft_sampled": (torch.int32, Nl), "pos": (torch.int64, Nl)},
                           [{"num_logits": x} for x in Nl])

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        a = b.cat
        rows, token_base = _places(b, a["input_ids"].device.type)
        return tensor_steps_v2.gather_draft_sampled(**a, state_base=rows.state_base, token_base=token_base)


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        rows, token_base = _places(b, a["input_ids"].device.type)  # the logits rows
        ti = a["logits_indices"]
        lp = a["expanded_local_pos"].long()
        p = a["positions"][token_base + ti]
        L = a["prefill_len"].long()[rows.state_base + a["expanded_idx_mapping"]]
        placeholder = (lp > 0) & (p - lp < L)
        start = lp == 0
        last = rows.local == host_to(rows.B, ti.device)[rows.cid] - 1
        after = torch.cat([lp[1:], lp.new_zeros(1)])  # the next logits row's local position
        before = torch.cat([ti.new_full((1,), -1), ti[:-1]])
        before = torch.where(rows.local == 0, -1, before)  # the last token of the row before, in its case
        on = per_case_sum(rows, {
            "draft_slot": (lp > 0) & ~placeholder, "placeholder_slot": placeholder,
            "prefill_row": start & (last | (after == 0)), "query_longer_than_logits": start & (ti > before + 1),
            "positions_past_32767": p > INT16_MAX, "rows": start})
        count = on.pop("rows")
        on = {f: v > 0 for f, v in on.items()}
        N = rows.B  # each case's logits rows
        on |= {"bonus_slot": N > 0, "several_rows": count > 1, "many_requests": count > 64, "logits_past_1024": N > BLOCK}
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
