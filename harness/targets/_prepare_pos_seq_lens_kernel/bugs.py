"""The seeded bugs of ``_prepare_pos_seq_lens_kernel`` (docs/CONTRACT.md §15): one-edit mutants of
vLLM 0.33.0's kernel (``vllm/v1/worker/gpu/input_batch.py``), each of which a default run must
catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_prepare_pos_seq_lens_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("ps_pad_from_next", T, "prepare_pos_seq_lens: padding starts one past the batch (seq_lens[B] keeps "
           "a stale length)",
           (edit("        for i in tl.range(num_reqs, max_num_reqs, BLOCK_SIZE):\n",
                 "        for i in tl.range(num_reqs + 1, max_num_reqs, BLOCK_SIZE):\n"),), V033),
    Mutant("ps_length_without_last", T, "prepare_pos_seq_lens: the length leaves out the chunk's last token",
           (edit("    seq_len = num_computed_tokens + query_len\n",
                 "    seq_len = num_computed_tokens + query_len - 1\n"),), V033),
    Mutant("ps_one_block_of_positions", T, "prepare_pos_seq_lens: positions for the first block of a chunk "
           "only (a chunk past 1024 tokens keeps stale positions)",
           (edit("    for i in tl.range(0, query_len, BLOCK_SIZE):\n",
                 "    for i in tl.range(0, tl.minimum(query_len, BLOCK_SIZE), BLOCK_SIZE):\n"),), V033,
           extreme="chunk_past_1024"),
    Mutant("ps_one_block_of_padding", T, "prepare_pos_seq_lens: one block of padding only (max_num_seqs of "
           "2048 and more keeps stale lengths past it)",
           (edit("        for i in tl.range(num_reqs, max_num_reqs, BLOCK_SIZE):\n",
                 "        for i in tl.range(num_reqs, tl.minimum(max_num_reqs, num_reqs + BLOCK_SIZE), BLOCK_SIZE):\n"),),
           V033, extreme="padding_past_1024"),
)
