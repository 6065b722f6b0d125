"""Fuzzing on the GPU end to end: cases drawn, checked and compared on the device.

``eaglefuzz fuzz --mode device`` (a CUDA device only). Each target that has a device module
here is listed in :data:`DEVICE_TARGETS`; :func:`.engine.device_fuzz_target` runs it. Findings
are confirmed, reported and shrunk through the ordinary path (the NumPy and Numba oracles).
"""

from __future__ import annotations

from .base import DeviceTarget


def device_targets() -> dict[str, DeviceTarget]:
    """The targets that can be fuzzed on the device, by name."""
    from .copy_and_expand import CopyAndExpandDevice
    from .next_token import NextTokenDevice
    from .prepare_inputs import PrepareInputsDevice

    return {t.name: t for t in (CopyAndExpandDevice(), PrepareInputsDevice(), NextTokenDevice())}
