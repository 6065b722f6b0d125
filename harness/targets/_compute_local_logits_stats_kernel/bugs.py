"""The seeded bugs of ``_compute_local_logits_stats_kernel`` (docs/CONTRACT.md §30): one-edit
mutants of vLLM 0.33.0's kernel and its helpers (``vllm/v1/worker/gpu/spec_decode/
rejection_sampler_utils.py``), each of which a default run must catch; the int32 row offset (the
class of vLLM #47383) needs a table past ``2**31`` elements (``scale``)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_compute_local_logits_stats_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("st_last_row_not_bonus", T, "stats: the batch's last row is not taken for a bonus row (the load past "
           "the end reads 1, not 0): its statistics are written",
           (edit("        other=0,\n", "        other=1,\n"),), V033),
    Mutant("st_sum_unshifted", T, "stats: the exponentials are summed without subtracting the block maximum",
           (edit("        tl.sum(tl.exp(logits - max)),\n", "        tl.sum(tl.exp(logits)),\n"),), V033),
    Mutant("st_draft_not_divided", T, "stats: the drafter's cached logits are not divided by the temperature",
           (edit("                ).to(tl.float32)\n                / temp\n            )\n            draft_max, draft_sumexp",
                 "                ).to(tl.float32)\n            )\n            draft_max, draft_sumexp"),), V033),
    Mutant("st_draft_next_step", T, "stats: the drafter's logits are read one step on (the cache's next column)",
           (edit("                    + draft_step_idx * draft_logits_stride_1\n",
                 "                    + (draft_step_idx + 1) * draft_logits_stride_1\n"),), V033),
    Mutant("st_block_offset_int16", T, "stats: block offsets in int16 (columns past 32767 of a large vocabulary wrap)",
           (edit("    block_offsets = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n",
                 "    block_offsets = (block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)).to(tl.int16).to(tl.int32)\n"),),
           V033, extreme="vocab_past_131072"),
    Mutant("st_row_offset_int32", T, "stats: the row offset logit_idx * stride in int32 (vLLM #47383's class: past "
           "2**31 elements it wraps before the table)",
           (edit("    logit_idx = tl.program_id(0).to(tl.int64)\n", "    logit_idx = tl.program_id(0)\n"),), V033,
           scale="row_offset_past_2_31"),
)
