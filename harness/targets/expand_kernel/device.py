"""``expand_kernel`` on the device (docs/CONTRACT.md §12): ``expand_batch_to_tokens``'s three
calls on steps of up to 1024 requests (a quarter up to 4096) of up to 16 drafts each (one step
in eight up to vLLM's ``MAX_SPEC_LEN = 128``, a request of exactly 128 in half of them):
temperatures (float32, ``0`` for greedy requests, ``0 -> 1``), top-k (int32 ``1 .. V``) and
top-p (float32 ``(0, 1]``), ``MAX_NUM_TOKENS = 128``, into a fresh output of ``N`` elements.
Checked on the host: the expected writes come from the torch oracle run on the host
(cross-checked against the NumPy and Numba oracles on a share), only the launch runs on the
device."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ...targetkit.device import DeviceCase, DeviceTarget
from ...targetkit.device_draws import Step, draw_step, greedy_mask

MAX_REQUESTS = 1024
MAX_NUM_TOKENS = 128
"""vLLM's ``MAX_SPEC_LEN``, the dispatcher's ``MAX_NUM_TOKENS``."""
LONG_DRAFTS = 1 / 8
"""The share of steps whose draft counts go past 16, up to :data:`MAX_NUM_TOKENS` (§12.2:
``d_r <= L <= 128``; the record's body draws counts up to 128, its tour a row of exactly 128:
``row_of_128``, every lane of the launch storing)."""


def _long_drafts(rng: np.random.Generator, step: Step) -> Step:
    """``step``'s requests and vocabulary with draft counts up to ``K`` of 17 to 128, one
    request of exactly 128 half of the time; ``L`` their largest (vLLM's ``max_spec_len``)."""
    K = int(rng.integers(17, MAX_NUM_TOKENS + 1))
    d = rng.integers(0, K + 1, size=step.B)
    if rng.random() < 0.5:
        d[rng.integers(step.B)] = MAX_NUM_TOKENS
    return Step(d.astype(np.int64), int(d.max()), step.V)


class ExpandDevice(DeviceTarget):
    name = "expand_kernel"
    launch_names = ("max_num_tokens",)  # null: vLLM's 128 (the record's layout)
    checked_on = "host"
    oracle_name = "torch oracle (oracles/tensor_ops.py), on the host"

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        step = draw_step(rng, max_requests, max_requests != MAX_REQUESTS, tables=False)
        if rng.random() < LONG_DRAFTS:
            step = _long_drafts(rng, step)
        B = step.B
        which = rng.integers(3)
        if which == 0:  # temperature: greedy requests hold 0.0, the others >= 0.01
            x = np.maximum(rng.random(B) * 2, 0.01).astype(np.float32)
            x[greedy_mask(rng, B)] = 0.0
            frm, to = 0, 1
        elif which == 1:  # top_k: V for "no top-k"
            x = np.where(rng.random(B) < 0.5, step.V, rng.integers(1, step.V + 1, size=B)).astype(np.int32)
            frm, to = 0, 0
        else:  # top_p in (0, 1]
            x = np.where(rng.random(B) < 0.5, 1.0, 1.0 - rng.random(B)).astype(np.float32)
            frm, to = 0, 0
        inputs = {"input": x, "cu_num_tokens": step.cu}
        outputs = {"output": ({np.dtype(np.float32): torch.float32, np.dtype(np.int32): torch.int32}[x.dtype], step.N)}
        return DeviceCase(inputs, outputs, {"replace_from": frm, "replace_to": to, "num_tokens": step.N})

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        s = dc.scalars
        writes = tensor_ops.expand(
            input=torch.from_numpy(dc.inputs["input"]), cu_num_tokens=torch.from_numpy(dc.inputs["cu_num_tokens"]),
            replace_from=s["replace_from"], replace_to=s["replace_to"], MAX_NUM_TOKENS=MAX_NUM_TOKENS,
        )
        return {n: (i.numpy(), v.numpy()) for n, (i, v) in writes.items()}

    def oracle_many(self, dcs: list[DeviceCase]) -> list[dict[str, tuple[np.ndarray, np.ndarray]]]:
        """The torch oracle once per mode (dtype, ``replace_from``, ``replace_to``) over the
        concatenation of that mode's cases, split back per case: each request's writes depend on
        its own input and row alone, and a case's output is its ``N`` tokens, so the requests of
        consecutive cases are requests of one larger step whose token ``i`` is case ``k``'s token
        ``i - offset_k``. The same writes as :meth:`oracle` on each case, in the same order."""
        out: list[dict[str, tuple[np.ndarray, np.ndarray]]] = [{} for _ in dcs]
        modes: dict[tuple, list[int]] = {}
        for k, dc in enumerate(dcs):
            s = dc.scalars
            modes.setdefault((dc.inputs["input"].dtype.str, s["replace_from"], s["replace_to"]), []).append(k)
        for (_, frm, to), ks in modes.items():
            n = np.array([dcs[k].scalars["num_tokens"] for k in ks], dtype=np.int64)
            offset = np.cumsum(n) - n
            cu = np.concatenate([dcs[k].inputs["cu_num_tokens"].astype(np.int64) + o for k, o in zip(ks, offset, strict=True)])
            x = np.concatenate([dcs[k].inputs["input"] for k in ks])
            index, value = tensor_ops.expand(input=torch.from_numpy(x), cu_num_tokens=torch.from_numpy(cu), replace_from=frm,
                                             replace_to=to, MAX_NUM_TOKENS=MAX_NUM_TOKENS)["output"]
            index, value = index.numpy(), value.numpy()
            cut = np.searchsorted(index, np.append(offset, offset[-1] + n[-1]))
            for j, k in enumerate(ks):
                out[k]["output"] = (index[cut[j] : cut[j + 1]] - offset[j], value[cut[j] : cut[j + 1]])
        return out

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        """As vLLM's ``_expand`` launches it (the record's launch with every launch field null,
        without a :class:`~...core.case.Case` made per launch)."""
        from ....kernels.launchers import launch_expand

        s = dc.scalars
        launch_expand(impl, output=views["output"], input=views["input"], cu_num_tokens=views["cu_num_tokens"],
                      replace_from=s["replace_from"], replace_to=s["replace_to"])


DEVICE = ExpandDevice()
"""This target's device mode (``--mode device``)."""
