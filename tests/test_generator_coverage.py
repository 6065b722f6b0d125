"""Generator coverage per branch: the generator body alone reaches each feature in a stated share.

A feature reached once, by a tour's shape, says nothing of the generator: a body whose branch is
never drawn (``shift = c.boolean() and False``) would still read "features 21/21". So each
ordinary feature of every target (neither a production extreme nor a scale feature, which only
production-scale cases in device mode reach: ``Target.scale_features``) has a stated share
(:data:`SHARES`) of the cases that the folder's ``cases.py`` ``body`` (``role(name, "cases")``)
draws alone (bulk driver, no tour, no shape) that must reach it, checked on :data:`CASES` cases
of a fixed seed; the shares are half of what the body reaches today, rounded down (0.005: a
feature that needs a rare draw). A run's table counts the ordinary features the same way
(``Stats.features``: the body's cases only; the tour's shapes count for the production
extremes, which are their job), and its coverage note names an ordinary feature only the tour
reached.
"""

from __future__ import annotations

import numpy as np
import pytest

from eaglefuzz.harness.checking import fuzz
from eaglefuzz.harness.generation.choosers import RngChooser
from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE, derive_seed, is_tour_case
from eaglefuzz.harness.targets import TARGETS, role

CASES = 200
"""Cases of the generator body drawn per target."""

