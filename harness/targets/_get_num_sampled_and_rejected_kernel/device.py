"""``_get_num_sampled_and_rejected_kernel`` on the device (docs/CONTRACT.md §18): a Model Runner
V2 kernel, fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the GPU
256 at a time, as its record's generator draws them (the rejection sampler's counts, or the
plain sampler's batch of one logit per row; rows still prefilling in chunks, at their prompt's
end, decoding; now and then a long context past 32767 tokens), checked against the batched
torch oracle (:func:`~eaglefuzz.oracles.tensor_steps_v2.get_num_sampled_and_rejected`) and
compared on the GPU, ``num_sampled`` updated in place included."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ...generation.strategies import INT16_MAX
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.runner_v2 import MAX_MODEL_LEN
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    cumulative,
    draw_drafts,
    draw_rows,
    feature_sets,
    per_case_any,
    rows_of,
    state_rows,
    uniform,
)
from .layout import NAME
from .record import TARGET

LONG = 4
"""One case in this many has long contexts: half its rows' sequences past 32767 tokens (the
tour's shape among ordinary rows)."""


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps: per case ``K`` (1-4 or 1-16 drafts), the plain sampler's batch (one in
        five), long contexts (one in :data:`LONG`); per row its logits (1 to ``K + 1``), its
        sampled tokens (1 to its logits), its sequence (its logits to 64 or 20000, an end one
        time in 16; half a long-context case's past 32767) and its kind (decoding: a prompt shorter;
        chunked: longer; at the prompt's end: as long); the other state rows' prompts 1-4096."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        rows = draw_rows(rng, k, device, max_requests)
        n = rows.n
        K = draw_drafts(rng, k)
        sampler, long = rows.per_row(rng.random(k) < 0.2), rows.per_row(rng.random(k) < 1 / LONG)
        long &= torch.rand(n, generator=gen, device=device) < 0.5
        one = torch.ones(n, dtype=torch.int64, device=device)
        nl = torch.where(sampler, one, uniform(gen, one, rows.per_row(K + 1)))
        ns = uniform(gen, one, nl)
        u = torch.rand((3, n), generator=gen, device=device)
        hi = torch.where(u[0] < 0.5, 64, 20000)
        lo = torch.where(long, INT16_MAX + 1, nl)
        hi = torch.where(long, MAX_MODEL_LEN - 16, hi)
        seq = uniform(gen, lo, hi)
        seq = torch.where(u[1] < 1 / 16, torch.where(u[2] < 0.5, lo, hi), seq)
        kind = torch.randint(0, 3, (n,), generator=gen, device=device)
        decode = torch.where(seq > 1, uniform(gen, one, (seq - 1).clamp(min=1)), one)
        chunked = seq + uniform(gen, one, torch.where(long, 4096, 500))
        prompt = torch.where(kind == 0, decode, torch.where(kind == 1, chunked, seq))
        s = state_rows(rows, gen)
        prefill = torch.randint(1, 4097, (int(rows.R.sum()),), generator=gen, device=device)
        prefill[rows.state_base + s] = prompt
        B, R = rows.B.tolist(), rows.R.tolist()
        cat = {"num_sampled": ns.to(torch.int32), "seq_lens": seq.to(torch.int32), "cu_num_logits": cumulative(rows, nl),
               "idx_mapping": s, "prefill_len": prefill.to(torch.int32)}
        lengths = {"num_sampled": B, "seq_lens": B, "cu_num_logits": [b + 1 for b in B], "idx_mapping": B, "prefill_len": R}
        return DeviceBatch(cat, lengths, {n: [(x,) for x in lengths[n]] for n in cat}, {}, {},
                           {"num_rejected": (torch.int32, B)}, [{"num_reqs": b} for b in B], inout=("num_sampled",))

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        a = b.cat
        rows = rows_of(b.lengths, "idx_mapping", "prefill_len", a["idx_mapping"].device.type)
        return tensor_steps_v2.get_num_sampled_and_rejected(
            num_sampled=a["num_sampled"], seq_lens=a["seq_lens"], cu_num_logits=a["cu_num_logits"],
            idx_mapping=a["idx_mapping"], prefill_len=a["prefill_len"], state_base=rows.state_base, cu_at=rows.cu_at)


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        rows = rows_of(b.lengths, "idx_mapping", "prefill_len", a["idx_mapping"].device.type)
        cu = a["cu_num_logits"].long()
        nl = cu[rows.cu_at + 1] - cu[rows.cu_at]
        ns, seq, s = a["num_sampled"].long(), a["seq_lens"].long(), a["idx_mapping"]
        L = a["prefill_len"].long()[rows.state_base + s]
        chunked = seq < L
        on = per_case_any(rows, {
            "chunked_row": chunked, "prompt_end_row": seq == L, "decode_row": seq > L,
            "all_accepted": ~chunked & (nl > 1) & (ns == nl), "some_rejected": ~chunked & (ns < nl),
            "not_sampler": nl != 1, "permuted_state_rows": s != rows.local,
            "seq_lens_past_32767": seq > INT16_MAX, "prompts_past_32767": chunked & (L > INT16_MAX)})
        on["sampler_batch"] = ~on.pop("not_sampler")
        on["several_rows"], on["many_requests"] = rows.B > 1, rows.B > 64
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
