"""``copy_and_expand_eagle_inputs_kernel`` (docs/CONTRACT.md §1), one file per role: see
:mod:`eaglefuzz.harness.targets`."""
