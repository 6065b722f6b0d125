"""The seeded bugs of ``_update_draft_inputs_kernel`` (docs/CONTRACT.md §27): one-edit mutants of
vLLM 0.33.0's kernel (``vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py``), each
of which a default run must catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_update_draft_inputs_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("ud_last_step_updates", T, "update_draft_inputs: the last step updates the inputs too "
           "(step > num_speculative_steps - 1)",
           (edit("    if step >= num_speculative_steps - 1:\n", "    if step > num_speculative_steps - 1:\n"),), V033),
    Mutant("ud_length_clamped_short", T, "update_draft_inputs: a length is clamped at max_model_len - 1",
           (edit("        seq_len = tl.minimum(seq_len + 1, max_model_len)\n",
                 "        seq_len = tl.minimum(seq_len + 1, max_model_len - 1)\n"),), V033),
    Mutant("ud_hidden_of_next_row", T, "update_draft_inputs: the hidden state is the next row's",
           (edit("            hidden_states_ptr + req_idx * hidden_states_stride + block,\n",
                 "            hidden_states_ptr + (req_idx + 1) * hidden_states_stride + block,\n"),), V033),
    Mutant("ud_one_block_of_hidden", T, "update_draft_inputs: the first 1024 hidden values only (every model's "
           "hidden state is wider)",
           (edit("    for i in range(0, hidden_size, BLOCK_SIZE):\n",
                 "    for i in range(0, tl.minimum(hidden_size, BLOCK_SIZE), BLOCK_SIZE):\n"),), V033,
           extreme="hidden_past_1024"),
    Mutant("ud_grid_capped_at_1024", T, "update_draft_inputs: programs past row 1023 redo row 1023",
           (edit("    req_idx = tl.program_id(0)\n", "    req_idx = tl.minimum(tl.program_id(0), 1023)\n"),), V033,
           extreme="beyond_1024_rows"),
)
