"""``compute_new_slot_mapping`` on the device (docs/CONTRACT.md §7): a torch function that vLLM runs on the GPU,
fuzzed with production batches of up to 1024 requests (a tail to 4096) drawn by its record and
checked there by its record's check (:class:`~...targetkit.device.RecordDevice`)."""

from __future__ import annotations

from ...targetkit.device import RecordDevice
from .record import TARGET


class _Device(RecordDevice):
    name = "compute_new_slot_mapping"
    launch_names = TARGET.launch_names if hasattr(TARGET, "launch_names") else ()
    record = TARGET


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
