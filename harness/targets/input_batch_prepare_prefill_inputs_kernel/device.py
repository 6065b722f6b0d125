"""``input_batch_prepare_prefill_inputs_kernel`` on the device (docs/CONTRACT.md §14): a Model
Runner V2 kernel, fuzzed with production steps of up to 1024 rows (a tail to 4096) drawn on the
GPU 256 at a time (:attr:`~...targetkit.step_batch.StepBatchDevice.batch`; each case holds its
state's token table, up to ``[4136, 2048]``: some 670 MiB of inputs and outputs a batch on
average, within :data:`~...targetkit.device_draws.MAX_TABLE` elements by far), as its
record's generator draws them (prefilling rows' first, middle and last chunks, decoding rows,
1 to 8 lookahead tokens; now and then a 40000-token context of a few rows, its chunks past
token 32767), checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_steps_v2.input_batch_prepare_prefill_inputs`) and compared on
the GPU (the lookahead columns of other state rows untouched)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_steps_v2
from ....oracles.host_copy import host_to
from ...generation.strategies import INT16_MAX
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.runner_v2 import BLOCK, npow2
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    StepBatchDevice,
    chosen,
    cumulative,
    draw_rows,
    feature_sets,
    owners,
    per_case_any,
    rows_of,
    state_rows,
)
from .layout import NAME
from .record import TARGET

WIDTHS = (16, 64, 2048)
"""A case's model length (``all_token_ids``' width), the record's."""
LONG = 8
"""One case in this many is a 40000-token context of at most 8 rows (the tour's shape)."""
LOOKAHEAD = (1, 1, 2, 3, 4, 8)


def _sizes(b: DeviceBatch) -> dict[str, list[int]]:
    return {"B": b.lengths["idx_mapping"], "R": b.lengths["prefill_len"],
            "W": [shape[1] for shape in b.shapes["all_token_ids"]], "T": b.outputs["input_ids"][1],
            "lookahead": [sc["num_lookahead"] for sc in b.scalars]}


class _Device(StepBatchDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` steps: per case a model length of :data:`WIDTHS` (or a long context,
        :data:`LONG`) and a lookahead of :data:`LOOKAHEAD`; per row prefilling (six in ten: a
        prompt of 1 to ``W`` tokens, the first chunk or one after computed tokens, ending the
        prompt or not; in a long context, past token 32767 half the time) or decoding past its
        prompt (up to 17 tokens); the other state rows' prompts and counts within ``W``; a
        token table of ids below 32000."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        rows = draw_rows(rng, k, device, max_requests)
        long = rng.random(k) < 1 / LONG
        B = np.where(long, np.minimum(rows.B, rng.integers(3, 9, size=k)), rows.B)
        R = np.where(long, B + rng.integers(0, 3, size=k), rows.R - rows.B + B)
        rows = rows_of({"b": B.tolist(), "r": R.tolist()}, "b", "r", device)
        W = np.where(long, 40000, np.asarray(WIDTHS)[rng.integers(0, len(WIDTHS), size=k)])
        n = rows.n
        zero = torch.zeros(n, dtype=torch.int64, device=device)
        one = zero + 1
        Wr, longr = rows.per_row(W), rows.per_row(long)
        u = torch.rand((4, n), generator=gen, device=device)
        L = chosen(gen, one, Wr)
        deep = longr & (L > INT16_MAX + 1) & (u[3] < 0.5)  # a long prompt's chunk past token 32767
        count = torch.where(u[0] < 0.5, 0, chosen(gen, zero, L - 1))
        count = torch.where(deep, chosen(gen, zero + INT16_MAX + 1, L - 1), count)
        qlen = torch.where(u[1] < 0.5, L - count, chosen(gen, one, L - count))
        Ld = chosen(gen, one, (Wr - 1).clamp(min=1))  # a decoding row's prompt and count
        cd = chosen(gen, Ld, Wr - 1)
        qd = chosen(gen, one, torch.minimum(zero + 17, Wr - cd).clamp(min=1))
        decode = u[2] >= 0.6
        L, count, qlen = torch.where(decode, Ld, L), torch.where(decode, cd, count), torch.where(decode, qd, qlen)
        s = state_rows(rows, gen)
        owner = owners(R, device)
        prefill = chosen(gen, torch.ones(int(R.sum()), dtype=torch.int64, device=device),
                         host_to(W, device)[owner])
        counts = chosen(gen, torch.zeros(int(R.sum()), dtype=torch.int64, device=device),
                        host_to(W, device)[owner])
        prefill[rows.state_base + s], counts[rows.state_base + s] = L, count
        table = torch.randint(0, 32000, (int((R * W).sum()),), generator=gen, device=device, dtype=torch.int32)
        T = torch.zeros(k, dtype=torch.int64, device=device).index_add_(0, rows.cid, qlen).cpu().numpy().tolist()
        look = np.asarray(LOOKAHEAD)[rng.integers(0, len(LOOKAHEAD), size=k)]
        Bl, Rl = B.tolist(), R.tolist()
        cat = {"idx_mapping": s, "query_start_loc": cumulative(rows, qlen), "all_token_ids": table,
               "prefill_len": prefill.to(torch.int32), "num_computed_tokens": counts.to(torch.int32)}
        lengths = {"idx_mapping": Bl, "query_start_loc": [b + 1 for b in Bl], "all_token_ids": (R * W).tolist(),
                   "prefill_len": Rl, "num_computed_tokens": Rl}
        shapes = {x: [(y,) for y in lengths[x]] for x in cat} | {
            "all_token_ids": [(r, int(w)) for r, w in zip(Rl, W, strict=True)]}
        host = [{"shapes": {"next_prefill_tokens": (int(x), r)}} for x, r in zip(look, Rl, strict=True)]
        return DeviceBatch(cat, lengths, shapes, {}, {},
                           {"input_ids": (torch.int32, T), "next_prefill_tokens": (torch.int32, (look * R).tolist())},
                           [{"num_reqs": b, "num_lookahead": int(x)} for b, x in zip(Bl, look, strict=True)], host=host)

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, Any]]:
        return tensor_steps_v2.input_batch_prepare_prefill_inputs(**b.cat, **_sizes(b))


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        a = b.cat
        z = _sizes(b)
        rows = rows_of(b.lengths, "idx_mapping", "prefill_len", a["idx_mapping"].device.type)
        q = a["query_start_loc"].long()
        qlen = q[rows.cu_at + 1] - q[rows.cu_at]
        st = rows.state_base + a["idx_mapping"]
        c, L = a["num_computed_tokens"].long()[st], a["prefill_len"].long()[st]
        pre = c < L
        n = rows.per_row(np.asarray(z["lookahead"], dtype=np.int64))
        end = c + qlen
        on = per_case_any(rows, {
            "decoding_row": ~pre, "first_chunk": pre & (c == 0), "later_chunk": pre & (c > 0),
            "last_chunk": pre & (end == L), "lookahead_in_prompt": pre & (end < L),
            "lookahead_past_prompt": pre & (end + n - 1 >= L), "permuted_state_rows": a["idx_mapping"] != rows.local,
            "chunk_past_1024": pre & (qlen > BLOCK), "prompt_past_32767": pre & (c > INT16_MAX)})
        look = np.asarray(z["lookahead"])
        on |= {"several_lookahead": look > 1, "lookahead_block_wider": np.asarray([npow2(int(x)) > x for x in look]),
               "untouched_state_rows": rows.R > rows.B, "several_rows": rows.B > 1, "many_requests": rows.B > 64}
        return feature_sets(on, len(b))


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
