"""``target_dependent_ar_prepare_prefill_inputs_kernel`` (vLLM's ``_prepare_prefill_inputs_kernel``
of ``spec_decode/target_dependent_ar/speculator.py``), one file per role: see
:mod:`eaglefuzz.harness.targets`."""
