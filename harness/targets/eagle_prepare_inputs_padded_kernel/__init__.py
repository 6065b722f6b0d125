"""``eagle_prepare_inputs_padded_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
