"""create_vllm_config_for_draft_model: the target's parallel config is kept, only the tensor-parallel size comes from the drafter

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
    new_parallel_config = replace(  # BUG: starts from the target's parallel config
        old.parallel_config,
        tensor_parallel_size=old_spec_config.draft_parallel_config.tensor_parallel_size,
    )
    new: VllmConfig = replace(
        old,
        quant_config=None,
        parallel_config=new_parallel_config,
        model_config=old_spec_config.draft_model_config,
    )
    return new
