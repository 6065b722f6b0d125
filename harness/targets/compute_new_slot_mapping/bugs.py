"""The seeded bugs of ``compute_new_slot_mapping`` (docs/CONTRACT.md §7): one-edit mutants of its
production code, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py writes them
out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import EXTENDED_TIER, V033, Mutant, edit

BUGS: tuple[Mutant, ...] = (
    Mutant(
        "ns_no_position_clamp",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: positions are not clamped to max_model_len - 1 before the lookup "
        "(a position past the last request's row indexes past the table: the out-of-bounds error the clamp prevents)",
        (
            edit(
                "    clamped_positions = torch.clamp(new_positions, max=max_model_len - 1)\n",
                "    clamped_positions = new_positions\n",
            ),
        ),
        V033,
        crash=True,
        tier=EXTENDED_TIER,
    ),
    Mutant(
        "ns_rejected_not_masked",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: rejected tokens keep their slot (no PADDING_SLOT_ID)",
        (edit("    new_slot_mapping.masked_fill_(is_rejected_token_mask, PADDING_SLOT_ID)\n", ""),),
        V033,
    ),
    Mutant(
        "ns_exceeds_strict",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: positions are masked only past max_model_len (>), so position M gets a slot",
        (
            edit(
                "    exceeds_max_model_len = new_positions >= max_model_len\n",
                "    exceeds_max_model_len = new_positions > max_model_len\n",
            ),
        ),
        V033,
        tier=EXTENDED_TIER,
    ),
    Mutant(
        "ns_new_tokens_forgotten",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: requests own qlen tokens, not qlen + num_new_tokens (the new tokens are "
        "taken as appended after the whole batch, request r's at T + r*N, as if new_positions[:T + R*N] were "
        "T target tokens and then R*N new ones)",
        (
            edit(
                """\
    req_indices = torch.repeat_interleave(
        req_indices,
        cad.naive_query_lens() + num_new_tokens,
        output_size=len(new_positions),
    )
""",
                """\
    req_indices = torch.cat(
        [
            torch.repeat_interleave(req_indices, cad.naive_query_lens()),
            torch.repeat_interleave(req_indices, num_new_tokens),
        ]
    )
""",
            ),
        ),
        V033,
    ),
    Mutant(
        "ns_row_stride_is_block_size",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: rows of the flat table are taken block_size apart instead of n_blocks_per_req",
        (
            edit(
                "        req_indices * n_blocks_per_req + clamped_positions // block_size\n",
                "        req_indices * block_size + clamped_positions // block_size\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "ns_slots_int32",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: the slot mapping comes back as int32 (the block table's dtype), not int64",
        (
            edit(
                "    new_slot_mapping = block_nums * block_size + block_offsets\n",
                "    new_slot_mapping = (block_nums * block_size + block_offsets).int()\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "ns_clamp_in_place",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: clamp_ instead of clamp: the caller's positions are clamped in place "
        "(and positions past max_model_len then look in range)",
        (
            edit(
                "    clamped_positions = torch.clamp(new_positions, max=max_model_len - 1)\n",
                "    clamped_positions = new_positions.clamp_(max=max_model_len - 1)\n",
            ),
        ),
        V033,
        tier=EXTENDED_TIER,
    ),
    # -- bugs that need a production extreme (each names the one of ``extremes`` it needs)
    Mutant(
        "ns_requests_capped_at_1024",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: the request index is capped at 1023 (max_num_seqs <= 1024 assumed): "
        "requests past the first 1024 look their slots up in row 1023",
        (
            edit(
                "    req_indices = torch.arange(batch_size, device=cad.query_start_loc.device)\n",
                "    req_indices = torch.arange(batch_size, device=cad.query_start_loc.device).clamp(max=1023)\n",
            ),
        ),
        V033,
        extreme="beyond_1024_requests",
    ),
    Mutant(
        "ns_block_nums_int16",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: the block numbers pass through int16 (KV caches of more than 32k blocks wrap)",
        (
            edit(
                "    block_nums = cad.block_table_tensor.view(-1)[block_table_indices]\n",
                "    block_nums = cad.block_table_tensor.view(-1)[block_table_indices]\n"
                "    block_nums = block_nums.to(torch.int16).to(block_nums.dtype)\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "ns_positions_via_float32",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: the offset in the block is taken of the position in float32 (inexact past "
        "2**24: the slot is off by the rounding)",
        (
            edit(
                "    block_offsets = clamped_positions % block_size\n",
                "    block_offsets = (clamped_positions.float() % block_size).to(clamped_positions.dtype)\n",
            ),
        ),
        V033,
        extreme="positions_past_2_24",
    ),
)
