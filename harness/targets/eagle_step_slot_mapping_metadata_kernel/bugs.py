"""The seeded bugs of ``eagle_step_slot_mapping_metadata_kernel`` (docs/CONTRACT.md §6): one-edit mutants of its
production code, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py writes them
out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import EXTENDED_TIER, V033, Mutant, edit

BUGS: tuple[Mutant, ...] = (
    Mutant(
        "es_exceeds_strict",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: exceeds uses > max_model_len, so a step onto position max_model_len gets a real slot",
        (edit("    exceeds_max = new_position >= max_model_len\n", "    exceeds_max = new_position > max_model_len\n"),),
        V033,
        tier=EXTENDED_TIER,
    ),
    Mutant(
        "es_slot_of_current_position",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: the block lookup uses the current position, not the new one (the slot lags a token)",
        (
            edit(
                "    block_number = clamped_position // block_size\n",
                "    block_number = position // block_size\n",
            ),
            edit(
                "    slot_id = block_id * block_size + (clamped_position % block_size)\n",
                "    slot_id = block_id * block_size + (position % block_size)\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "es_parked_at_last_position",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: a request past max_model_len is parked at max_model_len - 1 instead of 0",
        (
            edit(
                "    clamped_position = tl.where(exceeds_max, 0, new_position)\n",
                "    clamped_position = tl.where(exceeds_max, max_model_len - 1, new_position)\n",
            ),
        ),
        V033,
        tier=EXTENDED_TIER,
    ),
    Mutant(
        "es_padding_unwritten",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: cudagraph padding programs return without writing PADDING_SLOT_ID",
        (
            edit(
                "        tl.store(out_slot_mapping_ptr + req_idx, PAD_ID)\n        return\n",
                "        return\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "es_padding_off_by_one",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: the padding test is req_idx > batch_size, so program batch_size runs as a request",
        (edit("    if req_idx >= batch_size:\n", "    if req_idx > batch_size:\n"),),
        V033,
    ),
    Mutant(
        "es_row_stride_is_width",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: rows are addressed n_blocks_per_req apart instead of block_table_stride",
        (
            edit(
                "    block_id = tl.load(block_table_ptr + req_idx * block_table_stride + block_number)\n",
                "    block_id = tl.load(block_table_ptr + req_idx * n_blocks_per_req + block_number)\n",
            ),
        ),
        V033,
        tier=EXTENDED_TIER,
    ),
    Mutant(
        "es_no_column_clamp",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: the block column is not clamped to n_blocks_per_req - 1",
        (edit("    block_number = tl.minimum(block_number, n_blocks_per_req - 1)\n", ""),),
        V033,
        tier=EXTENDED_TIER,
    ),
    Mutant(
        "es_seq_len_not_reset",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: seq_lens grows by one even for a request parked past max_model_len (not reset to 1)",
        (
            edit(
                "    new_seq_len = tl.where(exceeds_max, 1, seq_len + 1)\n",
                "    new_seq_len = seq_len + 1\n",
            ),
        ),
        V033,
        tier=EXTENDED_TIER,
    ),
    Mutant(
        "es_seq_len_uncapped",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: seq_lens + 1 is not capped at max_model_len",
        (edit("    new_seq_len = tl.minimum(new_seq_len, max_model_len)\n", ""),),
        V033,
        tier=EXTENDED_TIER,
    ),
    Mutant(
        "es_alias_reload",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: the clamped position is stored early and the padding test re-reads the position "
        "from memory, which out_clamped_positions has already overwritten when it is positions itself",
        (
            edit(
                "    clamped_position = tl.where(exceeds_max, 0, new_position)\n",
                "    clamped_position = tl.where(exceeds_max, 0, new_position)\n"
                "    tl.store(out_clamped_positions_ptr + req_idx, clamped_position)\n",
            ),
            edit(
                "    slot_id = tl.where(exceeds_max, PAD_ID, slot_id)\n",
                "    slot_id = tl.where(tl.load(positions_ptr + req_idx) + 1 >= max_model_len, PAD_ID, slot_id)\n",
            ),
        ),
        V033,
    ),
    # -- bugs that need a production extreme (each names the one of ``extremes`` it needs)
    Mutant(
        "es_requests_capped_at_1024",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: programs past the first 1024 are taken for cudagraph padding (max_num_seqs <= 1024 "
        "assumed): request 1024 on gets PADDING_SLOT_ID and keeps its position and seq_len",
        (edit("    if req_idx >= batch_size:\n", "    if req_idx >= tl.minimum(batch_size, 1024):\n"),),
        V033,
        extreme="beyond_1024_requests",
    ),
    Mutant(
        "es_block_id_int16",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: the block id is read as int16 (KV caches of more than 32k blocks wrap)",
        (
            edit(
                "    block_id = tl.load(block_table_ptr + req_idx * block_table_stride + block_number)\n",
                "    block_id = tl.load(block_table_ptr + req_idx * block_table_stride + block_number).to(tl.int16)\n"
                "    block_id = block_id.to(tl.int32)\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "es_position_via_float32",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: the next position is computed in float32 (a port's RoPE arithmetic: inexact past 2**24)",
        (
            edit(
                "    new_position = position + 1\n",
                "    new_position = (position.to(tl.float32) + 1).to(position.dtype)\n",
            ),
        ),
        V033,
        extreme="positions_past_2_24",
    ),
)
