"""The seeded bugs of ``_expand_idx_mapping_kernel`` (docs/CONTRACT.md §17): one-edit mutants of
vLLM 0.33.0's kernel (``vllm/v1/worker/gpu/input_batch.py``), each of which a default run must
catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_expand_idx_mapping_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("ei_local_pos_from_one", T, "expand_idx_mapping: local positions count from 1",
           (edit("    tl.store(expanded_local_pos_ptr + start_idx + block, block, mask=mask)\n",
                 "    tl.store(expanded_local_pos_ptr + start_idx + block, block + 1, mask=mask)\n"),), V033),
    Mutant("ei_mask_one_past", T, "expand_idx_mapping: the mask lets one lane past the row (block <= num_tokens): "
           "it writes the next row's first entry (racy on a GPU)",
           (edit("    mask = block < num_tokens\n", "    mask = block <= num_tokens\n"),), V033, racy=True),
    Mutant("ei_at_most_16", T, "expand_idx_mapping: a row of at most 16 logits assumed (num_speculative_tokens "
           "<= 15): the 17th and later are not written",
           (edit("    mask = block < num_tokens\n", "    mask = (block < num_tokens) & (block < 16)\n"),), V033,
           extreme="sixteen_drafts"),
    Mutant("ei_grid_capped_at_1024", T, "expand_idx_mapping: programs past row 1023 redo row 1023 (a "
           "max_num_seqs = 1024 assumption)",
           (edit("    req_idx = tl.program_id(0)\n", "    req_idx = tl.minimum(tl.program_id(0), 1023)\n"),), V033,
           extreme="beyond_1024_rows"),
)
