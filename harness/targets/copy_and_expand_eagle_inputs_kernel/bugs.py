"""The seeded bugs of ``copy_and_expand_eagle_inputs_kernel`` (docs/CONTRACT.md §1): one-edit mutants of its
production code, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py writes them
out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import EXTENDED_TIER, Mutant, edit

BUGS: tuple[Mutant, ...] = (
    Mutant(
        'ce_hidden_map_valid_only',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the hidden-state mapping covers only the valid tokens, not every input token',
        (
            edit(
                """\
        is_input_region = j < num_input_tokens_this_request
""",
                """\
        is_input_region = j < num_valid_tokens
""",
            ),
        ),
    ),
    Mutant(
        'ce_hidden_map_without_shift',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the hidden-state mapping is written in non-shift mode too',
        (
            edit(
                """\
    if shift_input_ids:
        num_input_tokens_this_request = next_query_start_loc - query_start_loc
        is_input_region = j < num_input_tokens_this_request
        src_idx = query_start_loc + j
        tl.store(out_hidden_state_mapping_ptr + src_idx, out_idx, mask=is_input_region)
""",
                """\
    num_input_tokens_this_request = next_query_start_loc - query_start_loc
    is_input_region = j < num_input_tokens_this_request
    src_idx = query_start_loc + j
    tl.store(out_hidden_state_mapping_ptr + src_idx, out_idx, mask=is_input_region)
""",
            ),
        ),
    ),
    Mutant(
        'ce_ids_not_shifted',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: input_offset is 0 in shift mode too (valid slots copy qs + j instead of qs + 1 + j)',
        (
            edit(
                """\
        input_offset = 1
""",
                """\
        input_offset = 0
""",
            ),
        ),
    ),
    Mutant(
        'ce_in_bounds_off_by_one',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: in_bounds uses <= total_output_tokens, so each request writes one slot too many',
        (
            edit(
                """\
    in_bounds = j < total_output_tokens
""",
                """\
    in_bounds = j <= total_output_tokens
""",
            ),
        ),
    ),
    Mutant(
        'ce_masked_includes_bonus',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the masked (parallel) mask is also set on the bonus slot',
        (
            edit(
                """\
    is_masked_out = is_parallel_draft_region & in_bounds
""",
                """\
    is_masked_out = (j >= num_valid_tokens) & (
        j < num_valid_tokens + num_padding_slots_per_request
    ) & in_bounds
""",
            ),
        ),
    ),
    Mutant(
        'ce_new_token_index_local',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: new-token indices store the local slot j instead of the absolute output slot',
        (
            edit(
                """\
        out_idx,
""",
                """\
        j,
""",
            ),
        ),
    ),
    Mutant(
        'ce_new_token_index_one_too_many',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the new-token region ends at nv + P inclusive, storing one index too many per request',
        (
            edit(
                """\
    is_new_token_region = (j >= num_valid_tokens) & (
        j < num_valid_tokens + num_padding_slots_per_request
""",
                """\
    is_new_token_region = (j >= num_valid_tokens) & (
        j <= num_valid_tokens + num_padding_slots_per_request
""",
            ),
        ),
    ),
    Mutant(
        'ce_output_start_shift_uses_p',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: output_start ignores the shift (uses P instead of P - 1)',
        (
            edit(
                """\
        output_start = query_start_loc + request_idx * (
            num_padding_slots_per_request - 1
        )
""",
                """\
        output_start = query_start_loc + request_idx * num_padding_slots_per_request
""",
            ),
        ),
    ),
    Mutant(
        'ce_parallel_uses_padding_id',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: parallel-drafting slots get padding_token_id instead of parallel_drafting_token_id',
        (
            edit(
                """\
        is_parallel_draft_region, parallel_drafting_token_id, token_ids
""",
                """\
        is_parallel_draft_region, padding_token_id, token_ids
""",
            ),
        ),
    ),
    Mutant(
        'ce_positions_shifted',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the start position is read at qs + input_offset (positions shifted like the ids)',
        (
            edit(
                """\
    start_pos = tl.load(target_positions_ptr + query_start_loc)
""",
                """\
    start_pos = tl.load(target_positions_ptr + query_start_loc + input_offset)
""",
            ),
        ),
    ),
    Mutant(
        'ce_rejected_positions_not_zeroed',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: rejected slots keep p0 + j as position instead of 0',
        (
            edit(
                """\
    # Rejected positions are don't-care, set to 0
    positions = tl.where(is_rejected_region, 0, positions)
""",
                """\
""",
            ),
        ),
    ),
    Mutant(
        'ce_query_start_loc_int16',
        'copy_and_expand_eagle_inputs_kernel',
        "copy_and_expand: a request's query_start_loc is read as int16 (requests starting past 32767 wrap)",
        (
            edit(
                """\
    query_start_loc = tl.load(query_start_loc_ptr + request_idx)
""",
                """\
    query_start_loc = tl.load(query_start_loc_ptr + request_idx).to(tl.int16)
""",
            ),
        ),
        extreme='starts_past_32767',
    ),
    Mutant(
        'ce_valid_region_capped_at_2048',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: valid slots past 2048 are not copied (a port that caps prefill chunks at 2048 tokens)',
        (
            edit(
                """\
    is_valid_region = j < num_valid_tokens
""",
                """\
    is_valid_region = j < tl.minimum(num_valid_tokens, 2048)
""",
            ),
        ),
        extreme='prefill_thousands',
    ),
    Mutant(
        'ce_rejected_tail_capped_at_15',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: only the first 15 rejected slots are marked rejected (num_speculative_tokens <= 15 assumed)',
        (
            edit(
                """\
    is_rejected_region = j >= num_valid_tokens + num_padding_slots_per_request
""",
                """\
    is_rejected_region = (j >= num_valid_tokens + num_padding_slots_per_request) & (
        j < num_valid_tokens + num_padding_slots_per_request + 15
    )
""",
            ),
        ),
        extreme='many_rejected',
    ),
    Mutant(
        'ce_new_token_index_int16',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the new-token index r * P is computed in int16 (overflows once r * P passes 32767)',
        (
            edit(
                """\
        request_idx * num_padding_slots_per_request + new_token_local_idx
""",
                """\
        (request_idx * num_padding_slots_per_request).to(tl.int16) + new_token_local_idx
""",
            ),
        ),
        extreme='rp_past_32767',
    ),
    Mutant(
        'ce_positions_via_float32',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: positions go through float32 (a port computing RoPE positions in fp32: inexact past 2**24)',
        (
            edit(
                """\
    positions = start_pos + j
""",
                """\
    positions = (start_pos + j).to(tl.float32).to(tl.int64)
""",
            ),
        ),
        extreme='positions_past_2_24',
    ),
    Mutant(
        'ce_padding_id_first_block_only',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: rejected slots get padding_token_id only in the first token block, 0 in the others '
        '(identical whenever padding_token_id is 0, the literal at vLLM\'s call site: an extended-tier bug, issue 22)',
        (
            edit(
                """\
    token_ids = tl.where(is_rejected_region, padding_token_id, token_ids)
""",
                """\
    token_ids = tl.where(is_rejected_region, padding_token_id, token_ids)
    token_ids = tl.where(is_rejected_region & (token_batch_idx > 0), 0, token_ids)
""",
            ),
        ),
        tier=EXTENDED_TIER,
    ),
)
