"""``_prepare_pos_seq_lens_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
