"""``_compute_cumulative_log_p_kernel`` on the device (docs/CONTRACT.md §31): production batches drawn by its
record and checked there by its record's check (:class:`~...targetkit.device.RecordDevice`)."""

from __future__ import annotations

from ...targetkit.device import RecordDevice
from .record import TARGET


class _Device(RecordDevice):
    name = "_compute_cumulative_log_p_kernel"
    launch_names = TARGET.launch_names
    record = TARGET


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
