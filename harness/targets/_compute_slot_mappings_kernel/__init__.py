"""``_compute_slot_mappings_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
