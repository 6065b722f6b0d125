"""The seeded bugs of ``sample_recovered_tokens_kernel`` (docs/CONTRACT.md §13): one-edit
mutants of vLLM 0.33.0's kernel, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py
writes them out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "sample_recovered_tokens_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("sr_later_tile_wins_ties", T, "recovered: a tile replaces the running maximum when tied (>=), so the later tile wins",
           (edit("        if local_max > max_val:\n", "        if local_max >= max_val:\n"),), V033,
           extreme="tie_at_8192_boundary"),
    Mutant("sr_inv_q_row_by_token", T, "recovered: the noise row is the token's, not the request's",
           (edit("            inv_q_ptr + req_idx * vocab_size + vocab_offset,\n",
                 "            inv_q_ptr + token_idx * vocab_size + vocab_offset,\n"),), V033),
    Mutant("sr_draft_not_masked", T, "recovered, no draft probabilities: the draft token is not masked out",
           (edit("                mask=(vocab_mask & (vocab_offset != draft_token_id)),\n",
                 "                mask=vocab_mask,\n"),), V033),
    Mutant("sr_first_tile_only", T, "recovered: only the first BLOCK_SIZE tokens are searched",
           (edit("    for v in range(0, vocab_size, BLOCK_SIZE):\n", "    for v in range(0, BLOCK_SIZE, BLOCK_SIZE):\n"),),
           V033),
    Mutant("sr_tile_offset_lost", T, "recovered: the winner's index is its lane in the tile, without the tile's offset",
           (edit("            recovered_id = v + local_id\n", "            recovered_id = local_id\n"),), V033),
    Mutant("sr_position_le", T, "recovered: program j = d_r runs (pos > num_draft_tokens), writing the next request's token",
           (edit("    if pos >= num_draft_tokens:\n", "    if pos > num_draft_tokens:\n"),), V033, racy=True),
    Mutant("sr_residual_swapped", T, "recovered: the residual is draft - target instead of target - draft",
           (edit("            prob = tl.maximum(target_prob - draft_prob, 0.0)\n",
                 "            prob = tl.maximum(draft_prob - target_prob, 0.0)\n"),), V033),
    Mutant("sr_target_row_by_position", T, "recovered, no draft probabilities: the target row is the position's, not the token's",
           (edit("                target_probs_ptr + token_idx * vocab_size + vocab_offset,\n                mask=(vocab_mask",
                 "                target_probs_ptr + pos * vocab_size + vocab_offset,\n                mask=(vocab_mask"),), V033),
    Mutant("sr_grid_capped_at_1024", T,
           "recovered: programs past request 1023 redo request 1023 (a max_num_seqs = 1024 assumption)",
           (edit("    req_idx = tl.program_id(0)\n", "    req_idx = tl.minimum(tl.program_id(0), 1023)\n"),), V033,
           extreme="beyond_1024_requests"),
)
