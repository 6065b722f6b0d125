"""The seeded bugs of ``_resample_kernel`` (docs/CONTRACT.md §34): one-edit mutants of vLLM
0.33.0's kernel and its helpers (``vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py``,
``gumbel_block_argmax`` of ``sample/gumbel.py``), each of which a default run must catch; the
int32 row count of releases up to 0.24 (the class of vLLM #46560 and #47383) needs a table past
``2**31`` elements (``scale``)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_resample_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("rs_bonus_as_rejection", T, "resample: a bonus row is drawn from a residual, as if its draft were rejected",
           (edit("    if is_bonus or not is_valid_rejected_draft:\n", "    if not is_valid_rejected_draft:\n"),), V033),
    Mutant("rs_one_hot_keeps_draft", T, "resample: a rejected one-hot draft's token is not taken out (the next one is)",
           (edit("            block != rejected_draft_token,\n", "            block != rejected_draft_token + 1,\n"),), V033),
    Mutant("rs_ratio_inverted", T, "resample: the residual's ratio is p / q, not q / p",
           (edit("        ratio = tl.exp(draft_log_probs - target_log_probs)\n",
                 "        ratio = tl.exp(target_log_probs - draft_log_probs)\n"),), V033),
    Mutant("rs_block_shift_at_first", T, "resample: block verification shifts the residual by a ratio even when nothing "
           "was accepted (it reads the row before the request)",
           (edit("            if resample_idx > 0:\n", "            if resample_idx >= 0:\n"),), V033),
    Mutant("rs_draft_next_step", T, "resample: the rejected draft's logits are read one step on",
           (edit("                + resample_idx * draft_logits_stride_1\n",
                 "                + (resample_idx + 1) * draft_logits_stride_1\n"),), V033),
    Mutant("rs_token_int16", T, "resample: a block's winner stored as an int16 token id (ids past 32767 wrap)",
           (edit("    token_id = block_idx * BLOCK_SIZE + idx\n",
                 "    token_id = (block_idx * BLOCK_SIZE + idx).to(tl.int16).to(tl.int64)\n"),), V033,
           extreme="vocab_past_131072"),
    Mutant("rs_row_offset_int32", T, "resample: the request's rows counted in int32 (start_idx as loaded, as in vLLM "
           "up to 0.24: past 2**31 elements the row offset wraps before the table)",
           (edit("    start_idx = tl.load(cu_num_logits_ptr + req_idx).to(tl.int64)\n",
                 "    start_idx = tl.load(cu_num_logits_ptr + req_idx)\n"),), V033, scale="row_offset_past_2_31"),
)
