"""``input_batch_prepare_prefill_inputs_kernel`` (vLLM's ``_prepare_prefill_inputs_kernel`` of
``input_batch.py``), one file per role: see :mod:`eaglefuzz.harness.targets`."""
