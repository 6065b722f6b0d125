"""``sample_recovered_tokens_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
