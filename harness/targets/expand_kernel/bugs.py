"""The seeded bugs of ``expand_kernel`` (docs/CONTRACT.md §12): one-edit mutants of vLLM
0.33.0's kernel, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py writes them
out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "expand_kernel"
WHERE = "    src_val = tl.where(src_val == replace_from, replace_to, src_val)\n"
STORE = "    tl.store(output_ptr + start_idx + offset, src_val, mask=offset < num_tokens)\n"

BUGS: tuple[Mutant, ...] = (
    Mutant("ex_no_replace", T, "expand: replace_from is not replaced (a greedy temperature stays 0)",
           (edit(WHERE, ""),), V033),
    Mutant("ex_replace_swapped", T, "expand: replace_to is replaced by replace_from (the arguments swapped)",
           (edit(WHERE, "    src_val = tl.where(src_val == replace_to, replace_from, src_val)\n"),), V033),
    Mutant("ex_mask_le", T, "expand: the mask is offset <= num_tokens (one token too many per request)",
           (edit(STORE, STORE.replace("offset < num_tokens", "offset <= num_tokens")),), V033),
    Mutant("ex_no_mask", T, "expand: the store is unmasked (every request writes MAX_NUM_TOKENS tokens)",
           (edit(STORE, "    tl.store(output_ptr + start_idx + offset, src_val)\n"),), V033, racy=True),
    Mutant("ex_start_at_own_end", T, "expand: a request starts at its own end cu[r] instead of cu[r-1]",
           (edit("        start_idx = tl.load(cu_num_tokens_ptr + req_idx - 1)\n",
                 "        start_idx = tl.load(cu_num_tokens_ptr + req_idx) - 1\n"),), V033),
    Mutant("ex_input_of_next", T, "expand: each request repeats the next request's value",
           (edit("    src_val = tl.load(input_ptr + req_idx)\n", "    src_val = tl.load(input_ptr + req_idx + 1)\n"),), V033),
    Mutant("ex_compare_truncated", T, "expand: the value is compared after truncation to int32 (0.5 counts as 0)",
           (edit(WHERE, "    src_val = tl.where(src_val.to(tl.int32) == replace_from, replace_to, src_val)\n"),), V033),
    Mutant("ex_first_row_at_one", T, "expand: request 0 starts at token 1",
           (edit("        start_idx = tl.zeros([], dtype=cu_num_tokens_ptr.dtype.element_ty)\n",
                 "        start_idx = tl.zeros([], dtype=cu_num_tokens_ptr.dtype.element_ty) + 1\n"),), V033),
    Mutant("ex_grid_capped_at_1024", T,
           "expand: programs past request 1023 redo request 1023 (a max_num_seqs = 1024 assumption)",
           (edit("    req_idx = tl.program_id(0)\n", "    req_idx = tl.minimum(tl.program_id(0), 1023)\n"),), V033,
           extreme="beyond_1024_requests"),
    Mutant("ex_half_lanes", T, "expand: only MAX_NUM_TOKENS // 2 lanes (rows past 64 tokens truncated)",
           (edit("    offset = tl.arange(0, MAX_NUM_TOKENS)\n", "    offset = tl.arange(0, MAX_NUM_TOKENS // 2)\n"),), V033,
           extreme="row_of_128"),
)
