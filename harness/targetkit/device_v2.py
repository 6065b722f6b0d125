"""Device mode of Model Runner V2's targets (docs/CONTRACT.md §14-§27): each folder's
``device.py`` is a :class:`V2Device` around its record.

A case is drawn on the host at production scale (the folder's own generator with up to
``max_requests`` rows, vLLM's ``max_num_seqs`` of 1024 by default, and its tour's shapes now
and then), its expected buffers computed there by the NumPy oracle (the elements it writes,
told apart by two runs over different fills; the state the kernel updates in place, whole),
and only the launch runs on the device (``checked_on = "host"``: the cases are a few thousand
elements). On a CPU (the tests, the Triton interpreter) the same path runs with a few rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..core.case import Case
from ..generation.choosers import RngChooser
from ..generation.strategies import MAX_NUM_SEQS, Scale
from .base import draw_production
from .device import DeviceCase, DeviceTarget
from .runner_v2 import V2Target

_TORCH = {np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64, np.dtype(np.bool_): torch.bool,
          np.dtype(np.float32): torch.float32}
_FILLS = (-0x5A5A5A5B, 0x3EADBEEF)


def production_scale(max_requests: int) -> Scale:
    """The sizes of a device draw: batches up to ``max_requests`` rows (now and then four times
    that), chunks of thousands of tokens, any grid."""
    return Scale(max_requests=max_requests, request_tail=4 * max_requests, max_query_len=8192, max_programs=1 << 20)


@dataclass
class V2DeviceCase(DeviceCase):
    """A :class:`DeviceCase` whose kernel also updates inputs in place (``updated``: their
    elements, verified as outputs are)."""

    updated: int = 0

    @property
    def tokens(self) -> int:
        return super().tokens + self.updated


class V2Device(DeviceTarget):
    """Device mode of the V2 target ``record`` (its folder's ``device.py``: ``DEVICE``)."""

    checked_on = "host"
    oracle_name = "NumPy oracle (oracles/vectorized_v2.py), on the host"

    def __init__(self, record: V2Target) -> None:
        self.record = record
        self.name = record.name
        self.launch_names = tuple(record.launch_names)

    def draw(self, rng: np.random.Generator, gen: torch.Generator | None, device: str,
             max_requests: int = MAX_NUM_SEQS) -> DeviceCase:
        import importlib

        folder = self.record.folder
        body = importlib.import_module(f"{folder}.cases").body
        case = draw_production(RngChooser(rng), production_scale(max_requests), self._fitting(max_requests), body)
        specs = self.record.output_specs(case)
        outputs = {n: (_TORCH[np.dtype(dt)], int(np.prod(shape))) for n, (dt, shape) in specs.items()}
        updated = sum(case.arrays[n].size for n in self.record.inout if n in case.arrays)
        return V2DeviceCase(dict(case.arrays), outputs, dict(case.scalars), updated=updated)

    def _fitting(self, max_requests: int) -> tuple:
        """The tour's shapes a draw of ``max_requests`` rows may take (all of them at production
        scale; on a CPU, those of few programs)."""
        return tuple(s for s in self.record.shapes if max_requests >= MAX_NUM_SEQS or s.programs <= 4 * max_requests)

    def _case(self, dc: DeviceCase) -> Case:
        return Case(self.name, dict(dc.inputs), dict(dc.scalars), dict.fromkeys(self.launch_names))

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        case = self._case(dc)
        oracle = self.record.oracles["numpy"]
        a, b = (self.record._run_oracle(oracle, case, dict.fromkeys(self.record.output_specs(case), f)) for f in _FILLS)
        writes = {}
        for n in self.record.output_specs(case):
            x, y = a[n].reshape(-1), b[n].reshape(-1)
            same = x.view(np.int32) == y.view(np.int32) if x.dtype == np.float32 else x == y
            index = np.flatnonzero(same)
            writes[n] = (index, x[index])
        for n in self.record.inout:  # updated in place: every element, as the oracle left it
            if n in a:
                writes[n] = (np.arange(a[n].size), a[n].reshape(-1))
        return writes

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        case = self._case(dc)
        shaped = dict(views)
        for n, (_, shape) in self.record.output_specs(case).items():
            shaped[n] = views[n].view(shape)
        self.record.launch(impl, shaped, case)
