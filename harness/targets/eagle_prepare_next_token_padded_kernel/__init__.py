"""``eagle_prepare_next_token_padded_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
