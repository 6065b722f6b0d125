"""``_prepare_decode_inputs_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
