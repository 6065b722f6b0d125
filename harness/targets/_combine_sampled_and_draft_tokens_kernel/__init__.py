"""``_combine_sampled_and_draft_tokens_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
