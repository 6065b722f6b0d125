"""The seeded bugs of ``rejection_random_sample_kernel`` (docs/CONTRACT.md §11): one-edit
mutants of vLLM 0.33.0's kernel, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py
writes them out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import EXTENDED_TIER, V033, Mutant, edit

T = "rejection_random_sample_kernel"
ACCEPT = "                accepted = draft_prob > 0 and target_prob / draft_prob >= uniform_prob\n"

BUGS: tuple[Mutant, ...] = (
    Mutant("rr_strict_boundary", T, "random: accepted only when p / q > u (u equal to the quotient is rejected)",
           (edit(ACCEPT, ACCEPT.replace(">= uniform_prob", "> uniform_prob")),), V033, tier=EXTENDED_TIER,
           exact_division=True),
    Mutant("rr_uniform_float32", T, "random: the float64 uniform is rounded to float32 before the comparison",
           (edit("            uniform_prob = tl.load(uniform_probs_ptr + start_idx + pos)\n",
                 "            uniform_prob = tl.load(uniform_probs_ptr + start_idx + pos).to(tl.float32)\n"),), V033),
    Mutant("rr_minus_one_read", T, "random: only ids below -1 are rejected unread (a -1 draft reads t*V - 1)",
           (edit("            if draft_token_id < 0:\n", "            if draft_token_id < -1:\n"),), V033),
    Mutant("rr_recovered_of_next", T, "random: the recovered id of the next token is written at a rejection",
           (edit("                token_id = tl.load(recovered_token_ids_ptr + start_idx + pos)\n",
                 "                token_id = tl.load(recovered_token_ids_ptr + start_idx + pos + 1)\n"),), V033),
    Mutant("rr_target_row_by_position", T, "random: the target row is the draft's position, not its token index",
           (edit("                    target_probs_ptr + (start_idx + pos) * vocab_size + draft_token_id\n",
                 "                    target_probs_ptr + pos * vocab_size + draft_token_id\n"),), V033),
    Mutant("rr_bonus_after_rejection", T, "random: the bonus id is appended even after a rejection",
           (edit("    if not rejected:\n        # If all tokens are accepted, append the bonus token.\n",
                 "    if True:\n        # If all tokens are accepted, append the bonus token.\n"),), V033),
    Mutant("rr_no_draft_probs_zero", T, "random: without draft probabilities q is taken as 0 (every draft rejected)",
           (edit("                    draft_prob = 1\n", "                    draft_prob = 0\n"),), V033),
    Mutant("rr_quotient_inverted", T, "random: the ratio is draft / target instead of target / draft",
           (edit(ACCEPT, "                accepted = draft_prob > 0 and draft_prob / target_prob >= uniform_prob\n"),), V033),
    Mutant("rr_grid_capped_at_1024", T,
           "random: programs past request 1023 redo request 1023 (a max_num_seqs = 1024 assumption)",
           (edit("    req_idx = tl.program_id(0)\n", "    req_idx = tl.minimum(tl.program_id(0), 1023)\n"),), V033,
           extreme="beyond_1024_requests"),
    Mutant("rr_draft_id_int16", T, "random: the draft id is narrowed to int16 (ids past 32767 turn negative: rejected)",
           (edit("            draft_token_id = tl.load(draft_token_ids_ptr + start_idx + pos)\n",
                 "            draft_token_id = tl.load(draft_token_ids_ptr + start_idx + pos).to(tl.int16).to(tl.int32)\n"),), V033,
           extreme="ids_past_32767"),
)
