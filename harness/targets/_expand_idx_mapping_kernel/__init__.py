"""``_expand_idx_mapping_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
