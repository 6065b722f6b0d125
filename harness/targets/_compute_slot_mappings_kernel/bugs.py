"""The seeded bugs of ``_compute_slot_mappings_kernel`` (docs/CONTRACT.md §22): one-edit mutants of
vLLM 0.33.0's kernel (``vllm/v1/worker/gpu/block_table.py``), each of which a default run must
catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_compute_slot_mappings_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("sm_pad_from_next_token", T, "compute_slot_mappings: padding starts one past the step's tokens (a "
           "stale slot survives there: PR #36580's class)",
           (edit("        for i in range(actual_num_tokens, max_num_tokens, TRITON_BLOCK_SIZE):\n",
                 "        for i in range(actual_num_tokens + 1, max_num_tokens, TRITON_BLOCK_SIZE):\n"),), V033),
    Mutant("sm_disabled_group_slots", T, "compute_slot_mappings: a group without slot mappings gets slots (only "
           "dummy rows are padded)",
           (edit("        slot_ids = tl.where(mapping_enabled & is_real_req, slot_ids, PAD_ID)\n",
                 "        slot_ids = tl.where(is_real_req, slot_ids, PAD_ID)\n"),), V033),
    Mutant("sm_cp_global_offset", T, "compute_slot_mappings: under context parallelism the offset in the block is "
           "the global position's, not the local one's",
           (edit("        block_offsets = local_positions % kv_block_size\n",
                 "        block_offsets = positions % kv_block_size\n"),), V033),
    Mutant("sm_one_block_of_tokens", T, "compute_slot_mappings: the first 1024 tokens of a row only (a longer "
           "chunk keeps stale slots)",
           (edit("    for i in range(start_idx, end_idx, TRITON_BLOCK_SIZE):\n",
                 "    for i in range(start_idx, tl.minimum(end_idx, start_idx + TRITON_BLOCK_SIZE), TRITON_BLOCK_SIZE):\n"),),
           V033, extreme="chunk_past_1024"),
    Mutant("sm_one_block_of_padding", T, "compute_slot_mappings: one block of padding only (a buffer more than "
           "1024 slots past the step keeps stale slots)",
           (edit("        for i in range(actual_num_tokens, max_num_tokens, TRITON_BLOCK_SIZE):\n",
                 "        for i in range(actual_num_tokens, tl.minimum(max_num_tokens, actual_num_tokens + TRITON_BLOCK_SIZE), TRITON_BLOCK_SIZE):\n"),),
           V033, extreme="padding_past_1024"),
)
