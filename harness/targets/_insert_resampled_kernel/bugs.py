"""The seeded bugs of ``_insert_resampled_kernel`` (docs/CONTRACT.md §35): one-edit mutants of
vLLM 0.33.0's kernel (``vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py``), each of
which a default run must catch (the NaN one as an edge divergence: production has no NaN)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_insert_resampled_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("ir_count_not_incremented", T, "insert: the count of sampled tokens is stored unchanged",
           (edit("    tl.store(num_sampled_ptr + req_idx, num_sampled + 1)\n",
                 "    tl.store(num_sampled_ptr + req_idx, num_sampled)\n"),), V033),
    Mutant("ir_greedy_skip_inverted", T, "insert: a greedy request skips its bonus and overwrites its corrected token",
           (edit("    if temp == 0.0 and not is_bonus:\n", "    if temp == 0.0 and is_bonus:\n"),), V033),
    Mutant("ir_bonus_never", T, "insert: no row is taken for a bonus (a greedy request's bonus is never inserted)",
           (edit("    is_bonus = resample_token_idx == end_idx - 1\n", "    is_bonus = resample_token_idx == end_idx\n"),),
           V033),
    Mutant("ir_block_past_the_count", T, "insert: one block past resample_num_blocks is read (the next request's "
           "first block, or past the buffer)",
           (edit("    mask = block < resample_num_blocks\n", "    mask = block <= resample_num_blocks\n"),), V033),
    Mutant("ir_padding_plus_inf", T, "insert: the padded blocks read as +inf (their winner taken from past the "
           "blocks)", (edit('        other=float("-inf"),\n', '        other=float("inf"),\n'),), V033),
    Mutant("ir_slot_after_next", T, "insert: the drawn token is written one slot late",
           (edit("        sampled_ptr + req_idx * sampled_stride + num_sampled,\n",
                 "        sampled_ptr + req_idx * sampled_stride + num_sampled + 1,\n"),), V033),
    Mutant("ir_batch_row_temperature", T, "insert: the temperature is read at the batch row, not the state row",
           (edit("    temp = tl.load(temp_ptr + req_state_idx).to(tl.float32)\n",
                 "    temp = tl.load(temp_ptr + req_idx).to(tl.float32)\n"),), V033),
    Mutant("ir_block_lanes_int8", T, "insert: the block lanes counted in int8 (past 127 blocks they wrap before the "
           "request's row)",
           (edit("    block = tl.arange(0, PADDED_RESAMPLE_NUM_BLOCKS)\n",
                 "    block = tl.arange(0, PADDED_RESAMPLE_NUM_BLOCKS).to(tl.int8)\n"),), V033,
           extreme="vocab_past_131072"),
)
