"""The seeded bugs of ``extend_all_queries_by_N`` (docs/CONTRACT.md §4): one-edit mutants of its
production code, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py writes them
out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import EXTENDED_TIER, Mutant, edit

BUGS: tuple[Mutant, ...] = (
    Mutant(
        'extend_batch_size_from_query_start_loc',
        'extend_all_queries_by_N',
        'extend_all_queries_by_N: the batch size is taken as len(query_start_loc), one too many',
        (
            edit(
                """\
        # each request is extended by N tokens -> batch_size * N tokens are added
        num_actual_tokens=cad.num_actual_tokens + cad.batch_size() * N,
        # All query lens increase by N, so max query len increases by N
""",
                """\
        # BUG: the batch size is len(seq_lens), not len(query_start_loc)
        num_actual_tokens=cad.num_actual_tokens + len(cad.query_start_loc) * N,
""",
            ),
        ),
    ),
    Mutant(
        'extend_cpu_arange_int64',
        'extend_all_queries_by_N',
        'extend_all_queries_by_N: the CPU offsets come from an int64 arange, so query_start_loc_cpu turns int64',
        (
            edit(
                """\
        len(cad.query_start_loc_cpu), dtype=torch.int32
""",
                """\
        len(cad.query_start_loc_cpu)  # BUG: no dtype, so int64
""",
            ),
        ),
    ),
    Mutant(
        'extend_cpu_copy_not_extended',
        'extend_all_queries_by_N',
        'extend_all_queries_by_N: the CPU copy of query_start_loc is left as it was',
        (
            edit(
                """\
    new_query_start_loc_cpu = cad.query_start_loc_cpu + N * torch.arange(
        len(cad.query_start_loc_cpu), dtype=torch.int32
    )
""",
                """\
    # BUG: query_start_loc_cpu is not extended
""",
            ),
            edit(
                """\
        query_start_loc_cpu=new_query_start_loc_cpu,
""",
                """\
""",
            ),
        ),
    ),
    Mutant(
        'extend_max_seq_len_kept',
        'extend_all_queries_by_N',
        'extend_all_queries_by_N: max_seq_len is not increased by N',
        (
            edit(
                """\
        max_seq_len=cad.max_seq_len + N,
""",
                """\
        # BUG: max_seq_len is not extended
""",
            ),
        ),
    ),
    Mutant(
        'extend_mutates_input',
        'extend_all_queries_by_N',
        'extend_all_queries_by_N: seq_lens is extended in place, mutating the input metadata',
        (
            edit(
                """\
        seq_lens=cad.seq_lens + N,
        # each request is extended by N tokens -> batch_size * N tokens are added
""",
                """\
        seq_lens=cad.seq_lens.add_(N),  # BUG: in place
""",
            ),
        ),
    ),
    Mutant(
        'extend_num_reqs_as_batch_size',
        'extend_all_queries_by_N',
        'extend_all_queries_by_N: num_reqs is used as the batch size (wrong on padded batches)',
        (
            edit(
                """\
        # each request is extended by N tokens -> batch_size * N tokens are added
        num_actual_tokens=cad.num_actual_tokens + cad.batch_size() * N,
        # All query lens increase by N, so max query len increases by N
""",
                """\
        # BUG: num_reqs is not the batch size on padded batches
        num_actual_tokens=cad.num_actual_tokens + cad.num_reqs * N,
""",
            ),
        ),
        # vLLM hands the function the drafter's unpadded metadata (num_reqs = batch_size(),
        # docs/CONTRACT.md §4.2): only a padded batch of the extended tier tells the two apart
        tier=EXTENDED_TIER,
    ),
    Mutant(
        'extend_arange_capped_at_1025',
        'extend_all_queries_by_N',
        'extend_all_queries_by_N: the arange slice is capped at max_num_seqs + 1 = 1025 entries '
        '(past 1024 requests it is shorter than query_start_loc: the addition raises)',
        (
            edit(
                """\
    new_query_start_loc = cad.query_start_loc + N * arange[: len(cad.query_start_loc)]
""",
                """\
    new_query_start_loc = cad.query_start_loc + N * arange[: min(len(cad.query_start_loc), 1025)]
""",
            ),
        ),
        extreme='beyond_1024_requests',
        crash=True,
    ),
    Mutant(
        'extend_seq_lens_via_float32',
        'extend_all_queries_by_N',
        'extend_all_queries_by_N: seq_lens + N is computed in float32 (inexact past 2**24 tokens)',
        (
            edit(
                """\
        seq_lens=cad.seq_lens + N,
""",
                """\
        seq_lens=(cad.seq_lens.float() + N).to(cad.seq_lens.dtype),
""",
            ),
        ),
        extreme='seq_lens_past_2_24',
    ),
)
