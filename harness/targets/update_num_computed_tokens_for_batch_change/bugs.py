"""The seeded bugs of ``update_num_computed_tokens_for_batch_change`` (docs/CONTRACT.md §8): one-edit mutants of its
production code, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py writes them
out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

BUGS: tuple[Mutant, ...] = (
    Mutant(
        "bc_drafts_ignored",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: every request of the previous batch is corrected, also those without drafts",
        (
            edit(
                "    participating = (prev_positions >= 0) & (prev_drafts > 0)\n",
                "    participating = prev_positions >= 0\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "bc_new_requests_participate",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: a new request (prev_position -1) is corrected from row 0 when row 0 had drafts",
        (
            edit(
                "    participating = (prev_positions >= 0) & (prev_drafts > 0)\n",
                "    participating = prev_drafts > 0\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "bc_optimistic_count",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: corrected with the drafts (all accepted: the optimistic count) instead of the valid count",
        (
            edit(
                "    corrected = prev_computed + valid_counts.int()\n",
                "    corrected = prev_computed + prev_drafts\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "bc_current_rows",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: the previous count is read at the request's current row, not its previous row",
        (
            edit(
                "    prev_computed = num_computed_tokens[gather_indices]\n",
                "    prev_computed = num_computed_tokens[: prev_positions.shape[0]].clone()\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "bc_accepted_reset",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: num_accepted_tokens of requests without drafts is reset to 1 instead of kept",
        (
            edit(
                "        torch.where(participating, valid_counts, num_accepted_tokens)\n",
                "        torch.where(participating, valid_counts, 1)\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "bc_compiled_path_differs",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: stands for a miscompilation: under torch.compile only, the drafts test is dropped "
        "(the eager function is right; the harness must run the compiled one to see it)",
        (
            edit(
                "    participating = (prev_positions >= 0) & (prev_drafts > 0)\n",
                "    participating = (prev_positions >= 0) & ((prev_drafts > 0) | torch.compiler.is_compiling())\n",
            ),
        ),
        V033,
    ),
    # -- bugs that need a production extreme (each names the one of ``extremes`` it needs)
    Mutant(
        "bc_rows_capped_at_1024",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: only requests from the first 1024 rows of the previous batch are corrected "
        "(max_num_seqs <= 1024 assumed): the others take the CPU count",
        (
            edit(
                "    participating = (prev_positions >= 0) & (prev_drafts > 0)\n",
                "    participating = (prev_positions >= 0) & (prev_positions < 1024) & (prev_drafts > 0)\n",
            ),
        ),
        V033,
        extreme="beyond_1024_requests",
    ),
    Mutant(
        "bc_valid_count_capped_at_15",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: the valid count added is capped at 15 (num_speculative_tokens <= 14 assumed): a "
        "request with 15 or more drafts all accepted is corrected short",
        (
            edit(
                "    corrected = prev_computed + valid_counts.int()\n",
                "    corrected = prev_computed + valid_counts.clamp(max=15).int()\n",
            ),
        ),
        V033,
        extreme="spec_tokens_15_plus",
    ),
)
