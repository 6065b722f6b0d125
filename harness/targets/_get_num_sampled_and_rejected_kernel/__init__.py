"""``_get_num_sampled_and_rejected_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