SHARES: dict[str, dict[str, float]] = {  # noqa: E501 - one target a line
    "copy_and_expand_eagle_inputs_kernel": {"shift_off": 0.25, "shift_on": 0.24, "p_is_1": 0.03, "p_at_least_2": 0.46, "rejected_tokens": 0.49, "last_request_rejected": 0.38, "all_but_one_rejected": 0.38, "no_valid_slot": 0.21, "multi_block_request": 0.11, "several_requests": 0.45, "many_requests": 0.12, "long_request": 0.1, "clamp_engaged": 0.11},
    "eagle_prepare_inputs_padded_kernel": {"no_drafts": 0.41, "drafts": 0.45, "all_accepted": 0.39, "none_accepted": 0.39, "partly_accepted": 0.4, "discarded": 0.35, "long_prefill": 0.49, "several_requests": 0.47, "many_requests": 0.11},
    "eagle_prepare_next_token_padded_kernel": {"discard_none": 0.18, "discard_all": 0.16, "discard_some": 0.14, "full_row": 0.27, "several_valid_columns": 0.18, "block_past_stride": 0.2, "minus_one_suffix": 0.18, "single_column": 0.22, "overallocated_buffers": 0.27, "several_requests": 0.45, "many_requests": 0.13},
    "extend_all_queries_by_N": {"one_request": 0.14, "several_requests": 0.35, "many_requests": 0.08, "large_batch": 0.04, "n_one": 0.04, "n_several": 0.14, "n_large": 0.31, "exact_arange": 0.01, "long_arange": 0.48, "large_values": 0.25, "upper_bound_max_seq_len": 0.24, "optional_fields": 0.25, "slot_mapping_resized": 0.13, "padding_slots": 0.48},
    "create_vllm_config_for_draft_model": {"quantized_target": 0.25, "unquantized_target": 0.24, "all_fields_differ": 0.24, "some_fields_equal": 0.25, "same_rank": 0.13, "quantized_draft_model": 0.35, "additional_config_set": 0.23, "parallel_drafting": 0.23},
    "eagle_step_slot_mapping_metadata_kernel": {"separate_positions": 0.26, "aliased_positions": 0.23, "exact_launch": 0.3, "padded_launch": 0.2, "single_request": 0.06, "several_requests": 0.44, "many_requests": 0.04, "last_position": 0.29, "block_start": 0.37, "later_block": 0.44, "last_column": 0.25, "seq_follows_position": 0.37, "mrope_positions": 0.12, "block_size_one": 0.04, "odd_block_size": 0.1, "partial_last_block": 0.18},
    "compute_new_slot_mapping": {"single_request": 0.03, "several_requests": 0.46, "many_requests": 0.04, "n_one": 0.07, "n_several": 0.42, "vllm_layout": 0.5, "rejected_tokens": 0.42, "last_position": 0.28, "block_start": 0.31, "request_spans_blocks": 0.3, "last_column": 0.19, "wide_table": 0.22, "block_size_one": 0.03, "odd_block_size": 0.1, "views": 0.23, "own_tensors": 0.27},
    "update_num_computed_tokens_for_batch_change": {"eager": 0.26, "compiled": 0.23, "single_request": 0.03, "several_requests": 0.46, "many_requests": 0.02, "new_request": 0.33, "with_drafts": 0.33, "without_drafts": 0.28, "reordered": 0.12, "overwritten_source": 0.12, "smaller_previous_batch": 0.08, "larger_previous_batch": 0.19, "exact_buffers": 0.17, "longer_buffers": 0.32},
    "copy_and_expand_dflash_inputs_kernel": {"has_num_rejected_off": 0.24, "has_num_rejected_on": 0.25, "some_rejected": 0.24, "all_but_one_rejected": 0.16, "last_request_rejected": 0.16, "no_spec_tokens": 0.13, "one_spec_token": 0.01, "many_spec_tokens": 0.27, "query_len_16": 0.11, "one_token_request": 0.33, "several_requests": 0.45, "many_requests": 0.11, "long_request": 0.04, "multi_block_request": 0.06, "query_straddles_blocks": 0.02, "vllm_launch": 0.5, "query_crosses_kv_block": 0.27, "kv_block_size_1": 0.05, "kv_block_size_odd": 0.13, "stride_1": 0.05, "stride_multiple_of_16": 0.1, "total_tokens_specialised": 0.03, "spare_buffers": 0.27, "mrope_positions": 0.18},
    "rejection_greedy_sample_kernel": {"all_greedy": 0.18, "mixed_batch": 0.12, "greedy_tensor_all_true": 0.18, "synthetic_mode": 0.08, "no_drafts_row": 0.34, "all_accepted": 0.29, "first_rejected": 0.33, "later_rejected": 0.17, "minus_one_draft": 0.17, "wider_rows": 0.06, "ragged": 0.42, "several_requests": 0.44, "many_requests": 0.03, "uniform_at_rate": 0.02},
    "rejection_random_sample_kernel": {"no_draft_probs": 0.15, "draft_probs": 0.34, "synthetic_mode": 0.05, "mixed_batch": 0.18, "all_random": 0.3, "no_drafts_row": 0.3, "all_accepted": 0.33, "rejected": 0.28, "later_rejected": 0.15, "minus_one_draft": 0.09, "boundary_accept": 0.06, "boundary_reject": 0.05, "quotient_one": 0.12, "zero_target": 0.04, "zero_uniform": 0.1, "subnormal_prob": 0.04, "wider_rows": 0.07, "ragged": 0.4, "several_requests": 0.44, "many_requests": 0.05},
    "expand_kernel": {"temperature": 0.12, "top_k": 0.09, "top_p": 0.09, "float_data": 0.3, "int32_data": 0.15, "int64_data": 0.04, "replaced": 0.17, "negative_zero": 0.01, "nan_data": 0.01, "empty_row": 0.31, "row_past_M": 0.02, "other_M": 0.09, "longer_output": 0.11, "several_requests": 0.43, "many_requests": 0.02},
    "sample_recovered_tokens_kernel": {"no_draft_probs": 0.12, "draft_probs": 0.38, "fp64_gumbel": 0.14, "all_zero_scores": 0.18, "tied_max": 0.17, "later_tile": 0.11, "tie_across_tiles": 0.09, "partial_last_tile": 0.02, "other_block_size": 0.3, "masked_draft_was_max": 0.05, "minus_one_draft": 0.05, "wider_rows": 0.08, "ragged": 0.41, "several_requests": 0.44, "many_requests": 0.03},
    "input_batch_prepare_prefill_inputs_kernel": {"decoding_row": 0.45, "first_chunk": 0.43, "later_chunk": 0.43, "last_chunk": 0.45, "lookahead_in_prompt": 0.43, "lookahead_past_prompt": 0.46, "several_lookahead": 0.34, "lookahead_block_wider": 0.07, "untouched_state_rows": 0.28, "permuted_state_rows": 0.46, "several_rows": 0.46, "many_requests": 0.13},
    "_prepare_pos_seq_lens_kernel": {"decode_rows": 0.36, "chunk_rows": 0.31, "padding": 0.3, "no_padding": 0.19, "permuted_state_rows": 0.48, "several_rows": 0.48, "many_requests": 0.12},
    "_combine_sampled_and_draft_tokens_kernel": {"prefilling_row": 0.47, "prompt_tail_row": 0.4, "decoding_row": 0.44, "drafts_written": 0.45, "decoding_without_drafts": 0.36, "query_longer_than_logits": 0.45, "block_wider": 0.3, "permuted_state_rows": 0.46, "several_rows": 0.45, "many_requests": 0.14},
    "_expand_idx_mapping_kernel": {"no_drafts_row": 0.41, "full_row": 0.4, "ragged": 0.45, "block_wider": 0.28, "permuted_state_rows": 0.46, "several_rows": 0.46, "many_requests": 0.11},
    "_get_num_sampled_and_rejected_kernel": {"chunked_row": 0.44, "prompt_end_row": 0.44, "decode_row": 0.43, "all_accepted": 0.32, "some_rejected": 0.36, "sampler_batch": 0.1, "permuted_state_rows": 0.46, "several_rows": 0.44, "many_requests": 0.11},
    "_post_update_kernel": {"last_rank": 0.33, "pipeline_rank": 0.16, "pipeline_drafts": 0.11, "masked_row": 0.09, "chunked_row": 0.41, "rejected": 0.44, "token_counted_twice": 0.11, "untouched_state_rows": 0.36, "several_rows": 0.47, "many_requests": 0.16},
    "_post_update_num_computed_tokens_kernel": {"decode_rows": 0.34, "chunk_rows": 0.33, "permuted_state_rows": 0.46, "untouched_state_rows": 0.3, "several_rows": 0.44, "many_requests": 0.13},
    "_gather_block_tables_kernel": {"full_attention": 0.42, "sliding_window_nulls": 0.18, "no_mask": 0.25, "several_groups": 0.35, "padding_rows": 0.22, "empty_row": 0.45, "full_row": 0.42, "permuted_state_rows": 0.47, "several_rows": 0.46, "many_requests": 0.15},
    "_compute_slot_mappings_kernel": {"context_parallel": 0.31, "sharded_group": 0.23, "unsharded_group_under_cp": 0.14, "interleave": 0.13, "disabled_group": 0.16, "dummy_row": 0.06, "padding": 0.24, "chunk_rows": 0.17, "draft_step": 0.32, "several_groups": 0.29, "permuted_state_rows": 0.46, "several_rows": 0.46, "many_requests": 0.14},
    "_gather_draft_sampled_kernel": {"bonus_slot": 0.5, "draft_slot": 0.43, "placeholder_slot": 0.44, "prefill_row": 0.47, "query_longer_than_logits": 0.48, "several_rows": 0.47, "many_requests": 0.14},
    "_flatten_sampled_kernel": {"all_kept": 0.45, "rejected": 0.37, "no_drafts_row": 0.43, "full_row": 0.42, "unread_columns": 0.49, "several_rows": 0.46, "many_requests": 0.11},
    "target_dependent_ar_prepare_prefill_inputs_kernel": {"chunked_row": 0.46, "sampled_row": 0.49, "rejected_tokens": 0.45, "nothing_rejected": 0.46, "one_token_kept": 0.44, "padding": 0.28, "no_padding": 0.21, "permuted_state_rows": 0.47, "several_rows": 0.48, "many_requests": 0.14},
    "_prepare_decode_inputs_kernel": {"advancing": 0.4, "constant_positions": 0.1, "position_clamped": 0.3, "length_clamped": 0.3, "rejected": 0.49, "padding": 0.3, "no_padding": 0.19, "several_rows": 0.48, "many_requests": 0.13},
    "_update_draft_inputs_kernel": {"middle_step": 0.26, "last_step": 0.23, "advancing": 0.39, "constant_positions": 0.1, "position_clamped": 0.16, "length_clamped": 0.16, "signed_zeros_and_subnormals": 0.5, "several_rows": 0.46, "many_requests": 0.15},
    "_temperature_kernel": {"greedy_row": 0.35, "unit_temperature": 0.34, "scaled_row": 0.48, "low_temperature": 0.36, "shared_state_row": 0.47, "untouched_state_rows": 0.4, "several_blocks": 0.05},
    "_gumbel_sample_kernel": {"target_sampling": 0.15, "drafting": 0.18, "per_token_columns": 0.16, "greedy_row": 0.4, "random_row": 0.48, "unit_temperature": 0.4, "padded_row": 0.11, "fp64_noise": 0.13, "masked_logits": 0.07, "several_blocks": 0.23, "partial_last_block": 0.2, "negative_row": 0.19, "untouched_cache_rows": 0.31, "seed_at_int64_limit": 0.18},
    "_compute_local_logits_stats_kernel": {"greedy_row": 0.22, "random_row": 0.28, "draft_logits": 0.19, "one_hot_drafts": 0.18, "bonus_rows_skipped": 0.5, "masked_logits": 0.11, "narrower_draft_vocab": 0.07, "wider_draft_vocab": 0.05, "tied_maximum": 0.05, "negative_partial_block": 0.05, "low_temperature": 0.09, "several_blocks": 0.04, "untouched_state_rows": 0.13},
    "_compute_cumulative_log_p_kernel": {"random_request": 0.3, "greedy_request": 0.26, "draft_logits": 0.19, "one_hot_drafts": 0.17, "minus_one_draft": 0.06, "ratio_above_one": 0.16, "masked_draft": 0.08, "no_drafts": 0.28, "several_blocks": 0.08, "padded_blocks": 0.015},
    "_compute_local_residual_mass_kernel": {"residual_rows": 0.33, "first_rows_skipped": 0.44, "placeholder_next_skipped": 0.07, "greedy_skipped": 0.11, "zero_residual": 0.15, "ratio_below_one": 0.27, "several_blocks": 0.1, "padded_blocks": 0.03},
    "_rejection_kernel": {"greedy_request": 0.27, "random_request": 0.26, "standard": 0.09, "synthetic": 0.13, "block_verification": 0.13, "fly": 0.13, "draft_logits": 0.31, "one_hot_drafts": 0.18, "all_accepted": 0.12, "first_rejected": 0.35, "later_rejected": 0.2, "greedy_corrected": 0.24, "minus_one_draft": 0.1, "fly_deferral_confirmed": 0.01, "rates_zero_or_one": 0.1, "no_drafts": 0.28, "several_blocks": 0.05, "padded_blocks": 0.015},
    "_resample_kernel": {"bonus_draw": 0.22, "residual_draw": 0.11, "one_hot_residual": 0.1, "placeholder_rejected": 0.06, "greedy_bonus": 0.17, "greedy_skipped": 0.2, "block_shift": 0.01, "fp64_noise": 0.08, "residual_lanes_cut": 0.11, "several_blocks": 0.23},
    "_insert_resampled_kernel": {"random_draw": 0.3, "greedy_bonus": 0.19, "greedy_skipped": 0.24, "no_drafts": 0.27, "later_block_wins": 0.18, "masked_block": 0.12, "fp64_values": 0.07, "several_blocks": 0.32},
}
"""Per target, ordinary feature -> the least share of generator-body cases that reach it."""


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_the_generator_body_reaches_each_feature_in_its_share(name):
    target = TARGETS[name]
    ordinary = [f for f in target.features if f not in target.extremes and f not in target.scale_features]
    assert sorted(SHARES.get(name, {})) == sorted(ordinary), (
        f"{name}: state a share for every ordinary feature, and none for an extreme or a scale feature: "
        f"{sorted(set(ordinary) ^ set(SHARES.get(name, {})))}")
    rng = np.random.default_rng(derive_seed(0, "generator-body-shares", name))
    body = role(name, "cases").body  # the folder's cases.py alone: no tour, no shape
    counts = dict.fromkeys(target.features, 0)
    for _ in range(CASES):
        case = body(RngChooser(rng), INTERPRETER_SCALE)
        target.validate(case)  # the body draws the production tier, by construction
        assert not is_tour_case(case)
        for f in target.features_of(case):
            counts[f] += 1
    short = {f: f"{counts[f] / CASES:.3f} < {share}" for f, share in SHARES[name].items() if counts[f] / CASES < share}
    assert not short, f"{name}: the generator body alone ({CASES} cases) reaches features less often than stated: {short}"


def test_a_run_counts_an_ordinary_feature_only_from_the_generator_body():
    """A tour case's ordinary features are not counted as reached (``Stats.features``), only
    noted (``Stats.toured``); its production extremes are."""
    name = "copy_and_expand_eagle_inputs_kernel"
    target = TARGETS[name]
    case = fuzz.tour(name, INTERPRETER_SCALE, 0)[0]
    assert is_tour_case(case)
    reached = target.features_of(case)
    ordinary = reached - set(target.extremes)
    assert ordinary and reached & set(target.extremes)
    stats = fuzz.Stats()
    stats.record(name, case)
    assert stats.features == reached & set(target.extremes)
    assert stats.toured == ordinary
    plain = role(name, "cases").body(RngChooser(np.random.default_rng(0)), INTERPRETER_SCALE)
    stats.record(name, plain)
    assert target.features_of(plain) - set(target.extremes) <= stats.features
