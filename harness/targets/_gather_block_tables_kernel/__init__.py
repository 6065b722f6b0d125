"""``_gather_block_tables_kernel``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
