"""The seeded bugs of ``_gather_block_tables_kernel`` (docs/CONTRACT.md §21): one-edit mutants of
vLLM 0.33.0's kernel (``vllm/v1/worker/gpu/block_table.py``), each of which a default run must
catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_gather_block_tables_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("gb_window_for_every_group", T, "gather_block_tables: a group without a window (reach 0) is nulled "
           "up to its first position too",
           (edit("            reach > 0, tl.maximum(first_pos - reach, 0) // block_size, 0\n",
                 "            reach >= 0, tl.maximum(first_pos - reach, 0) // block_size, 0\n"),), V033),
    Mutant("gb_one_null_too_many", T, "gather_block_tables: the first block inside the window is nulled too",
           (edit("            mask=(offset >= num_null) & (offset < num_blocks),\n",
                 "            mask=(offset > num_null) & (offset < num_blocks),\n"),), V033),
    Mutant("gb_row_of_batch_index", T, "gather_block_tables: the source row is the batch row, not its state row",
           (edit("    src_row_ptr = src_block_table_ptr + req_idx * stride\n",
                 "    src_row_ptr = src_block_table_ptr + batch_idx * stride\n"),), V033),
    Mutant("gb_one_block_copied", T, "gather_block_tables: the first 1024 entries of a row only (a long context's "
           "later blocks keep stale ids)",
           (edit("    for i in tl.range(0, num_blocks, BLOCK_SIZE):\n",
                 "    for i in tl.range(0, tl.minimum(num_blocks, BLOCK_SIZE), BLOCK_SIZE):\n"),), V033,
           extreme="row_past_1024_blocks"),
    Mutant("gb_one_block_zeroed", T, "gather_block_tables: a padding row's first 1024 entries zeroed only",
           (edit("        for i in tl.range(0, max_num_blocks, BLOCK_SIZE):\n",
                 "        for i in tl.range(0, tl.minimum(max_num_blocks, BLOCK_SIZE), BLOCK_SIZE):\n"),), V033,
           extreme="padding_past_1024_blocks"),
)
