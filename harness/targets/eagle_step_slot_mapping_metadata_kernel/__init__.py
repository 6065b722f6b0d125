"""``eagle_step_slot_mapping_metadata_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
