"""``extend_all_queries_by_N``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
