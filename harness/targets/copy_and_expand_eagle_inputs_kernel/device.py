"""``copy_and_expand_eagle_inputs_kernel`` on the device (docs/CONTRACT.md §1): production
batches of up to 4096 requests, mostly decodes of ``K + 1`` tokens with some prefills of
thousands, drawn on the GPU, within the production preconditions of §1.2 as the fuzz and bulk
modes draw them (vocabulary ids, consecutive positions below ``max_model_len``, padding id 0,
vLLM's launch)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ...generation.strategies import query_start_loc_from
from ...targetkit.device import DeviceCase, DeviceTarget
from .record import TARGET

MAX_REQUESTS = 4096
MAX_TOKENS = 1 << 20
"""Tokens of one batch at most (vLLM's ``max_num_batched_tokens`` is 8k to 64k, and more on
servers tuned for throughput)."""
VOCAB_IDS = (0, 2**31 - 1)
"""Token ids of the production tier (docs/CONTRACT.md §1.2): vocabulary ids, >= 0 (the bound is
``randint``'s exclusive high)."""


class CopyAndExpandDevice(DeviceTarget):
    name = "copy_and_expand_eagle_inputs_kernel"
    launch_names = TARGET.launch_names

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        R = int(np.exp(rng.uniform(0, np.log(max_requests + 1))))
        K = int(rng.integers(1, 16))
        lengths = rng.integers(1, K + 2, size=R)
        prefills = rng.random(R) < rng.choice([0.0, 0.01, 0.05, 0.3])
        lengths[prefills] = rng.integers(16, 8193 if max_requests == MAX_REQUESTS else 64, size=int(prefills.sum()))
        while lengths.sum() > MAX_TOKENS:  # a batch fits max_num_batched_tokens
            lengths = lengths[: max(1, len(lengths) // 2)]
        R, T = len(lengths), int(lengths.sum())
        rejected = (rng.random(R) * lengths).astype(np.int64)
        shift = bool(rng.integers(0, 2))
        P = int(rng.integers(2, 17)) if shift else int(rng.choice([1, int(rng.integers(1, 17))]))
        qsl = query_start_loc_from(lengths.tolist())
        qel = (qsl[1:] - 1 - rejected).astype(np.int32)
        lens = torch.from_numpy(lengths).to(device)
        p0 = torch.randint(0, int(rng.choice([1 << 12, 1 << 21, 10_000_000])), (R,), generator=gen, device=device)
        local = torch.arange(T, device=device) - torch.repeat_interleave(torch.cumsum(lens, 0) - lens, lens, output_size=T)
        positions = torch.repeat_interleave(p0, lens, output_size=T) + local
        inputs = {
            "target_token_ids": torch.randint(*VOCAB_IDS, (T,), generator=gen, device=device, dtype=torch.int32),
            "target_positions": positions,
            "next_token_ids": torch.randint(*VOCAB_IDS, (R,), generator=gen, device=device, dtype=torch.int32),
            "query_start_loc": torch.from_numpy(qsl).to(device),
            "query_end_loc": torch.from_numpy(qel).to(device),
        }
        n_out = T + R * (P - int(shift))
        outputs = {
            "out_input_ids": (torch.int32, n_out),
            "out_positions": (torch.int64, n_out),
            "out_is_rejected_token_mask": (torch.bool, n_out),
            "out_is_masked_token_mask": (torch.bool, n_out),
            "out_new_token_indices": (torch.int32, R * P),
            "out_hidden_state_mapping": (torch.int32, T),
        }
        scalars = {
            "padding_token_id": 0,
            "parallel_drafting_token_id": int(rng.integers(0, 1 << 18)),
            "total_input_tokens": T,
            "num_padding_slots_per_request": P,
            "shift_input_ids": shift,
        }
        return DeviceCase(inputs, outputs, scalars, {"max_query_len": int(lengths.max())})

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return tensor_ops.copy_and_expand_eagle_inputs(**dc.inputs, **dc.scalars, tokens=dc.scalars["total_input_tokens"])

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        from ....kernels.launchers import launch_copy_and_expand_eagle_inputs

        launch_copy_and_expand_eagle_inputs(impl, **views, **dc.scalars, max_query_len=dc.host["max_query_len"])


DEVICE = CopyAndExpandDevice()
"""This target's device mode (``--mode device``)."""
