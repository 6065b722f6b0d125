"""``_gumbel_sample_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
