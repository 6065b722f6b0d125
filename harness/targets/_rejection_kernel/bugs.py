"""The seeded bugs of ``_rejection_kernel`` (docs/CONTRACT.md §33): one-edit mutants of vLLM
0.33.0's kernel and its helpers (``vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py``,
``tl_rand32`` and ``spec_step_seed`` of ``sample/gumbel.py``), each of which a default run must
catch; the int32 row offset of releases up to 0.24 (``start_idx`` as loaded: the class of vLLM
#46560 and #47383) needs a table past ``2**31`` elements (``scale``)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_rejection_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("rj_log_of_uniform_dropped", T, "rejection: the ratio test compares the log-probabilities with u, not log u",
           (edit("                    accepted = target_logprob > tl.log(u) + draft_logprob\n",
                 "                    accepted = target_logprob > u + draft_logprob\n"),), V033),
    Mutant("rj_block_step_seed_shared", T, "rejection: block verification draws every step's uniform from the request's "
           "seed (the steps' uniforms equal where positions repeat across steps)",
           (edit("            step_seed = spec_step_seed(seed, i) if USE_BLOCK_VERIFICATION else seed\n",
                 "            step_seed = seed\n"),), V033),
    Mutant("rj_placeholder_verified", T, "rejection: a -1 draft does not end a random request's verification",
           (edit("            verifying &= is_valid_draft\n", "            verifying = verifying\n"),), V033),
    Mutant("rj_greedy_keeps_draft", T, "rejection: a greedy rejection keeps the draft instead of the target's argmax",
           (edit("                        target_argmax if is_greedy and not accepted else draft_sampled,\n",
                 "                        draft_sampled,\n"),), V033),
    Mutant("rj_fly_window_past_end", T, "rejection: FLy defers a rejection whose window runs past the drafts",
           (edit("                            and i + FLY_WINDOW_SIZE < num_draft_tokens\n",
                 "                            and i + FLY_WINDOW_SIZE <= num_draft_tokens\n"),), V033),
    Mutant("rj_block_own_row_residual", T, "rejection: block verification sums the residual partials of the draft's own "
           "row, not the next one's", (edit("                        logit_idx + 1,\n", "                        logit_idx,\n"),),
           V033),
    Mutant("rj_argmax_first_block", T, "rejection: a greedy row's argmax is read from its first 8192-wide block",
           (edit("    max_block_idx = tl.argmax(local_max, axis=0)\n", "    max_block_idx = 0\n"),), V033),
    Mutant("rj_position_int16", T, "rejection: the acceptance uniform's counter is the position in int16 (positions past "
           "32767 draw another position's uniform)",
           (edit("            pos = tl.load(pos_ptr + logit_idx)\n",
                 "            pos = tl.load(pos_ptr + logit_idx).to(tl.int16).to(tl.int64)\n"),), V033,
           extreme="positions_past_65535"),
    Mutant("rj_row_offset_int32", T, "rejection: the request's rows counted in int32 (start_idx as loaded, as in vLLM "
           "up to 0.24: past 2**31 elements the row offset wraps before the table)",
           (edit("    start_idx = tl.load(cu_num_logits_ptr + req_idx).to(tl.int64)\n",
                 "    start_idx = tl.load(cu_num_logits_ptr + req_idx)\n"),), V033, scale="row_offset_past_2_31"),
)
