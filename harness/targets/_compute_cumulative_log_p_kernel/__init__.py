"""``_compute_cumulative_log_p_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
