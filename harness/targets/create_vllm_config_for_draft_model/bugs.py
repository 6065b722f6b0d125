"""The seeded bugs of ``create_vllm_config_for_draft_model`` (docs/CONTRACT.md §5): one-edit mutants of its
production code, each of which the fuzzer must catch (tests/seeded_bugs/mutants.py writes them
out as ``--kernels`` files; tests/test_seeded_bugs.py runs a default campaign on each)."""

from __future__ import annotations

from ...targetkit.bugs import EXTENDED_TIER, Mutant, edit

BUGS: tuple[Mutant, ...] = (
    Mutant(
        'draft_config_keeps_quant_config',
        'create_vllm_config_for_draft_model',
        "create_vllm_config_for_draft_model: the target's quant_config is kept",
        (
            edit(
                """\
        quant_config=None,
""",
                """\
        # BUG: quant_config not reset
""",
            ),
        ),
    ),
    Mutant(
        'draft_config_mutates_target',
        'create_vllm_config_for_draft_model',
        "create_vllm_config_for_draft_model: the rank is written into the target's draft parallel config in place",
        (
            edit(
                """\
    new_parallel_config = replace(
        old_spec_config.draft_parallel_config, rank=old.parallel_config.rank
    )
""",
                """\
    new_parallel_config = old_spec_config.draft_parallel_config
    new_parallel_config.rank = old.parallel_config.rank  # BUG: mutates the target's config
""",
            ),
        ),
    ),
    Mutant(
        'draft_config_no_assert',
        'create_vllm_config_for_draft_model',
        'create_vllm_config_for_draft_model: the assertion is gone: a missing speculative_config raises AttributeError',
        (
            edit(
                """\
    assert old.speculative_config is not None, "speculative_config is not set"
""",
                """\
    # BUG: no assertion
""",
            ),
        ),
        # the proposer asserts the speculative config before it calls the function
        # (docs/CONTRACT.md §5.2): only the extended tier's missing config shows the assertion gone
        tier=EXTENDED_TIER,
    ),
    Mutant(
        'draft_config_parallel_from_target',
        'create_vllm_config_for_draft_model',
        "create_vllm_config_for_draft_model: the target's parallel config is kept, only the tensor-parallel size comes from the drafter",
        (
            edit(
                """\
    new_parallel_config = replace(
        old_spec_config.draft_parallel_config, rank=old.parallel_config.rank
""",
                """\
    new_parallel_config = replace(  # BUG: starts from the target's parallel config
        old.parallel_config,
        tensor_parallel_size=old_spec_config.draft_parallel_config.tensor_parallel_size,
""",
            ),
        ),
    ),
    Mutant(
        'draft_config_rank_not_replaced',
        'create_vllm_config_for_draft_model',
        'create_vllm_config_for_draft_model: the draft parallel config keeps its own rank',
        (
            edit(
                """\
    new_parallel_config = replace(
        old_spec_config.draft_parallel_config, rank=old.parallel_config.rank
    )
""",
                """\
    new_parallel_config = old_spec_config.draft_parallel_config  # BUG: rank not replaced
""",
            ),
        ),
    ),
    Mutant(
        'draft_config_max_num_seqs_capped_at_1023',
        'create_vllm_config_for_draft_model',
        "create_vllm_config_for_draft_model: the drafter's scheduler config caps max_num_seqs at 1023 "
        "(a 10-bit request index): a deployment of 1024 or more sequences gets a smaller drafter batch",
        (
            edit(
                """\
        model_config=old_spec_config.draft_model_config,
""",
                """\
        model_config=old_spec_config.draft_model_config,
        scheduler_config=replace(  # BUG: capped
            old.scheduler_config, max_num_seqs=min(old.scheduler_config.max_num_seqs, 1023)
        ),
""",
            ),
        ),
        extreme='max_num_seqs_1024_plus',
    ),
)
