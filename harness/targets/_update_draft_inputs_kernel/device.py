"""``_update_draft_inputs_kernel`` on the device (docs/CONTRACT.md §27): a Model Runner V2 kernel,
fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the GPU 256 at a
time, as its record's generator draws them (``K`` of 2 to 16 steps, any step after the first,
hidden states of finite bits, signed zeros and subnormals among them, up to 5120 wide for
batches of up to 128 rows; models of 64, 4096 and 131072 tokens with rows at their length;
advancing and constant positions), checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_steps_v2.update_draft_inputs`) and compared on the GPU, bit
for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ....oracles.host_copy import host_to
from ...generation.strategies import MAX_NUM_SEQS
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
    segments_any,
)
from .cases import HIDDEN
from .layout import NAME
from .record import BLOCK, TARGET

MODELS = (64, 4096, MAX_MODEL_LEN)
VOCAB = 151936
BITS = ((0, 2**23), (0, 0x7F7FFFFF), (-(2**31), -(2**31) + 2**23))
"""A hidden element's float32 bits, one range of three each (the record's): zeros and
subnormals, any finite positive value, negative zeros and subnormals."""


def _sizes(b: DeviceBatch) -> dict[str, list]:
    sc = b.scalars
    return {"B": [s["num_reqs"] for s in sc], "P": b.lengths["positions"], "H": [shape[1] for shape in b.shapes["hidden_states"]],
            "K": [s["num_speculative_steps"] for s in sc], "M": [s["max_model_len"] for s in sc],
            "advance": [s["ADVANCE_DRAFT_POSITIONS"] for s in sc]}


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps: per case ``K`` (2-4 or 2-16; 16 one case in 8), its step (1 to ``K - 1``,
        an end one time in 4), a hidden size of :data:`~.cases.HIDDEN` that keeps the states
        within 2 MiB, a model length, advancing positions (four in five) and up to 8 entries
        past the batch; per row its accepted sequence (1 to the model's length, or within 2 of
        it), a first draft of a vocabulary, its hidden state's bits (:data:`BITS`)."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        rows = draw_rows(rng, k, device, max_requests)
        B = rows.B
        K = draw_drafts(rng, k, least=2)
        step = np.where(rng.random(k) < 0.25, np.where(rng.random(k) < 0.5, 1, K - 1), rng.integers(1, K))
        H = np.asarray([rng.choice([h for h in HIDDEN if h * b <= 1 << 19] or [HIDDEN[0]]) for b in B.tolist()])
        M = np.asarray(MODELS)[rng.integers(0, len(MODELS), size=k)]
        advance = rng.random(k) < 0.8
        extra = rng.integers(0, 9, size=k)
        P = B + extra
        Mr = rows.per_row(M)
        near = torch.rand(rows.n, generator=gen, device=device) < 0.5
        seq = chosen(gen, torch.where(near, Mr - 2, 1).clamp(min=1), Mr, ends=1 / 32)
        at = rows.per_row(np.cumsum(P) - P) + rows.local
        pos, lens, src = (torch.zeros(int(P.sum()), dtype=torch.int64, device=device) for _ in range(3))
        pos[at], lens[at], src[at] = seq - 1, seq, seq
        n = int((B * H).sum())
        lo, hi = np.asarray(BITS).T
        which = torch.randint(0, 3, (n,), generator=gen, device=device)
        bits = chosen(gen, host_to(lo, device)[which], host_to(hi, device)[which], ends=1 / 32)
        cat = {"positions": pos, "sample_src_positions": src, "seq_lens": lens.to(torch.int32),
               "draft_tokens": torch.randint(0, VOCAB, (rows.n,), generator=gen, device=device),
               "current_draft_step": host_to(step, device),
               "hidden_states": bits.to(torch.int32).view(torch.float32)}
        Bl, Pl = B.tolist(), P.tolist()
        lengths = {"positions": Pl, "sample_src_positions": Pl, "seq_lens": Pl, "draft_tokens": Bl,
                   "current_draft_step": [1] * k, "hidden_states": (B * H).tolist()}
        shapes = {x: [(y,) for y in lengths[x]] for x in cat} | {
            "hidden_states": [(b, int(h)) for b, h in zip(Bl, H, strict=True)]}
        outputs = {"output_draft_tokens": (torch.int64, (B * K).tolist()), "next_input_hidden_states": (torch.float32, (B * H).tolist()),
                   "input_ids": (torch.int32, Bl)}
        scalars = [{"max_model_len": int(m), "num_speculative_steps": int(x), "num_reqs": b, "ADVANCE_DRAFT_POSITIONS": bool(a)}
                   for m, x, b, a in zip(M, K, Bl, advance, strict=True)]
        host = [{"shapes": {"output_draft_tokens": (b, int(x)), "next_input_hidden_states": (b, int(h))}}
                for b, x, h in zip(Bl, K, H, strict=True)]
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, scalars, host=host,
                           inout=("positions", "sample_src_positions", "seq_lens"))

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        return tensor_steps_v2.update_draft_inputs(**b.cat, **_sizes(b))


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        z = _sizes(b)
        rows = rows_of(b.lengths, "draft_tokens", "positions", a["draft_tokens"].device.type)
        step = a["current_draft_step"].cpu().numpy()
        K, H, adv = (np.asarray(z[x]) for x in ("K", "H", "advance"))
        mid = step < K - 1
        at = rows.state_base + rows.local
        M = rows.per_row(np.asarray(z["M"], dtype=np.int64))
        moving = rows.per_row(mid & adv)
        bits = a["hidden_states"].view(torch.int32)
        magnitude = bits & 0x7FFFFFFF
        odd_any = segments_any((bits == -(2**31)) | ((magnitude > 0) & (magnitude < 0x00800000)), rows.B * H)
        on = per_case_any(rows, {"position_clamped": moving & (a["positions"][at] + 1 > M - 1),
                                 "length_clamped": moving & (a["seq_lens"].long()[at] + 1 > M)})
        Bn = rows.B
        on |= {"middle_step": mid, "last_step": ~mid, "advancing": adv, "constant_positions": ~adv,
               "signed_zeros_and_subnormals": odd_any, "several_rows": Bn > 1, "many_requests": Bn > 64,
               "hidden_past_1024": H > BLOCK, "beyond_1024_rows": Bn > MAX_NUM_SEQS}
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
