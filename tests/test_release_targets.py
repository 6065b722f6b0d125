"""The targets newer than the bundled copy, and vLLM's pinned release that CI tests them on.

The bundled copy predates twenty-two targets (§6-§13 but §5's, and Model Runner V2's §14-§27):
their code under test is the pinned vLLM release's module (``harness/sources/vllm.py: PINNED_RELEASE``), fetched once by the tests
and cached. tests/test_differential.py fuzzes them and tests/test_corpus.py replays their corpus
against it (the ``subject`` fixture of tests/conftest.py), as it does the bundled copy's targets.
"""

from __future__ import annotations

from eaglefuzz.harness.sources import vllm as vsrc
from eaglefuzz.harness.sources.bundled import BundledSource
from eaglefuzz.harness.targets import TARGETS

NEWER = sorted(set(TARGETS) - set(BundledSource().load().funcs))
EXPECTED_NEWER = {
    "eagle_step_slot_mapping_metadata_kernel", "compute_new_slot_mapping", "update_num_computed_tokens_for_batch_change",
    "copy_and_expand_dflash_inputs_kernel", "rejection_greedy_sample_kernel", "rejection_random_sample_kernel",
    "expand_kernel", "sample_recovered_tokens_kernel",
    # Model Runner V2 (vllm/v1/worker/gpu/, docs/CONTRACT.md §14-§27)
    "input_batch_prepare_prefill_inputs_kernel", "_prepare_pos_seq_lens_kernel", "_combine_sampled_and_draft_tokens_kernel",
    "_expand_idx_mapping_kernel", "_get_num_sampled_and_rejected_kernel", "_post_update_kernel",
    "_post_update_num_computed_tokens_kernel", "_gather_block_tables_kernel", "_compute_slot_mappings_kernel",
    "_gather_draft_sampled_kernel", "_flatten_sampled_kernel", "target_dependent_ar_prepare_prefill_inputs_kernel",
    "_prepare_decode_inputs_kernel", "_update_draft_inputs_kernel",
    # Model Runner V2's verification (sample/gumbel.py, spec_decode/rejection_sampler_utils.py, §28-§35)
    "_temperature_kernel", "_gumbel_sample_kernel", "_compute_local_logits_stats_kernel",
    "_compute_cumulative_log_p_kernel", "_compute_local_residual_mass_kernel", "_rejection_kernel", "_resample_kernel",
    "_insert_resampled_kernel",
}
"""Every target the bundled copy lacks, by name: a target added without a home, or one the
copy gained, changes the set and fails here."""


def test_the_newer_targets_are_exactly_these():
    assert set(NEWER) == EXPECTED_NEWER


def test_the_pinned_release_defines_every_target_but_the_draft_config(pinned_release_impls):
    """vLLM 0.33.0 defines every target but ``create_vllm_config_for_draft_model`` (0.16-0.18
    only): each newer target is tested on it, as the release it comes from."""
    assert set(pinned_release_impls.funcs) == set(TARGETS) - {"create_vllm_config_for_draft_model"}
    for name in NEWER:
        assert pinned_release_impls.origin[name].source == f"vLLM {vsrc.PINNED_RELEASE} release wheel"


def test_a_compiled_function_is_warmed_before_any_case_clock_runs():
    """``torch.compile``'d code (vLLM's update_num_computed_tokens_for_batch_change) compiles at
    its first calls; the campaign runs it on two tiny cases first (``warm_compiled``), so that
    compiling never counts against a case's time limit. A plain implementation is not run."""
    from eaglefuzz.harness.checking.check import warm_compiled
    from eaglefuzz.harness.sources import implementations_for
    from eaglefuzz.harness.sources.bundled import BundledSource

    name = "extend_all_queries_by_N"
    bundled = implementations_for(BundledSource(), [name])
    calls = []

    class Compiled:
        _torchdynamo_orig_callable = bundled[name]

        def __call__(self, *args, **kwargs):
            calls.append(1)
            return bundled[name](*args, **kwargs)

    impls = type(bundled)(funcs={name: Compiled()}, origin=bundled.origin, source=bundled.source)
    assert warm_compiled(impls, [name], "cpu") == [name] and len(calls) == 2
    assert warm_compiled(bundled, [name], "cpu") == []
