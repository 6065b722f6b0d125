"""The seeded bugs of ``_combine_sampled_and_draft_tokens_kernel`` (docs/CONTRACT.md §16): one-edit
mutants of vLLM 0.33.0's kernel (``vllm/v1/worker/gpu/input_batch.py``), each of which a default
run must catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_combine_sampled_and_draft_tokens_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("cs_prompt_end_decodes", T, "combine_sampled_and_draft_tokens: a row at its prompt's end "
           "(seq_len = prefill_len) is taken for a decoding one",
           (edit("    if seq_len <= prefill_len:\n", "    if seq_len < prefill_len:\n"),), V033),
    Mutant("cs_drafts_of_batch_row", T, "combine_sampled_and_draft_tokens: the drafts are read at the batch row, "
           "not its state row",
           (edit("            draft_tokens_ptr + req_state_idx * draft_tokens_stride + block,\n",
                 "            draft_tokens_ptr + batch_idx * draft_tokens_stride + block,\n"),), V033),
    Mutant("cs_tail_overwritten", T, "combine_sampled_and_draft_tokens: the bonus is written when the logits "
           "start at the prompt's last token too (first_logit_seq_pos >= prefill_len - 1)",
           (edit("    if NUM_NEW_SAMPLED_TOKENS > 0 and first_logit_seq_pos >= prefill_len:\n",
                 "    if NUM_NEW_SAMPLED_TOKENS > 0 and first_logit_seq_pos >= prefill_len - 1:\n"),), V033),
    Mutant("cs_ids_int16", T, "combine_sampled_and_draft_tokens: the last sampled id is narrowed to int16 (ids "
           "past 32767 wrap)",
           (edit("        tl.store(input_ids_ptr + logits_start, last_token_id)\n",
                 "        tl.store(input_ids_ptr + logits_start, last_token_id.to(tl.int16))\n"),), V033,
           extreme="ids_past_32767"),
    Mutant("cs_query_end_int16", T, "combine_sampled_and_draft_tokens: the query end is read as int16 (rows "
           "ending past token 32767 get wrong logits indices)",
           (edit("    query_end = tl.load(query_start_loc_ptr + batch_idx + 1)\n",
                 "    query_end = tl.load(query_start_loc_ptr + batch_idx + 1).to(tl.int16).to(tl.int32)\n"),), V033,
           extreme="offsets_past_32767"),
)
