"""``update_num_computed_tokens_for_batch_change``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
