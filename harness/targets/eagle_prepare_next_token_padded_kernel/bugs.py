"""The seeded bugs of ``eagle_prepare_next_token_padded_kernel`` (docs/CONTRACT.md §3): one-edit mutants of its
production code, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py writes them
out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import EXTENDED_TIER, Mutant, edit

BUGS: tuple[Mutant, ...] = (
    Mutant(
        'nt_discarded_counts_one',
        'eagle_prepare_next_token_padded_kernel',
        'prepare_next_token_padded: a discarded request reports count 1 (the backup token) instead of 0',
        (
            edit(
                """\
        valid_count = tl.full((), 0, dtype=tl.uint32)
""",
                """\
        valid_count = tl.full((), 1, dtype=tl.uint32)
""",
            ),
        ),
    ),
    Mutant(
        'nt_first_valid_column',
        'eagle_prepare_next_token_padded_kernel',
        'prepare_next_token_padded: the next token is taken from the first valid column instead of the last',
        (
            edit(
                """\
            last_valid_index = tl.max(tl.where(is_valid_mask, token_offs, -1))
""",
                """\
            last_valid_index = tl.min(
                tl.where(is_valid_mask, token_offs, BLOCK_SIZE_TOKENS)
            )
""",
            ),
        ),
    ),
    Mutant(
        'nt_minus_one_check_dropped',
        'eagle_prepare_next_token_padded_kernel',
        'prepare_next_token_padded: the != -1 test is dropped, so -1 padding counts as a valid id',
        (
            edit(
                """\
        is_valid_mask = (token_ids != -1) & (token_ids < vocab_size) & token_mask
""",
                """\
        is_valid_mask = (token_ids < vocab_size) & token_mask
""",
            ),
        ),
    ),
    Mutant(
        'nt_token_mask_uses_stride',
        'eagle_prepare_next_token_padded_kernel',
        'prepare_next_token_padded: token_mask compares with the row stride instead of S (junk columns past S are read)',
        (
            edit(
                """\
        token_mask = token_offs < num_sampled_tokens_per_req
""",
                """\
        token_mask = token_offs < stride_sampled_token_ids
""",
            ),
        ),
        tier=EXTENDED_TIER,
    ),
    Mutant(
        'nt_vocab_size_inclusive',
        'eagle_prepare_next_token_padded_kernel',
        'prepare_next_token_padded: an id equal to vocab_size counts as valid (<= vocab_size)',
        (
            edit(
                """\
        is_valid_mask = (token_ids != -1) & (token_ids < vocab_size) & token_mask
""",
                """\
        is_valid_mask = (token_ids != -1) & (token_ids <= vocab_size) & token_mask
""",
            ),
        ),
        tier=EXTENDED_TIER,
    ),
    Mutant(
        'nt_block_limited_to_16_columns',
        'eagle_prepare_next_token_padded_kernel',
        'prepare_next_token_padded: only the first 16 columns are read (num_speculative_tokens <= 15 assumed)',
        (
            edit(
                """\
        token_mask = token_offs < num_sampled_tokens_per_req
""",
                """\
        token_mask = token_offs < tl.minimum(num_sampled_tokens_per_req, 16)
""",
            ),
        ),
        extreme='valid_past_column_16',
    ),
    Mutant(
        'nt_next_token_low_16_bits',
        'eagle_prepare_next_token_padded_kernel',
        'prepare_next_token_padded: the next token keeps only its low 16 bits (a 64k vocabulary assumed)',
        (
            edit(
                """\
                tl.where(token_offs == last_valid_index, token_ids, 0)
""",
                """\
                tl.where(token_offs == last_valid_index, token_ids & 0xFFFF, 0)
""",
            ),
        ),
        extreme='ids_past_65535',
    ),
    Mutant(
        'nt_vocab_check_overflows',
        'eagle_prepare_next_token_padded_kernel',
        'prepare_next_token_padded: the vocabulary check is id + 1 < vocab_size + 1 (wraps for vocab_size 2**31-1, where no id counts as valid)',
        (
            edit(
                """\
        is_valid_mask = (token_ids != -1) & (token_ids < vocab_size) & token_mask
""",
                """\
        is_valid_mask = (token_ids != -1) & (token_ids + 1 < vocab_size + 1) & token_mask
""",
            ),
        ),
        extreme='id_near_int32_max',
    ),
)
