"""``rejection_greedy_sample_kernel`` on the device (docs/CONTRACT.md §10): steps of up to 1024
requests (a quarter up to 4096), up to 16 drafts each, ``-1`` padding, vocabularies up to
262144, all-greedy (``is_greedy`` None) and mixed batches, synthetic mode in one step in five.
Checked on the host: no probability table, a few thousand elements; the expected writes come
from the torch oracle run on the host (cross-checked against the NumPy and Numba oracles on a
share), only the launch runs on the device."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ...core.case import Case
from ...targetkit.device import DeviceCase, DeviceTarget
from ...targetkit.device_draws import draw_step, greedy_mask, synthetic_rates
from .record import TARGET

MAX_REQUESTS = 1024


class GreedyDevice(DeviceTarget):
    name = "rejection_greedy_sample_kernel"
    launch_names = ()  # a case of this target has no launch fields
    checked_on = "host"
    oracle_name = "torch oracle (oracles/tensor_ops.py), on the host"

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        step = draw_step(rng, max_requests, max_requests != MAX_REQUESTS, tables=False)
        argmax = rng.integers(0, step.V, size=step.N).astype(np.int64)
        match = float(rng.choice([0.0, 0.5, 0.9, 1.0]))
        other = (argmax + 1 + rng.integers(0, max(step.V - 1, 1), size=step.N)) % step.V
        drafts = np.where(rng.random(step.N) < match, argmax, other).astype(np.int32)
        pad = (rng.random(step.N) < 0.05) & (rng.random() < 0.25)
        drafts[pad] = -1
        inputs: dict[str, np.ndarray] = {
            "cu_num_draft_tokens": step.cu,
            "draft_token_ids": drafts,
            "target_argmax": argmax,
            "bonus_token_ids": rng.integers(0, step.V, size=(step.B, 1)).astype(np.int32),
        }
        synthetic = rng.random() < 0.2
        mode = rng.integers(3)  # is_greedy None (all greedy), mixed, a tensor all true
        if mode == 1:
            inputs["is_greedy"] = greedy_mask(rng, step.B)
        elif mode == 2:
            inputs["is_greedy"] = np.ones(step.B, dtype=np.bool_)
        if synthetic or mode == 1:
            inputs["uniform_probs"] = rng.random(step.N)
        if synthetic:
            inputs["synthetic_conditional_rates"] = synthetic_rates(rng, step.L)
        outputs = {"output_token_ids": (torch.int32, step.B * (step.L + 1))}
        return DeviceCase(inputs, outputs, {"max_spec_len": step.L})

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        a = {n: torch.from_numpy(v) for n, v in dc.inputs.items()}
        writes = tensor_ops.rejection_greedy_sample(
            cu_num_draft_tokens=a["cu_num_draft_tokens"], draft_token_ids=a["draft_token_ids"],
            target_argmax=a["target_argmax"], bonus_token_ids=a["bonus_token_ids"], is_greedy=a.get("is_greedy"),
            max_spec_len=dc.scalars["max_spec_len"], uniform_probs=a.get("uniform_probs"),
            synthetic_conditional_rates=a.get("synthetic_conditional_rates"),
        )
        return {n: (i.numpy(), v.numpy()) for n, (i, v) in writes.items()}

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        L = dc.scalars["max_spec_len"]
        views = dict(views, output_token_ids=views["output_token_ids"].view(-1, L + 1))
        TARGET.launch(impl, views, Case(kernel=self.name, arrays={}, scalars=dict(dc.scalars), launch=dict.fromkeys(self.launch_names)))


DEVICE = GreedyDevice()
"""This target's device mode (``--mode device``)."""
