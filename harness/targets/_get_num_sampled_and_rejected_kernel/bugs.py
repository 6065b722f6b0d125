"""The seeded bugs of ``_get_num_sampled_and_rejected_kernel`` (docs/CONTRACT.md §18): one-edit
mutants of vLLM 0.33.0's kernel (``vllm/v1/worker/gpu/input_batch.py``), each of which a
default run must catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_get_num_sampled_and_rejected_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("gs_prompt_end_is_chunked", T, "get_num_sampled_and_rejected: a row at its prompt's end counts as "
           "still prefilling (seq_len <= prefill_len): its first sampled token is dropped",
           (edit("    is_chunked_prefilling = seq_len < prefill_len\n",
                 "    is_chunked_prefilling = seq_len <= prefill_len\n"),), V033),
    Mutant("gs_prompt_of_batch_row", T, "get_num_sampled_and_rejected: the prompt length is read at the batch "
           "row, not its state row",
           (edit("    prefill_len = tl.load(prefill_len_ptr + req_state_idx)\n",
                 "    prefill_len = tl.load(prefill_len_ptr + batch_idx)\n"),), V033),
    Mutant("gs_rejected_not_zeroed", T, "get_num_sampled_and_rejected: a chunked row's rejected count is "
           "not zeroed",
           (edit("    num_rejected = tl.where(is_chunked_prefilling, 0, num_rejected)\n", ""),), V033),
    Mutant("gs_seq_len_int16", T, "get_num_sampled_and_rejected: the sequence length is read as int16 "
           "(a sequence past 32767 tokens looks shorter than its prompt)",
           (edit("    seq_len = tl.load(seq_lens_ptr + batch_idx)\n",
                 "    seq_len = tl.load(seq_lens_ptr + batch_idx).to(tl.int16).to(tl.int32)\n"),), V033,
           extreme="seq_lens_past_32767"),
)
