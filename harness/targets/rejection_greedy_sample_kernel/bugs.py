"""The seeded bugs of ``rejection_greedy_sample_kernel`` (docs/CONTRACT.md §10): one-edit
mutants of vLLM 0.33.0's kernel, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py
writes them out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "rejection_greedy_sample_kernel"
BONUS = "    if not rejected:\n        # If all tokens are accepted, append the bonus token.\n"

BUGS: tuple[Mutant, ...] = (
    Mutant("gr_bonus_after_rejection", T, "greedy: the bonus id is appended even after a rejection",
           (edit(BONUS, "    if True:\n        # If all tokens are accepted, append the bonus token.\n"),), V033),
    Mutant("gr_row_stride_max_spec_len", T, "greedy: rows are max_spec_len apart instead of max_spec_len + 1",
           (edit("            output_token_ids_ptr + req_idx * (max_spec_len + 1) + pos,\n",
                 "            output_token_ids_ptr + req_idx * max_spec_len + pos,\n"),), V033),
    Mutant("gr_reject_on_match", T, "greedy: a draft is rejected when it equals the argmax (the test inverted)",
           (edit("                rejected = draft_token_id != target_argmax_id\n",
                 "                rejected = draft_token_id == target_argmax_id\n"),), V033),
    Mutant("gr_writes_draft", T, "greedy: the slot holds the draft id, not the argmax (wrong at a rejection)",
           (edit("                token_id = target_argmax_id\n", "                token_id = draft_token_id\n"),), V033),
    Mutant("gr_synthetic_le", T, "greedy, synthetic mode: accepted when uniform <= rate (u < c is strict)",
           (edit("                accepted = (uniform_prob < rate) and draft_token_id >= 0\n",
                 "                accepted = (uniform_prob <= rate) and draft_token_id >= 0\n"),), V033),
    Mutant("gr_synthetic_accepts_minus_one", T, "greedy, synthetic mode: a -1 draft can be accepted (0.20-0.24's body)",
           (edit("                accepted = (uniform_prob < rate) and draft_token_id >= 0\n",
                 "                accepted = uniform_prob < rate\n"),), V033),
    Mutant("gr_rate_by_token", T, "greedy, synthetic mode: the rate is read at the token index, not the position",
           (edit("                rate = tl.load(synthetic_conditional_rates_ptr + pos)\n",
                 "                rate = tl.load(synthetic_conditional_rates_ptr + start_idx + pos)\n"),), V033),
    Mutant("gr_bonus_at_max_spec_len", T, "greedy: the bonus goes to slot max_spec_len, not after the request's drafts",
           (edit("            output_token_ids_ptr + req_idx * (max_spec_len + 1) + num_draft_tokens,\n",
                 "            output_token_ids_ptr + req_idx * (max_spec_len + 1) + max_spec_len,\n"),), V033),
    Mutant("gr_grid_capped_at_1024", T,
           "greedy: programs past request 1023 redo request 1023 (a max_num_seqs = 1024 assumption)",
           (edit("    req_idx = tl.program_id(0)\n", "    req_idx = tl.minimum(tl.program_id(0), 1023)\n"),), V033,
           extreme="beyond_1024_requests"),
    Mutant("gr_argmax_int16", T, "greedy: the argmax is narrowed to int16 (ids past 32767 wrap)",
           (edit("            target_argmax_id = tl.load(target_argmax_ptr + start_idx + pos).to(tl.int32)\n",
                 "            target_argmax_id = tl.load(target_argmax_ptr + start_idx + pos).to(tl.int16).to(tl.int32)\n"),), V033,
           extreme="ids_past_32767"),
)
