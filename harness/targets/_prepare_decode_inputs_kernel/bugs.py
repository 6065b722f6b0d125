"""The seeded bugs of ``_prepare_decode_inputs_kernel`` (docs/CONTRACT.md §26): one-edit mutants of
vLLM 0.33.0's kernel (``vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py``), each
of which a default run must catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_prepare_decode_inputs_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("dd_position_clamped_at_length", T, "prepare_decode_inputs: a position is clamped at max_model_len, "
           "not max_model_len - 1 (a row at the model's length points past its last slot)",
           (edit("        position = tl.minimum(position + 1, max_model_len - 1)\n",
                 "        position = tl.minimum(position + 1, max_model_len)\n"),), V033),
    Mutant("dd_rejected_ignored", T, "prepare_decode_inputs: the length ignores the rejected tokens",
           (edit("    seq_len = target_seq_len - num_rejected\n", "    seq_len = target_seq_len\n"),), V033),
    Mutant("dd_query_starts_unpadded", T, "prepare_decode_inputs: query starts past the batch are not clamped to "
           "B (padding rows get a token each)",
           (edit("            q = tl.where(block < num_reqs, block, num_reqs)\n", "            q = block\n"),), V033),
    Mutant("dd_one_block_of_query_starts", T, "prepare_decode_inputs: one block of query starts (max_num_seqs of "
           "1024 and more leaves the last ones stale)",
           (edit("        for i in range(0, max_num_reqs + 1, BLOCK_SIZE):\n",
                 "        for i in range(0, tl.minimum(max_num_reqs + 1, BLOCK_SIZE), BLOCK_SIZE):\n"),), V033,
           extreme="max_num_seqs_1024"),
    Mutant("dd_length_int16", T, "prepare_decode_inputs: the target's length is read as int16 (sequences past "
           "32767 wrap)",
           (edit("    target_seq_len = tl.load(target_seq_lens_ptr + req_idx)\n",
                 "    target_seq_len = tl.load(target_seq_lens_ptr + req_idx).to(tl.int16).to(tl.int32)\n"),), V033,
           extreme="lengths_past_32767"),
)
