"""``_prepare_decode_inputs_kernel`` on the device (docs/CONTRACT.md §26): a Model Runner V2
kernel, fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the GPU 256
at a time, as its record's generator draws them (``K`` of 2 to 16 drafts, models of 64, 4096
and 131072 tokens with rows at their length, rejected drafts, positions and sample keys as the
drafter's prefill leaves them; EAGLE's advancing positions, Gemma4's constant ones), checked
against the batched torch oracle (:func:`~eaglefuzz.oracles.tensor_steps_v2.prepare_decode_inputs`)
and compared on the GPU (the padding past the batch included)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ...generation.strategies import INT16_MAX, MAX_NUM_SEQS
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.runner_v2 import MAX_MODEL_LEN
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    chosen,
    draw_drafts,
    draw_rows,
    feature_sets,
    per_case_any,
    rows_of,
)
from .layout import NAME
from .record import TARGET

MODELS = (64, 4096, MAX_MODEL_LEN)
VOCAB = 151936


def _sizes(b: DeviceBatch) -> dict[str, list]:
    sc = b.scalars
    return {"B": [s["num_reqs"] for s in sc], "R": [s["max_num_reqs"] for s in sc],
            "K": [shape[1] for shape in b.shapes["draft_tokens"]], "M": [s["max_model_len"] for s in sc],
            "advance": [s["ADVANCE_DRAFT_POSITIONS"] for s in sc]}


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps: per case ``K`` (2-4 or 2-16), a model length of :data:`MODELS`, advancing
        positions (four in five); per row its accepted sequence (1 to the model's length, or
        within 2 of it; an end one time in 32) and 0 to ``K`` rejected drafts; positions ``seq -
        1`` (then zeros), sample keys ``seq`` (then zeros); first drafts of a vocabulary."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        rows = draw_rows(rng, k, device, max_requests)
        B, R = rows.B, rows.R
        K = draw_drafts(rng, k, least=2)
        M = np.asarray(MODELS)[rng.integers(0, len(MODELS), size=k)]
        advance = rng.random(k) < 0.8
        Mr = rows.per_row(M)
        near = torch.rand(rows.n, generator=gen, device=device) < 0.5
        seq = chosen(gen, torch.where(near, Mr - 2, 1).clamp(min=1), Mr, ends=1 / 32)
        rejected = chosen(gen, torch.zeros_like(seq), rows.per_row(K), ends=1 / 32)
        pos = torch.zeros(int((R + 3).sum()), dtype=torch.int64, device=device)
        src = torch.zeros(int(R.sum()), dtype=torch.int64, device=device)
        pos[rows.per_row(np.cumsum(R + 3) - (R + 3)) + rows.local] = seq - 1
        src[rows.state_base + rows.local] = seq
        drafts = torch.randint(0, VOCAB, (int((R * K).sum()),), generator=gen, device=device)
        cat = {"draft_tokens": drafts, "target_seq_lens": (seq + rejected).to(torch.int32),
               "num_rejected": rejected.to(torch.int32), "positions": pos, "sample_src_positions": src}
        Bl, Rl = B.tolist(), R.tolist()
        lengths = {"draft_tokens": (R * K).tolist(), "target_seq_lens": Bl, "num_rejected": Bl,
                   "positions": (R + 3).tolist(), "sample_src_positions": Rl}
        shapes = {n: [(x,) for x in lengths[n]] for n in cat} | {"draft_tokens": [(r, int(x)) for r, x in zip(Rl, K, strict=True)]}
        scalars = [{"max_model_len": int(m), "max_num_reqs": r, "num_reqs": b, "ADVANCE_DRAFT_POSITIONS": bool(a)}
                   for m, r, b, a in zip(M, Rl, Bl, advance, strict=True)]
        return DeviceBatch(cat, lengths, shapes, {}, {},
                           {"input_ids": (torch.int32, Bl), "query_start_loc": (torch.int32, [r + 1 for r in Rl]),
                            "seq_lens": (torch.int32, Rl)}, scalars, inout=("positions", "sample_src_positions"))

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        return tensor_steps_v2.prepare_decode_inputs(**b.cat, **_sizes(b))


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        z = _sizes(b)
        rows = rows_of(b.lengths, "num_rejected", "sample_src_positions", a["num_rejected"].device.type)
        nr = a["num_rejected"].long()
        seq = a["target_seq_lens"].long() - nr
        R = np.asarray(z["R"], dtype=np.int64)
        pos = a["positions"][rows.per_row(np.cumsum(R + 3) - (R + 3)) + rows.local]
        adv, M = rows.per_row(np.asarray(z["advance"])), rows.per_row(np.asarray(z["M"], dtype=np.int64))
        on = per_case_any(rows, {"position_clamped": adv & (pos + 1 > M - 1), "length_clamped": adv & (seq + 1 > M),
                                 "rejected": nr > 0, "lengths_past_32767": seq > INT16_MAX})
        Bn, adv_c = rows.B, np.asarray(z["advance"])
        on |= {"advancing": adv_c, "constant_positions": ~adv_c, "padding": R > Bn, "no_padding": R == Bn,
               "several_rows": Bn > 1, "many_requests": Bn > 64, "max_num_seqs_1024": R >= MAX_NUM_SEQS}
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
