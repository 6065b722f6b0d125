"""The seeded bugs of ``input_batch_prepare_prefill_inputs_kernel`` (docs/CONTRACT.md §14): one-edit
mutants of vLLM 0.33.0's ``_prepare_prefill_inputs_kernel`` (``vllm/v1/worker/gpu/input_batch.py``),
each of which a default run must catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "input_batch_prepare_prefill_inputs_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("pp_lookahead_reads_prompt_end", T, "prepare_prefill_inputs: the lookahead reads the token at the "
           "prompt's end too (pos <= prefill_len)",
           (edit("        request_ptr + pos, mask=in_lookahead & (pos < prefill_len), other=0\n",
                 "        request_ptr + pos, mask=in_lookahead & (pos <= prefill_len), other=0\n"),), V033),
    Mutant("pp_copy_from_next_token", T, "prepare_prefill_inputs: the chunk is copied from one token past the "
           "computed count",
           (edit("        tokens = tl.load(request_ptr + num_computed + block, mask=mask)\n",
                 "        tokens = tl.load(request_ptr + num_computed + 1 + block, mask=mask)\n"),), V033),
    Mutant("pp_lookahead_transposed", T, "prepare_prefill_inputs: next_prefill_tokens addressed state-row major "
           "(req_state_idx * stride + k)",
           (edit("        + lookahead * next_prefill_tokens_stride\n        + req_state_idx,\n",
                 "        + req_state_idx * next_prefill_tokens_stride\n        + lookahead,\n"),), V033),
    Mutant("pp_one_block", T, "prepare_prefill_inputs: the first block of a chunk only (a chunk past 1024 "
           "tokens leaves stale ids)",
           (edit("    for i in range(0, query_len, BLOCK_SIZE):\n",
                 "    for i in range(0, tl.minimum(query_len, BLOCK_SIZE), BLOCK_SIZE):\n"),), V033,
           extreme="chunk_past_1024"),
    Mutant("pp_count_int16", T, "prepare_prefill_inputs: the computed count is read as int16 (a chunk past "
           "token 32767 of its prompt is copied from the wrong place)",
           (edit("    num_computed = tl.load(num_computed_tokens_ptr + req_state_idx)\n",
                 "    num_computed = tl.load(num_computed_tokens_ptr + req_state_idx).to(tl.int16).to(tl.int32)\n"),),
           V033, extreme="prompt_past_32767"),
)
