"""The seeded bugs of ``_post_update_num_computed_tokens_kernel`` (docs/CONTRACT.md §20): one-edit
mutants of vLLM 0.33.0's kernel (``vllm/v1/worker/gpu/input_batch.py``), each of which a
default run must catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_post_update_num_computed_tokens_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("pc_batch_row_as_state_row", T, "post_update_num_computed_tokens: the count of state row b is "
           "updated, not the one idx_mapping names",
           (edit("    num_computed = tl.load(num_computed_tokens_ptr + req_state_idx)\n"
                 "    tl.store(num_computed_tokens_ptr + req_state_idx, num_computed + query_len)\n",
                 "    num_computed = tl.load(num_computed_tokens_ptr + batch_id)\n"
                 "    tl.store(num_computed_tokens_ptr + batch_id, num_computed + query_len)\n"),), V033),
    Mutant("pc_next_rows_length", T, "post_update_num_computed_tokens: the query length is the next row's",
           (edit("    query_end = tl.load(query_start_loc_ptr + batch_id + 1)\n",
                 "    query_end = tl.load(query_start_loc_ptr + batch_id + 1)\n"
                 "    query_start = tl.load(query_start_loc_ptr + batch_id + 1)\n"
                 "    query_end = tl.load(query_start_loc_ptr + batch_id + 2)\n"),), V033),
    Mutant("pc_count_int16", T, "post_update_num_computed_tokens: the new count is narrowed to int16 (counts "
           "past 32767 wrap)",
           (edit("    tl.store(num_computed_tokens_ptr + req_state_idx, num_computed + query_len)\n",
                 "    tl.store(num_computed_tokens_ptr + req_state_idx, (num_computed + query_len).to(tl.int16))\n"),),
           V033, extreme="counts_past_32767"),
    Mutant("pc_offsets_int16", T, "post_update_num_computed_tokens: query_start_loc is read as int16 "
           "(a row starting past token 32767 gets a wrong length)",
           (edit("    query_start = tl.load(query_start_loc_ptr + batch_id)\n",
                 "    query_start = tl.load(query_start_loc_ptr + batch_id).to(tl.int16).to(tl.int32)\n"),),
           V033, extreme="offsets_past_32767"),
)
