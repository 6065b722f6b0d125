"""``sample_recovered_tokens_kernel`` on the device (docs/CONTRACT.md §13): steps of up to 1024
requests (a quarter up to 4096), up to 16 drafts each, vocabularies up to 262144 and
probability tables of up to 2**28 elements (1 GiB each) drawn on the GPU as softmax rows
(peaked, flat, sparse), with and without draft probabilities, ``-1`` padding, rows whose scores
are all zero (the recovered id is then 0, a tie of every token), and the noise
as vLLM draws it (``inv_q = 1 / Exp(1)``, ``[B, V]``), float64 in one step in four
(``USE_FP64_GUMBEL``). Launched with vLLM's ``BLOCK_SIZE = 8192``; checked on the device
against the torch oracle."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ...core.case import Case
from ...targetkit.device import DeviceCase, DeviceTarget
from ...targetkit.device_draws import draw_step, pad_drafts, sample_from, softmax_table
from .record import TARGET

MAX_REQUESTS = 1024


class RecoveredDevice(DeviceTarget):
    name = "sample_recovered_tokens_kernel"
    launch_names = ("block_size",)  # null: vLLM's 8192 (the record's layout)

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        step = draw_step(rng, max_requests, device == "cpu", tables=True)
        N, V, B = step.N, step.V, step.B
        target = softmax_table(rng, gen, N, V, device)
        with_draft = rng.random() < 0.6
        draft = softmax_table(rng, gen, N, V, device) if with_draft else None
        ids = pad_drafts(rng, sample_from(draft if with_draft else target, gen), step)
        if N and V and rng.random() < 0.5:  # rows whose scores are all 0 (recovered id 0: docs/CONTRACT.md §13.2)
            empty = torch.rand((N, 1), generator=gen, device=device) < 0.5
            if with_draft:  # the draft's row equals the target's: an empty residual
                draft = torch.where(empty, target, draft)
            else:  # a one-hot target on the draft token (a row of one finite logit)
                hot = torch.zeros_like(target).scatter_(1, ids.long().clamp(0, V - 1)[:, None], 1.0)
                target = torch.where(empty & (ids >= 0)[:, None], hot, target)
        dtype = torch.float64 if rng.random() < 0.25 else torch.float32
        q = torch.empty((B, V), dtype=dtype, device=device).exponential_(generator=gen)
        q.clamp_(min=float(torch.finfo(dtype).tiny))  # an exponential sample of 0 would make inv_q inf
        inputs = {
            "cu_num_draft_tokens": torch.from_numpy(step.cu).to(device),
            "draft_token_ids": ids,
            "target_probs": target,
            "inv_q": q.reciprocal(),
        }
        if draft is not None:
            inputs["draft_probs"] = draft
        outputs = {"output_token_ids": (torch.int32, N)}
        return DeviceCase(inputs, outputs, {"max_spec_len": step.L, "vocab_size": V})

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        a = dc.inputs
        return tensor_ops.sample_recovered_tokens(
            cu_num_draft_tokens=a["cu_num_draft_tokens"], draft_token_ids=a["draft_token_ids"],
            draft_probs=a.get("draft_probs"), target_probs=a["target_probs"], inv_q=a["inv_q"],
            vocab_size=dc.scalars["vocab_size"], max_spec_len=dc.scalars["max_spec_len"],
        )

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        TARGET.launch(impl, views, Case(kernel=self.name, arrays={}, scalars=dict(dc.scalars), launch=dict.fromkeys(self.launch_names)))


DEVICE = RecoveredDevice()
"""This target's device mode (``--mode device``)."""
