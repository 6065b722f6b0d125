"""``_gather_draft_sampled_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
