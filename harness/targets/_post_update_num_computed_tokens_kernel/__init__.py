"""``_post_update_num_computed_tokens_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
