"""The seeded bugs of ``_gumbel_sample_kernel`` (docs/CONTRACT.md §29): one-edit mutants of vLLM
0.33.0's kernel and the ``@triton.jit`` helpers it calls (``vllm/v1/worker/gpu/sample/gumbel.py``:
the murmur3 noise, ``gumbel_noised_argmax``, ``gumbel_block_argmax``), each of which a default
run must catch; among them the pre-fix forms of vLLM #47386 (the draft's noise on the target's
stream) and of #46560 (int32 row offsets: a table past ``2**31`` elements, ``scale``)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_gumbel_sample_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("gs_draft_stream_unsalted", T, "gumbel_sample: the drafter's noise is not salted (the pre-fix form of "
           "vLLM #47386: a draft and its verification's resampling share a stream, which biases verification)",
           (edit("            pos = pos + _DRAFT_NOISE_SALT\n", "            pos = pos\n"),), V033),
    Mutant("gs_step_seed_dropped", T, "gumbel_sample: the drafter's seed is not mixed with its step (every draft step "
           "draws the same noise)", (edit("        seed = spec_step_seed(seed, col)\n", "        seed = seed\n"),), V033),
    Mutant("gs_padded_row_cached", T, "gumbel_sample: a padded drafter row (-1) writes the cache (at state row -1, "
           "before the cache)", (edit("            mask=mask & is_valid_req,\n", "            mask=mask,\n"),), V033),
    Mutant("gs_per_token_column_ignored", T, "gumbel_sample: the watermarking drafter's per-token columns are read as "
           "one (every row caches at the first row's column)",
           (edit("            col = tl.load(logits_cache_col_ptr + token_idx)\n",
                 "            col = tl.load(logits_cache_col_ptr)\n"),), V033),
    Mutant("gs_murmur3_constant", T, "gumbel_sample: a murmur3 mixing constant off by one (another noise than the "
           "contract's, and than a drafter's verification expects)",
           (edit("    return h * 5 + 0xE6546B64\n", "    return h * 5 + 0xE6546B65\n"),), V033),
    Mutant("gs_fp64_from_32_bits", T, "gumbel_sample: the float64 noise path draws a 32-bit uniform",
           (edit("            u = murmur3_uniform64(seed, pos, keys)\n",
                 "            u = murmur3_uniform32(seed, pos, keys).to(tl.float64)\n"),), V033),
    Mutant("gs_token_without_block", T, "gumbel_sample: a block's winner is stored as its lane, not its token id",
           (edit("    token_id = block_idx * BLOCK_SIZE + idx\n", "    token_id = idx\n"),), V033),
    Mutant("gs_temperature_twice", T, "gumbel_sample: the target's sampling divides by the temperature again "
           "(APPLY_TEMPERATURE ignored)",
           (edit("    if temp != 0.0 and APPLY_TEMPERATURE:\n", "    if temp != 0.0:\n"),), V033),
    Mutant("gs_offset_int16", T, "gumbel_sample: the noise's offset (the token id) taken as int16 (ids past 32767 "
           "draw another token's noise)",
           (edit("    offset = offset.to(tl.uint32)\n", "    offset = offset.to(tl.int16).to(tl.uint32)\n"),), V033,
           extreme="vocab_past_131072"),
    Mutant("gs_position_low16", T, "gumbel_sample: the noise's counter keeps a position's low 16 bits (positions "
           "65536 apart share their noise; the drafter's, salted by 2**30, at every position)",
           (edit("    h = _murmur3_mix(h, (pos & 0xFFFFFFFF).to(tl.uint32))\n",
                 "    h = _murmur3_mix(h, (pos & 0xFFFF).to(tl.uint32))\n"),), V033),
    Mutant("gs_row_offset_int32", T, "gumbel_sample: the row offset token_idx * logits_stride in int32 (the pre-fix "
           "form of vLLM #46560: past 2**31 elements it wraps before the table)",
           (edit("    token_idx = tl.program_id(0).to(tl.int64)\n", "    token_idx = tl.program_id(0)\n"),), V033,
           scale="row_offset_past_2_31"),
)
