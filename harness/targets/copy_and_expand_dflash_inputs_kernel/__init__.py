"""``copy_and_expand_dflash_inputs_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
