"""The seeded bugs of ``_compute_local_residual_mass_kernel`` (docs/CONTRACT.md §32): one-edit
mutants of vLLM 0.33.0's kernel and its helpers (``vllm/v1/worker/gpu/spec_decode/
rejection_sampler_utils.py``), each of which a default run must catch; the int32 row offset
needs a table past ``2**31`` elements (``scale``)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_compute_local_residual_mass_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("rm_own_row_ratio", T, "residual mass: p is read at the row itself, not the row before (p_i, not p_{i-1})",
           (edit("    p = tl.exp(tl.load(cumulative_log_p_ptr + logit_idx - 1).to(tl.float32))\n",
                 "    p = tl.exp(tl.load(cumulative_log_p_ptr + logit_idx).to(tl.float32))\n"),), V033),
    Mutant("rm_not_clamped", T, "residual mass: negative differences are summed too (max(., 0) dropped)",
           (edit("    partial = tl.sum(tl.maximum(p * m_b - m_s, 0.0), axis=0)\n",
                 "    partial = tl.sum(p * m_b - m_s, axis=0)\n"),), V033),
    Mutant("rm_placeholder_next_computed", T, "residual mass: a row whose next draft is -1 is computed anyway",
           (edit("    if tl.load(draft_sampled_ptr + logit_idx + 1) < 0:\n",
                 "    if tl.load(draft_sampled_ptr + logit_idx + 1) < -1:\n"),), V033),
    Mutant("rm_first_row_computed", T, "residual mass: a request's first draft row is computed (it reads the previous "
           "request's ratio)", (edit("    if draft_step_idx == 0 or _is_bonus_logit(\n", "    if _is_bonus_logit(\n"),),
           V033),
    Mutant("rm_row_offset_int32", T, "residual mass: the row offset logit_idx * stride in int32 (vLLM #47383's class: "
           "past 2**31 elements it wraps before the table)",
           (edit("    logit_idx = tl.program_id(0).to(tl.int64)\n", "    logit_idx = tl.program_id(0)\n"),), V033,
           scale="row_offset_past_2_31"),
    Mutant("rm_block_offset_int16", T, "residual mass: the block's first token in int16 (blocks past 32767 read "
           "wrapped lanes)",
           (edit("    block_offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n",
                 "    block_offsets = (block_idx * BLOCK_SIZE).to(tl.int16) + tl.arange(0, BLOCK_SIZE)\n"),), V033,
           extreme="vocab_past_131072"),
)
