"""create_vllm_config_for_draft_model: the target's quant_config is kept

Seeded bug: a copy of ``create_vllm_config_for_draft_model`` from kernels/spec_decode_utils.py
with one change. tests/test_seeded_bugs.py checks that the fuzzer finds it.
"""

from dataclasses import replace

from eaglefuzz.kernels.vllm_types import VllmConfig


def create_vllm_config_for_draft_model(
    target_model_vllm_config: VllmConfig,
) -> VllmConfig:
    old = target_model_vllm_config
    assert old.speculative_config is not None, "speculative_config is not set"
    old_spec_config = old.speculative_config
    new_parallel_config = replace(
        old_spec_config.draft_parallel_config, rank=old.parallel_config.rank
    )
    new: VllmConfig = replace(
        old,
        # BUG: quant_config not reset
        parallel_config=new_parallel_config,
        model_config=old_spec_config.draft_model_config,
    )
    return new
