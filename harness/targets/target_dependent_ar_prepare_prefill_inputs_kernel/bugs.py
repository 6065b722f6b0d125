"""The seeded bugs of ``target_dependent_ar_prepare_prefill_inputs_kernel`` (docs/CONTRACT.md §25):
one-edit mutants of vLLM 0.33.0's ``_prepare_prefill_inputs_kernel``
(``vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py``), each of which a default
run must catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "target_dependent_ar_prepare_prefill_inputs_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("dp_chunked_takes_last_sampled", T, "speculator prepare_prefill_inputs: a row still prefilling takes "
           "the last sampled token, not the next prompt token",
           (edit("    if num_sampled > 0:\n", "    if num_sampled >= 0:\n"),), V033),
    Mutant("dp_last_index_one_past", T, "speculator prepare_prefill_inputs: the last token index is one past the "
           "last accepted token",
           (edit("    last_token_index = query_start + query_len - 1\n",
                 "    last_token_index = query_start + query_len\n"),), V033),
    Mutant("dp_pad_with_query_start", T, "speculator prepare_prefill_inputs: query starts past the batch are "
           "padded with the last row's start, not its end",
           (edit("            tl.store(draft_query_start_loc_ptr + block, query_end, mask=mask)\n",
                 "            tl.store(draft_query_start_loc_ptr + block, query_start, mask=mask)\n"),), V033),
    Mutant("dp_one_block_shift", T, "speculator prepare_prefill_inputs: the shifted copy covers one block only "
           "(a row keeping more than 1025 tokens leaves stale ids)",
           (edit("    for i in range(1, query_len, BLOCK_SIZE):\n",
                 "    for i in range(1, tl.minimum(query_len, BLOCK_SIZE + 1), BLOCK_SIZE):\n"),), V033,
           extreme="query_past_1024"),
    Mutant("dp_one_block_padding", T, "speculator prepare_prefill_inputs: one block of padded sequence lengths "
           "only (max_num_seqs of 2048 and more keeps stale lengths)",
           (edit("        for i in range(num_reqs, max_num_reqs, BLOCK_SIZE):\n"
                 "            block = i + tl.arange(0, BLOCK_SIZE)\n"
                 "            mask = block < max_num_reqs\n"
                 "            tl.store(draft_seq_lens_ptr + block, 0, mask=mask)\n",
                 "        for i in range(num_reqs, tl.minimum(max_num_reqs, num_reqs + BLOCK_SIZE), BLOCK_SIZE):\n"
                 "            block = i + tl.arange(0, BLOCK_SIZE)\n"
                 "            mask = block < max_num_reqs\n"
                 "            tl.store(draft_seq_lens_ptr + block, 0, mask=mask)\n"),), V033,
           extreme="padding_past_1024"),
)
