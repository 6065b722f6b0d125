"""``_compute_local_residual_mass_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
