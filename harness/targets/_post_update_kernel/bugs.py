"""The seeded bugs of ``_post_update_kernel`` (docs/CONTRACT.md §19): one-edit mutants of vLLM
0.33.0's kernel (``vllm/v1/worker/gpu/input_batch.py``), each of which a default run must catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_post_update_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("pu_state_row_zero_masked", T, "post_update: state row 0 is taken for a masked row "
           "(req_state_idx <= 0)", (edit("    if req_state_idx < 0:\n", "    if req_state_idx <= 0:\n"),), V033),
    Mutant("pu_last_token_past_sampled", T, "post_update: the last sampled token is read one past the sampled ones",
           (edit("            sampled_tokens_ptr + req_id * sampled_tokens_stride + num_sampled - 1\n",
                 "            sampled_tokens_ptr + req_id * sampled_tokens_stride + num_sampled\n"),), V033),
    Mutant("pu_rejected_ignored", T, "post_update: the count moves by the whole query (the rejected tokens "
           "counted as computed)",
           (edit("    computed_delta = query_len - num_rejected\n", "    computed_delta = query_len\n"),), V033),
    Mutant("pu_count_set_to_one", T, "post_update: a sampled id's penalties count is set to 1, not incremented "
           "(an id sampled again is counted once)",
           (edit("            tl.store(token_ptr, count + 1)\n", "            tl.store(token_ptr, 1)\n"),), V033),
    Mutant("pu_drafts_at_batch_row", T, "post_update: a non-last rank's drafts land in the batch row's state row",
           (edit("                draft_tokens_out_ptr + req_state_idx * num_draft_tokens + i, token_id\n",
                 "                draft_tokens_out_ptr + req_id * num_draft_tokens + i, token_id\n"),), V033),
    Mutant("pu_length_int16", T, "post_update: the history length is read as int16 (a history past 32767 "
           "tokens is appended at the wrong place)",
           (edit("    total_len = tl.load(total_len_ptr + req_state_idx)\n",
                 "    total_len = tl.load(total_len_ptr + req_state_idx).to(tl.int16).to(tl.int32)\n"),), V033,
           extreme="history_past_32767"),
    Mutant("pu_ids_int16", T, "post_update: the penalties count of a sampled id is found by its int16 value "
           "(ids past 32767 count another id)",
           (edit("                + token_id\n", "                + token_id.to(tl.int16)\n"),), V033,
           extreme="ids_past_32767"),
)
