"""The seeded bugs of ``copy_and_expand_dflash_inputs_kernel`` (docs/CONTRACT.md §9): one-edit mutants of its
production code, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py writes them
out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import EXTENDED_TIER, V033, Mutant, edit

# Mutants of vLLM 0.33's module (the bundled copy predates the kernel). "(variant on)" marks the
# bugs only the has_num_rejected variant can show; the others show in both.
BUGS: tuple[Mutant, ...] = (
    Mutant(
        "dfl_block_clamp_off_by_one",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: the block number is clamped to block_table_stride instead of stride - 1 "
        "(positions past the row read the next row's first entry)",
        (edit("block_num = tl.minimum(block_num, block_table_stride - 1)",
               "block_num = tl.minimum(block_num, block_table_stride)"),),
        V033,
        tier=EXTENDED_TIER,
    ),
    Mutant(
        "dfl_block_table_row_0",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: the block-table lookup forgets the request's row (every request reads row 0)",
        (edit("block_table_ptr + req_idx * block_table_stride + block_num,",
               "block_table_ptr + block_num,"),),
        V033,
    ),
    Mutant(
        "dfl_last_pos_ignores_rejected",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash (variant on): the query continues after the last context token, rejected ones "
        "included (valid_ctx_end = ctx_end)",
        (edit("valid_ctx_end = ctx_end - num_rejected", "valid_ctx_end = ctx_end"),),
        V033,
    ),
    Mutant(
        "dfl_last_pos_off_by_one",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: the last accepted position is read at valid_ctx_end instead of valid_ctx_end - 1",
        (edit("last_pos = tl.load(target_positions_ptr + valid_ctx_end - 1)",
               "last_pos = tl.load(target_positions_ptr + valid_ctx_end)"),),
        V033,
    ),
    Mutant(
        "dfl_offset_as_mask",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: the in-block offset is positions & (block_size - 1), right for power-of-two "
        "block sizes only",
        (edit("slot = block_id * block_size + (positions % block_size)",
               "slot = block_id * block_size + (positions & (block_size - 1))"),),
        V033,
    ),
    Mutant(
        "dfl_query_out_uses_k",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: query slots are laid out with a stride of num_speculative_tokens instead of "
        "num_query_per_req",
        (edit("query_out = req_idx * num_query_per_req + query_off",
               "query_out = req_idx * num_speculative_tokens + query_off"),),
        V033,
    ),
    Mutant(
        "dfl_sample_includes_bonus",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: token indices are also stored for the bonus slot (query_off >= 0)",
        (edit("is_sample = is_query & (query_off > 0)", "is_sample = is_query & (query_off >= 0)"),),
        V033,
    ),
    Mutant(
        "dfl_sample_index_stride_q",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: token indices are laid out with a stride of num_query_per_req instead of "
        "num_speculative_tokens",
        (edit("sample_out_idx = req_idx * num_speculative_tokens + (query_off - 1)",
               "sample_out_idx = req_idx * num_query_per_req + (query_off - 1)"),),
        V033,
    ),
    Mutant(
        "dfl_slot_int32",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: the block id is not widened to int64, so block_id * block_size wraps in int32",
        (edit("""\
    ).to(tl.int64)
    slot = block_id""", """\
    )
    slot = block_id"""),),
        V033,
        tier=EXTENDED_TIER,
    ),
    # -- bugs that need a production extreme (each names the one of ``extremes`` it needs)
    Mutant(
        "dfl_ctx_start_int16",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: a request's query_start_loc is read as int16 (contexts starting past 32767 wrap)",
        (edit("    ctx_start = tl.load(query_start_loc_ptr + req_idx)\n",
              "    ctx_start = tl.load(query_start_loc_ptr + req_idx).to(tl.int16)\n"),),
        V033,
        extreme="offsets_past_32767",
    ),
    Mutant(
        "dfl_ctx_positions_capped_at_2048",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: context positions past a request's first 2048 tokens are not copied (a port that caps "
        "prefill chunks at 2048 tokens)",
        (edit("    tl.store(out_context_positions_ptr + ctx_pos_out, ctx_pos, mask=is_ctx)\n",
              "    tl.store(out_context_positions_ptr + ctx_pos_out, ctx_pos, mask=is_ctx & (j < 2048))\n"),),
        V033,
        extreme="prefill_thousands",
    ),
)
