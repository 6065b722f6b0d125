"""``_resample_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
