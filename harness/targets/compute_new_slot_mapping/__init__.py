"""``compute_new_slot_mapping``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
