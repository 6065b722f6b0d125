"""``_compute_local_logits_stats_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
