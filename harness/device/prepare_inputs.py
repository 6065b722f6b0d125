"""``eagle_prepare_inputs_padded_kernel`` on the device (docs/CONTRACT.md §2): up to 1024
requests (vLLM's ``max_num_seqs``; a quarter of the cases up to 4096), drafts of up to 15
tokens, prefills among them."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ...oracles import tensor_ops
from ..case import Case
from .base import DeviceCase, DeviceTarget

MAX_REQUESTS = 1024


class PrepareInputsDevice(DeviceTarget):
    name = "eagle_prepare_inputs_padded_kernel"

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        R = int(rng.integers(1, max_requests + 1)) if rng.random() < 0.75 else int(rng.integers(1, 4 * max_requests + 1))
        K = int(rng.integers(1, 16))
        prefill = float(rng.choice([0.0, 0.05, 0.5]))

        u = torch.rand((6, R), generator=gen, device=device)  # one draw: six uniforms per request
        d = (u[0] * (K + 1)).long()
        d = torch.where(u[1] < prefill, 0, d)
        valid = torch.where(d > 0, 1 + (u[2] * (d + 1)).long(), (u[3] < 0.5).long())
        qlen = d + 1 + torch.where(u[4] < 0.2, (u[5] * (4096 if max_requests == MAX_REQUESTS else 16)).long(), 0)
        qsl = torch.cat([qlen.new_zeros(1), torch.cumsum(qlen, 0)])
        inputs = {
            "cu_num_draft_tokens": torch.cumsum(d, 0).int(),
            "valid_sampled_tokens_count": valid.int(),
            "query_start_loc": qsl.int(),
        }
        outputs = {"token_indices_to_sample": (torch.int32, R), "num_rejected_tokens": (torch.int32, R)}
        return DeviceCase(inputs, outputs, {"num_reqs": R})

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return tensor_ops.eagle_prepare_inputs_padded(**dc.inputs, **dc.scalars)

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        from ...kernels.launchers import launch_eagle_prepare_inputs_padded

        launch_eagle_prepare_inputs_padded(impl, **views, **dc.scalars)

    def to_case(self, dc: DeviceCase) -> Case:
        return Case(
            kernel=self.name,
            arrays={n: t.cpu().numpy() for n, t in dc.inputs.items()},
            scalars=dict(dc.scalars),
            launch={"grid_size": None},
            note="drawn on the device (eaglefuzz fuzz --mode device)",
        )
