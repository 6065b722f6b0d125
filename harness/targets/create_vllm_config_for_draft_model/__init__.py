"""``create_vllm_config_for_draft_model``, one file per role: see :mod:`eaglefuzz.harness.targets`."""
