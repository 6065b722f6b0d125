"""The seeded bugs of ``eagle_prepare_inputs_padded_kernel`` (docs/CONTRACT.md §2): one-edit mutants of its
production code, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py writes them
out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import EXTENDED_TIER, Mutant, edit

BUGS: tuple[Mutant, ...] = (
    Mutant(
        'pi_cu_read_as_exclusive',
        'eagle_prepare_inputs_padded_kernel',
        'prepare_inputs_padded: cu_num_draft_tokens read as exclusive (d = cu[r+1] - cu[r])',
        (
            edit(
                """\
    num_draft_tokens = 0
    if req_idx == 0:
        num_draft_tokens = cu_draft_curr
    else:
        cu_draft_prev = tl.load(cu_num_draft_tokens_ptr + req_idx - 1)
        num_draft_tokens = cu_draft_curr - cu_draft_prev
""",
                """\
    cu_draft_next = tl.load(cu_num_draft_tokens_ptr + req_idx + 1)
    num_draft_tokens = cu_draft_next - cu_draft_curr
""",
            ),
        ),
    ),
    Mutant(
        'pi_missing_num_reqs_guard',
        'eagle_prepare_inputs_padded_kernel',
        'prepare_inputs_padded: no req_idx >= num_reqs guard, so a padded launch writes past the outputs',
        (
            edit(
                """\
    if req_idx >= num_reqs:
        return
""",
                """\
""",
            ),
        ),
        tier=EXTENDED_TIER,
    ),
    Mutant(
        'pi_no_draft_where_dropped',
        'eagle_prepare_inputs_padded_kernel',
        'prepare_inputs_padded: the num_draft_tokens > 0 where is dropped (a discarded prefill gets rejected = 1)',
        (
            edit(
                """\
    num_rejected_tokens = tl.where(num_draft_tokens > 0, num_rejected_tokens, 0)
""",
                """\
""",
            ),
        ),
    ),
    Mutant(
        'pi_rejected_missing_plus_one',
        'eagle_prepare_inputs_padded_kernel',
        'prepare_inputs_padded: rejected = d - valid (the + 1 for the bonus token is missing)',
        (
            edit(
                """\
    num_rejected_tokens = num_draft_tokens + 1 - valid_count
""",
                """\
    num_rejected_tokens = num_draft_tokens - valid_count
""",
            ),
        ),
    ),
    Mutant(
        'pi_grid_capped_at_1024',
        'eagle_prepare_inputs_padded_kernel',
        'prepare_inputs_padded: programs past request 1023 return at once (a max_num_seqs = 1024 assumption)',
        (
            edit(
                """\
    if req_idx >= num_reqs:
""",
                """\
    if req_idx >= tl.minimum(num_reqs, 1024):
""",
            ),
        ),
        extreme='beyond_1024_requests',
    ),
    Mutant(
        'pi_query_start_loc_int16',
        'eagle_prepare_inputs_padded_kernel',
        'prepare_inputs_padded: query_start_loc[r + 1] is read as int16 (offsets past 32767 wrap)',
        (
            edit(
                """\
    q_last_tok_idx = tl.load(query_start_loc_gpu_ptr + req_idx + 1) - 1
""",
                """\
    q_last_tok_idx = tl.load(query_start_loc_gpu_ptr + req_idx + 1).to(tl.int16) - 1
""",
            ),
        ),
        extreme='offsets_past_32767',
    ),
)
