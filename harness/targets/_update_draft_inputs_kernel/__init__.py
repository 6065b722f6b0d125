"""``_update_draft_inputs_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
