"""``_compute_slot_mappings_kernel`` on the device (docs/CONTRACT.md §22): a Model Runner V2 kernel, fuzzed with production
batches of up to 1024 rows (a tail to 4096) drawn by its record and checked there by its record's
check (:class:`~...targetkit.device.RecordDevice`)."""

from __future__ import annotations

from ...targetkit.device import RecordDevice
from .record import TARGET


class _Device(RecordDevice):
    name = "_compute_slot_mappings_kernel"
    launch_names = TARGET.launch_names
    record = TARGET


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
