"""The seeded bugs of ``_gather_draft_sampled_kernel`` (docs/CONTRACT.md §23): one-edit mutants of
vLLM 0.33.0's kernel (``vllm/v1/worker/gpu/spec_decode/rejection_sampler.py``), each of which a
default run must catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_gather_draft_sampled_kernel"
PLACEHOLDER = "    is_placeholder = (local_pos > 0) & (pos - local_pos < prefill_len)\n"

BUGS: tuple[Mutant, ...] = (
    Mutant("gd_bonus_placeholder", T, "gather_draft_sampled: a row's first logits row can be a placeholder too "
           "(local_pos >= 0)",
           (edit(PLACEHOLDER, "    is_placeholder = (local_pos >= 0) & (pos - local_pos < prefill_len)\n"),), V033),
    Mutant("gd_placeholder_at_prompt_end", T, "gather_draft_sampled: a step starting at the prompt's end counts as "
           "inside it (pos - local_pos <= prefill_len)",
           (edit(PLACEHOLDER, "    is_placeholder = (local_pos > 0) & (pos - local_pos <= prefill_len)\n"),), V033),
    Mutant("gd_position_of_next_slot", T, "gather_draft_sampled: the position is the next slot's",
           (edit("    pos = tl.load(positions_ptr + token_idx, mask=mask)\n",
                 "    pos = tl.load(positions_ptr + token_idx + 1, mask=mask)\n"),), V033),
    Mutant("gd_one_program", T, "gather_draft_sampled: every program gathers the first block (more than 1024 "
           "logits rows: the later ones stay unwritten)",
           (edit("    block = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n",
                 "    block = tl.arange(0, BLOCK_SIZE)\n"),), V033, extreme="logits_past_1024"),
    Mutant("gd_positions_int16", T, "gather_draft_sampled: positions narrowed to int16 (past 32767 they wrap, and "
           "so does the placeholder test)",
           (edit("    pos = tl.load(positions_ptr + token_idx, mask=mask)\n",
                 "    pos = tl.load(positions_ptr + token_idx, mask=mask).to(tl.int16).to(tl.int64)\n"),), V033,
           extreme="positions_past_32767"),
)
