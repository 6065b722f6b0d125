"""``_expand_idx_mapping_kernel`` on the device (docs/CONTRACT.md §17): batches of up to 1024 rows
(now and then 4096), drawn and checked on the host, launched on the device
(:mod:`...targetkit.device_v2`)."""

from __future__ import annotations

from ...targetkit.device_v2 import V2Device
from .record import TARGET

DEVICE = V2Device(TARGET)
"""This target's device mode (``--mode device``)."""
