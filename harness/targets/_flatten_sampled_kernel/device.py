"""``_flatten_sampled_kernel`` on the device (docs/CONTRACT.md §24): a Model Runner V2 kernel,
fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the GPU 256 at a
time, as its record's generator draws them (``K`` of 1-4 or 1-16 drafts, each row ``d + 1``
logits and 1 to ``d + 1`` sampled tokens, ids of a vocabulary, ``-1`` or ``0`` past them),
checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_steps_v2.flatten_sampled`) and compared on the GPU (the
logits rows no token lands in untouched)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ....oracles.host_copy import host_to
from ...generation.strategies import INT16_MAX, MAX_NUM_SEQS
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
)
from .cases import VOCABS
from .layout import NAME
from .record import TARGET


def _places(b: DeviceBatch, device: str) -> dict[str, Any]:
    rows = rows_of(b.lengths, "num_sampled", None, device)
    W = np.asarray([shape[1] for shape in b.shapes["sampled"]], dtype=np.int64)
    size = rows.B * W
    N = np.asarray(b.outputs["flat_sampled"][1], dtype=np.int64)
    Wr = rows.per_row(W)
    return {"rows": rows, "W": W, "width": Wr, "sampled_base": rows.per_row(np.cumsum(size) - size) + rows.local * Wr,
            "cu_at": rows.cu_at, "out_base": rows.per_row(np.cumsum(N) - N)}


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps: per case ``K`` (1-4 or 1-16 drafts), a vocabulary of the record's, the
        filler past a row's tokens (``-1`` or ``0``), and whether rows reject (four cases in
        five) or keep every logit; per row ``d + 1`` logits (an end one time in 32) and its
        sampled count (1 to its logits, an end one time in 16)."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        rows = draw_rows(rng, k, device, max_requests)
        B = rows.B
        K = draw_drafts(rng, k)
        V = np.asarray(VOCABS)[rng.integers(0, len(VOCABS), size=k)]
        reject = rows.per_row(rng.random(k) < 0.8)
        tail = np.where(rng.random(k) < 0.5, -1, 0)
        one = torch.ones(rows.n, dtype=torch.int64, device=device)
        nl = chosen(gen, one, rows.per_row(K + 1), ends=1 / 32)
        ns = torch.where(reject, chosen(gen, one, nl), nl)
        W = K + 1
        size = B * W
        owner = torch.repeat_interleave(torch.arange(k, device=device), host_to(size, device),
                                        output_size=int(size.sum()))
        flat = torch.arange(int(size.sum()), device=device) - host_to(np.cumsum(size) - size, device)[owner]
        Wo = host_to(W, device)[owner]
        col, row = flat % Wo, flat // Wo + host_to(np.cumsum(B) - B, device)[owner]  # the batch's row
        ids = (torch.rand(owner.numel(), generator=gen, device=device, dtype=torch.float64)
               * host_to(V, device)[owner]).long()
        sampled = torch.where(col < ns[row], ids, host_to(tail, device)[owner])
        N = torch.zeros(k, dtype=torch.int64, device=device).index_add_(0, rows.cid, nl).cpu().numpy().tolist()
        Bl = B.tolist()
        cat = {"sampled": sampled, "num_sampled": ns.to(torch.int32), "cu_num_logits": cumulative(rows, nl)}
        lengths = {"sampled": size.tolist(), "num_sampled": Bl, "cu_num_logits": [b + 1 for b in Bl]}
        shapes = {"sampled": [(b, int(w)) for b, w in zip(Bl, W, strict=True)], "num_sampled": [(b,) for b in Bl],
                  "cu_num_logits": [(b + 1,) for b in Bl]}
        return DeviceBatch(cat, lengths, shapes, {}, {}, {"flat_sampled": (torch.int64, N)}, [{"num_reqs": b} for b in Bl])

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        p = _places(b, b.cat["sampled"].device.type)
        return tensor_steps_v2.flatten_sampled(**b.cat, width=p["width"], sampled_base=p["sampled_base"], cu_at=p["cu_at"],
                                               out_base=p["out_base"])


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        p = _places(b, a["sampled"].device.type)
        rows, at = p["rows"], p["cu_at"]
        cu = a["cu_num_logits"].long()
        nl, ns = cu[at + 1] - cu[at], a["num_sampled"].long()
        on = per_case_any(rows, {"all_kept": (nl > 1) & (ns == nl), "rejected": ns < nl, "no_drafts_row": nl == 1,
                                 "full_row": nl == p["width"], "unread_columns": ns < p["width"]})
        on |= {"several_rows": rows.B > 1, "many_requests": rows.B > 64, "beyond_1024_rows": rows.B > MAX_NUM_SEQS}
        features = feature_sets(on, len(b))
        if writes is None:
            return features
        index, value = writes["flat_sampled"]
        N = np.asarray(b.outputs["flat_sampled"][1], dtype=np.int64)
        big = torch.zeros(len(b), dtype=torch.int64, device=index.device)
        big.index_add_(0, torch.searchsorted(host_to(np.cumsum(N)[:-1], index.device), index, right=True),
                       (value > INT16_MAX).long())
        return [f | {"ids_past_32767"} if x else f for f, x in zip(features, (big > 0).tolist(), strict=True)]


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
