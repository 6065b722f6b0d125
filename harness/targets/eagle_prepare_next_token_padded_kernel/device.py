"""``eagle_prepare_next_token_padded_kernel`` on the device (docs/CONTRACT.md §3): the
rejection sampler's rows (accepted drafts, one recovered or bonus id, all vocabulary ids, then
``-1``) for up to 1024 requests, rows of up to 64 columns in the sampler's fresh buffer
(``stride = S``), vocabulary backup ids, discarded requests: the production preconditions of
§3.2, as the fuzz and bulk modes draw them. Checked on the host: the case is drawn and its
expected outputs computed there in NumPy, only the launch runs on the device."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import vectorized
from ...targetkit.device import DeviceCase, DeviceTarget
from .record import TARGET

MAX_REQUESTS = 1024
VOCABS = (32000, 128256, 151936, 262144)


class NextTokenDevice(DeviceTarget):
    name = "eagle_prepare_next_token_padded_kernel"
    launch_names = TARGET.launch_names
    checked_on = "host"  # a few thousand elements: launches, not work, would cost the time
    oracle_name = "NumPy oracle (oracles/vectorized.py)"

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        R = int(rng.integers(1, max_requests + 1))
        S = int(rng.integers(1, 17)) if rng.random() < 0.8 else int(rng.integers(17, 65))
        extra = int(rng.integers(0, 9))
        vocab = VOCABS[rng.integers(len(VOCABS))]
        ids = rng.integers(0, vocab, size=(R, S), dtype=np.int32)
        kept = rng.integers(1, S + 1, size=(R, 1))
        ids[np.arange(S) >= kept] = -1
        inputs = {
            "sampled_token_ids": ids,
            "discard_request_mask": rng.random(R + extra) < (0.0, 0.1, 1.0)[rng.integers(3)],
            "backup_next_token_ids": rng.integers(0, vocab, size=R + extra, dtype=np.int32),
        }
        outputs = {"next_token_ids": (torch.int32, R), "valid_sampled_tokens_count": (torch.int32, R)}
        return DeviceCase(inputs, outputs, {"vocab_size": vocab, "num_sampled_tokens_per_req": S, "num_reqs": R})

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        R, S = dc.scalars["num_reqs"], dc.scalars["num_sampled_tokens_per_req"]
        out = {n: np.empty(R, dtype=np.int32) for n in dc.outputs}
        vectorized.eagle_prepare_next_token_padded(  # §3: writes [:num_reqs]; vLLM's block covers S
            **dc.inputs, **out, vocab_size=dc.scalars["vocab_size"], num_sampled_tokens_per_req=S,
            num_reqs=R, block_size_tokens=S,
        )
        index = np.arange(R)
        return {n: (index, v) for n, v in out.items()}

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        from ....kernels.launchers import launch_eagle_prepare_next_token_padded

        v = dict(views)
        v["sampled_token_ids"] = v["sampled_token_ids"][:, : dc.scalars["num_sampled_tokens_per_req"]]
        launch_eagle_prepare_next_token_padded(impl, **v, vocab_size=dc.scalars["vocab_size"],
                                               num_reqs=dc.scalars["num_reqs"])


DEVICE = NextTokenDevice()
"""This target's device mode (``--mode device``)."""
