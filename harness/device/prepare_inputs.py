"""``eagle_prepare_inputs_padded_kernel`` on the device (docs/CONTRACT.md §2): up to 1024
requests (vLLM's ``max_num_seqs``; a quarter of the cases up to 4096), drafts of up to 15
tokens, prefills among them. The per-request arrays are drawn on the host and uploaded in one
copy (cheaper than a dozen device operations for a few thousand values)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ...oracles import tensor_ops
from .base import DeviceCase, DeviceTarget, upload

MAX_REQUESTS = 1024


class PrepareInputsDevice(DeviceTarget):
    name = "eagle_prepare_inputs_padded_kernel"
    checked_on = "host"  # a few thousand elements: launches, not work, would cost the time

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        R = int(rng.integers(1, max_requests + 1)) if rng.random() < 0.75 else int(rng.integers(1, 4 * max_requests + 1))
        K = int(rng.integers(1, 16))
        prefill = float(rng.choice([0.0, 0.05, 0.5]))

        u = rng.random((6, R))
        d = (u[0] * (K + 1)).astype(np.int64)
        d[u[1] < prefill] = 0
        valid = np.where(d > 0, 1 + (u[2] * (d + 1)).astype(np.int64), (u[3] < 0.5).astype(np.int64))
        qlen = d + 1 + np.where(u[4] < 0.2, (u[5] * (4096 if max_requests == MAX_REQUESTS else 16)).astype(np.int64), 0)
        host = {
            "cu_num_draft_tokens": np.cumsum(d).astype(np.int32),
            "valid_sampled_tokens_count": valid.astype(np.int32),
            "query_start_loc": np.concatenate([[0], np.cumsum(qlen)]).astype(np.int32),
        }
        inputs = upload(host, device)
        outputs = {"token_indices_to_sample": (torch.int32, R), "num_rejected_tokens": (torch.int32, R)}
        return DeviceCase(inputs, outputs, {"num_reqs": R})

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return tensor_ops.eagle_prepare_inputs_padded(**dc.inputs, **dc.scalars)

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        from ...kernels.launchers import launch_eagle_prepare_inputs_padded

        launch_eagle_prepare_inputs_padded(impl, **views, **dc.scalars)
