"""Fuzzing on the GPU end to end: cases drawn, checked and compared on the device.

``eaglefuzz fuzz --mode device`` (a CUDA device only). Each target whose folder has a
``device.py`` (its ``DEVICE``, a :class:`~...targetkit.device.DeviceTarget`) can be fuzzed
this way; :func:`.engine.device_fuzz_target` runs it. Findings are confirmed, reported and
shrunk through the ordinary path (the NumPy and Numba oracles).
"""

from __future__ import annotations

from ...targetkit.device import DeviceTarget
from ...targets import TARGETS, has_role, role


def device_targets() -> dict[str, DeviceTarget]:
    """The targets that can be fuzzed on the device, by name: a view of the target folders'
    ``device.py`` (imported here, not before: they import torch)."""
    return {name: role(name, "device").DEVICE for name in TARGETS if has_role(name, "device")}
