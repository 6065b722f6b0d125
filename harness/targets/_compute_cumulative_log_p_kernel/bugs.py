"""The seeded bugs of ``_compute_cumulative_log_p_kernel`` (docs/CONTRACT.md §31): one-edit
mutants of vLLM 0.33.0's kernel and its helpers (``vllm/v1/worker/gpu/spec_decode/
rejection_sampler_utils.py``), each of which a default run must catch; the int32 row offset
needs a table past ``2**31`` elements (``scale``)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_compute_cumulative_log_p_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("cl_not_clamped", T, "cumulative_log_p: the running log ratio is not clamped at 0 (a joint ratio above 1)",
           (edit("            log_p = tl.minimum(log_p + (target_logprob - draft_logprob), 0.0)\n",
                 "            log_p = log_p + (target_logprob - draft_logprob)\n"),), V033),
    Mutant("cl_token_zero_placeholder", T, "cumulative_log_p: a draft of token 0 is taken for a -1 placeholder",
           (edit("        if draft_token >= 0:\n", "        if draft_token > 0:\n"),), V033),
    Mutant("cl_first_step_draft", T, "cumulative_log_p: every draft is read at the drafter's first step",
           (edit("                    step,\n                    temp,\n", "                    0,\n                    temp,\n"),),
           V033),
    Mutant("cl_lse_first_block", T, "cumulative_log_p: the log-sum-exps read only the first 8192-wide block",
           (edit("    blocks_mask = blocks < vocab_num_blocks\n", "    blocks_mask = blocks < 1\n"),), V033),
    Mutant("cl_row_offset_int32", T, "cumulative_log_p: the row offset in int32 (vLLM #47383's class: past 2**31 "
           "elements it wraps before the table)",
           (edit("    start_idx = tl.load(cu_num_logits_ptr + req_idx).to(tl.int64)\n",
                 "    start_idx = tl.load(cu_num_logits_ptr + req_idx)\n"),), V033, scale="row_offset_past_2_31"),
    Mutant("cl_draft_token_int16", T, "cumulative log p: the draft token loaded as int16 (ids past 32767 read "
           "another token's logit)",
           (edit("        draft_token = tl.load(draft_sampled_ptr + logit_idx + 1).to(tl.int64)\n",
                 "        draft_token = tl.load(draft_sampled_ptr + logit_idx + 1).to(tl.int16).to(tl.int64)\n"),), V033,
           extreme="vocab_past_131072"),
)
