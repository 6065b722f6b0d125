"""The seeded bugs of ``_flatten_sampled_kernel`` (docs/CONTRACT.md §24): one-edit mutants of vLLM
0.33.0's kernel (``vllm/v1/worker/gpu/spec_decode/rejection_sampler.py``), each of which a
default run must catch."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_flatten_sampled_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("fs_stride_k", T, "flatten_sampled: rows of sampled read num_speculative_steps apart, not "
           "sampled_stride (K + 1)",
           (edit("        token_id = tl.load(sampled_ptr + req_idx * sampled_stride + i)\n",
                 "        token_id = tl.load(sampled_ptr + req_idx * (sampled_stride - 1) + i)\n"),), V033),
    Mutant("fs_last_token_dropped", T, "flatten_sampled: the last sampled token of a row is not written",
           (edit("    for i in range(num_sampled):\n", "    for i in range(num_sampled - 1):\n"),), V033),
    Mutant("fs_ids_int16", T, "flatten_sampled: token ids are narrowed to int16 (ids past 32767 wrap)",
           (edit("        tl.store(flat_sampled_ptr + start_idx + i, token_id)\n",
                 "        tl.store(flat_sampled_ptr + start_idx + i, token_id.to(tl.int16))\n"),), V033,
           extreme="ids_past_32767"),
    Mutant("fs_grid_capped_at_1024", T, "flatten_sampled: programs past row 1023 redo row 1023",
           (edit("    req_idx = tl.program_id(0)\n", "    req_idx = tl.minimum(tl.program_id(0), 1023)\n"),), V033,
           extreme="beyond_1024_rows"),
)
