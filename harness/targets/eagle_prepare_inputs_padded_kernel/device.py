"""``eagle_prepare_inputs_padded_kernel`` on the device (docs/CONTRACT.md §2): up to 1024
requests (vLLM's ``max_num_seqs``; a quarter of the cases up to 4096), drafts of up to 16
tokens (an eighth of the cases up to 31, as the tour's), prefills among them. Checked on the host: the case is drawn and its expected outputs
computed there in NumPy, only the launch runs on the device."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import vectorized
from ...targetkit.device import DeviceCase, DeviceTarget
from .record import TARGET

MAX_REQUESTS = 1024


class PrepareInputsDevice(DeviceTarget):
    name = "eagle_prepare_inputs_padded_kernel"
    launch_names = TARGET.launch_names
    checked_on = "host"  # a few thousand elements: launches, not work, would cost the time
    oracle_name = "NumPy oracle (oracles/vectorized.py)"

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        R = int(rng.integers(1, max_requests + 1)) if rng.random() < 0.75 else int(rng.integers(1, 4 * max_requests + 1))
        K = int(rng.integers(1, 17)) if rng.random() < 7 / 8 else int(rng.integers(17, 32))  # 16+ rejected: many_rejected
        prefill = (0.0, 0.05, 0.5)[rng.integers(3)]

        u = rng.random((6, R))
        d = (u[0] * (K + 1)).astype(np.int64)
        d[u[1] < prefill] = 0
        valid = np.where(d > 0, 1 + (u[2] * (d + 1)).astype(np.int64), (u[3] < 0.5).astype(np.int64))
        qlen = d + 1 + np.where(u[4] < 0.2, (u[5] * (4096 if max_requests == MAX_REQUESTS else 16)).astype(np.int64), 0)
        inputs = {
            "cu_num_draft_tokens": np.cumsum(d).astype(np.int32),
            "valid_sampled_tokens_count": valid.astype(np.int32),
            "query_start_loc": np.concatenate([[0], np.cumsum(qlen)]).astype(np.int32),
        }
        outputs = {"token_indices_to_sample": (torch.int32, R), "num_rejected_tokens": (torch.int32, R)}
        return DeviceCase(inputs, outputs, {"num_reqs": R})

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        R = dc.scalars["num_reqs"]
        out = {n: np.empty(R, dtype=np.int32) for n in dc.outputs}
        vectorized.eagle_prepare_inputs_padded(**dc.inputs, **out, num_reqs=R)  # §2: writes [:num_reqs]
        index = np.arange(R)
        return {n: (index, v) for n, v in out.items()}

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        from ....kernels.launchers import launch_eagle_prepare_inputs_padded

        launch_eagle_prepare_inputs_padded(impl, **views, **dc.scalars)


DEVICE = PrepareInputsDevice()
"""This target's device mode (``--mode device``)."""
