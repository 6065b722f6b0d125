"""The seeded bugs of ``_temperature_kernel`` (docs/CONTRACT.md §28): one-edit mutants of vLLM
0.33.0's kernel (``vllm/v1/worker/gpu/sample/gumbel.py``), each of which a default run must
catch, but the pre-fix form of vLLM #46560 (int32 row offsets), which needs a table past
``2**31`` elements: a GPU's device mode (``scale``)."""

from __future__ import annotations

from ...targetkit.bugs import V033, Mutant, edit

T = "_temperature_kernel"

BUGS: tuple[Mutant, ...] = (
    Mutant("tk_greedy_divided", T, "temperature: a greedy row (temperature 0) is divided too (its logits become "
           "infinities and NaNs)",
           (edit("    if temperature == 0.0 or temperature == 1.0:\n", "    if temperature == 1.0:\n"),), V033),
    Mutant("tk_multiplies", T, "temperature: the logits are multiplied by the temperature, not divided",
           (edit("    logits = logits / temperature\n", "    logits = logits * temperature\n"),), V033),
    Mutant("tk_token_row_as_state_row", T, "temperature: the temperature is read at the token's row, not its "
           "request's state row",
           (edit("    temperature = tl.load(temperature_ptr + req_state_idx).to(tl.float32)\n",
                 "    temperature = tl.load(temperature_ptr + token_idx).to(tl.float32)\n"),), V033),
    Mutant("tk_mask_past_vocab", T, "temperature: the mask lets column vocab_size through (the next row's first "
           "logit divided twice, the last row's written past the table)",
           (edit("    mask = block < vocab_size\n", "    mask = block <= vocab_size\n"),), V033),
    Mutant("tk_block_offset_int16", T, "temperature: block offsets held in int16 (columns past 32767 of a large "
           "vocabulary wrap onto the row's start)",
           (edit("    block = block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)\n",
                 "    block = (block_idx * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)).to(tl.int16).to(tl.int32)\n"),),
           V033, extreme="vocab_past_131072"),
    Mutant("tk_row_offset_int32", T, "temperature: the row offset token_idx * logits_stride in int32 (the pre-fix "
           "form of vLLM #46560: past 2**31 elements it wraps before the table)",
           (edit("    token_idx = tl.program_id(0).to(tl.int64)\n", "    token_idx = tl.program_id(0)\n"),), V033,
           scale="row_offset_past_2_31"),
)
