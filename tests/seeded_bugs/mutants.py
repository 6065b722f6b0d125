"""The seeded bugs: each a one-edit mutant of a production function of vLLM's spec-decode utils.

A mutant names its target, states its bug, and lists its edits as ``(old, new)`` text
replacements; each ``old`` occurs exactly once in the target's current source. :func:`write`
applies them to the function as its module holds it today and writes an altered copy that
``--kernels`` loads, so the bugs follow the production code as it changes (a mutant whose
``old`` text is gone fails loudly instead of testing stale code). The module is the bundled
copy ``kernels/spec_decode_utils.py`` unless the mutant names a vLLM release
(``module="vllm-release:0.33.0"``), for targets the bundled copy lacks.

    python tests/seeded_bugs/mutants.py OUTDIR    # write every mutant as OUTDIR/<name>.py
    eaglefuzz fuzz --kernels OUTDIR/ce_positions_shifted.py
"""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import dataclass
from pathlib import Path

PRODUCTION = Path(__file__).resolve().parents[2] / "kernels" / "spec_decode_utils.py"
BUNDLED = "bundled"

HEADER = '''"""{bug}

Seeded bug {name}: ``{target}`` from {module} with one change,
written by tests/seeded_bugs/mutants.py. tests/test_seeded_bugs.py checks the fuzzer finds it.
"""

from dataclasses import replace

import torch
import triton
import triton.language as tl

from eaglefuzz.kernels.vllm_types import CommonAttentionMetadata, VllmConfig, current_platform

PADDING_SLOT_ID = -1


'''


@dataclass(frozen=True)
class Mutant:
    """One seeded bug: ``edits`` turn ``target``'s production source into the buggy one.

    ``module``: where that source is, ``"bundled"`` (kernels/spec_decode_utils.py) or
    ``"vllm-release:X.Y.Z"`` (that release's vllm/v1/spec_decode/utils.py).
    ``extreme``: for a bug that only production-sized inputs expose, the feature of the
    target's ``extremes`` a case needs for it to show (empty for the others).
    ``crash``: the bug *is* a crash: on the inputs that expose it the code raises (an index
    past the table that production's clamp keeps it from, a shape that no longer matches)
    where production runs, and runs on other inputs. Only such a mutant may be caught by a
    ``crash`` finding; any other must give a ``difference`` (one that raises instead is broken).
    """

    name: str
    target: str
    bug: str
    edits: tuple[tuple[str, str], ...]
    module: str = BUNDLED
    extreme: str = ""
    crash: bool = False


class ModuleUnavailable(LookupError):
    """The module a mutant edits cannot be had here (a release's file not cached, and the package
    index cannot be reached)."""


# Release modules already on this machine (read, never copied into the repository).
LOCAL_RELEASE_FILES = {"0.33.0": Path("/tmp/wheels/v033/vllm/v1/spec_decode/utils.py")}


def release_module_file(version: str) -> Path:
    """vLLM ``version``'s vllm/v1/spec_decode/utils.py: through the vLLM release source when
    eaglefuzz has it (``harness.sources.vllm.release_module_file``), else a local copy."""
    try:
        from eaglefuzz.harness.sources.vllm import release_module_file as from_source
        from eaglefuzz.harness.sources.wheels import FetchFailed
    except ImportError:
        from_source = None
    if from_source is not None:
        try:
            return Path(from_source(version))
        except FetchFailed as exc:  # anything else is a real error
            if not exc.offline:
                raise
            raise ModuleUnavailable(f"vLLM {version}'s module: {exc}") from None
    path = LOCAL_RELEASE_FILES.get(version)
    if path is None or not path.is_file():
        raise ModuleUnavailable(f"vLLM {version}'s vllm/v1/spec_decode/utils.py is not on this machine")
    return path


def module_file(module: str) -> Path:
    """The file a mutant's ``module`` names."""
    if module == BUNDLED:
        return PRODUCTION
    kind, _, version = module.partition(":")
    if kind != "vllm-release" or not version:
        raise ValueError(f"unknown mutant module {module!r} (bundled or vllm-release:X.Y.Z)")
    return release_module_file(version)


def module_description(module: str) -> str:
    return "kernels/spec_decode_utils.py" if module == BUNDLED else f"vLLM {module.partition(':')[2]}'s vllm/v1/spec_decode/utils.py"


def production_source(target: str, module: str = BUNDLED) -> str:
    """The source of ``target`` (decorators included) as ``module``'s file has it."""
    path = module_file(module)
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == target:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            return "".join(lines[start : node.end_lineno])
    raise LookupError(f"{target} is not in {path}")


def mutate(m: Mutant) -> str:
    """The buggy source of ``m.target``."""
    src = production_source(m.target, m.module)
    for old, new in m.edits:
        if src.count(old) != 1:
            raise ValueError(f"mutant {m.name}: the text to replace occurs {src.count(old)} times in {m.target}:\n{old}")
        src = src.replace(old, new, 1)
    return src


def write(m: Mutant, directory: Path) -> Path:
    """Write ``m`` as ``directory/<name>.py``, loadable with ``--kernels``; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{m.name}.py"
    header = HEADER.format(bug=m.bug, name=m.name, target=m.target, module=module_description(m.module))
    path.write_text(header + mutate(m))
    return path


def _edit(old: str, new: str) -> tuple[str, str]:
    return old, new


MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        'ce_hidden_map_valid_only',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the hidden-state mapping covers only the valid tokens, not every input token',
        (
            _edit(
                """\
        is_input_region = j < num_input_tokens_this_request
""",
                """\
        is_input_region = j < num_valid_tokens
""",
            ),
        ),
    ),
    Mutant(
        'ce_hidden_map_without_shift',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the hidden-state mapping is written in non-shift mode too',
        (
            _edit(
                """\
    if shift_input_ids:
        num_input_tokens_this_request = next_query_start_loc - query_start_loc
        is_input_region = j < num_input_tokens_this_request
        src_idx = query_start_loc + j
        tl.store(out_hidden_state_mapping_ptr + src_idx, out_idx, mask=is_input_region)
""",
                """\
    num_input_tokens_this_request = next_query_start_loc - query_start_loc
    is_input_region = j < num_input_tokens_this_request
    src_idx = query_start_loc + j
    tl.store(out_hidden_state_mapping_ptr + src_idx, out_idx, mask=is_input_region)
""",
            ),
        ),
    ),
    Mutant(
        'ce_ids_not_shifted',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: input_offset is 0 in shift mode too (valid slots copy qs + j instead of qs + 1 + j)',
        (
            _edit(
                """\
        input_offset = 1
""",
                """\
        input_offset = 0
""",
            ),
        ),
    ),
    Mutant(
        'ce_in_bounds_off_by_one',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: in_bounds uses <= total_output_tokens, so each request writes one slot too many',
        (
            _edit(
                """\
    in_bounds = j < total_output_tokens
""",
                """\
    in_bounds = j <= total_output_tokens
""",
            ),
        ),
    ),
    Mutant(
        'ce_masked_includes_bonus',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the masked (parallel) mask is also set on the bonus slot',
        (
            _edit(
                """\
    is_masked_out = is_parallel_draft_region & in_bounds
""",
                """\
    is_masked_out = (j >= num_valid_tokens) & (
        j < num_valid_tokens + num_padding_slots_per_request
    ) & in_bounds
""",
            ),
        ),
    ),
    Mutant(
        'ce_new_token_index_local',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: new-token indices store the local slot j instead of the absolute output slot',
        (
            _edit(
                """\
        out_idx,
""",
                """\
        j,
""",
            ),
        ),
    ),
    Mutant(
        'ce_new_token_index_one_too_many',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the new-token region ends at nv + P inclusive, storing one index too many per request',
        (
            _edit(
                """\
    is_new_token_region = (j >= num_valid_tokens) & (
        j < num_valid_tokens + num_padding_slots_per_request
""",
                """\
    is_new_token_region = (j >= num_valid_tokens) & (
        j <= num_valid_tokens + num_padding_slots_per_request
""",
            ),
        ),
    ),
    Mutant(
        'ce_output_start_shift_uses_p',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: output_start ignores the shift (uses P instead of P - 1)',
        (
            _edit(
                """\
        output_start = query_start_loc + request_idx * (
            num_padding_slots_per_request - 1
        )
""",
                """\
        output_start = query_start_loc + request_idx * num_padding_slots_per_request
""",
            ),
        ),
    ),
    Mutant(
        'ce_parallel_uses_padding_id',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: parallel-drafting slots get padding_token_id instead of parallel_drafting_token_id',
        (
            _edit(
                """\
        is_parallel_draft_region, parallel_drafting_token_id, token_ids
""",
                """\
        is_parallel_draft_region, padding_token_id, token_ids
""",
            ),
        ),
    ),
    Mutant(
        'ce_positions_shifted',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the start position is read at qs + input_offset (positions shifted like the ids)',
        (
            _edit(
                """\
    start_pos = tl.load(target_positions_ptr + query_start_loc)
""",
                """\
    start_pos = tl.load(target_positions_ptr + query_start_loc + input_offset)
""",
            ),
        ),
    ),
    Mutant(
        'ce_rejected_positions_not_zeroed',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: rejected slots keep p0 + j as position instead of 0',
        (
            _edit(
                """\
    # Rejected positions are don't-care, set to 0
    positions = tl.where(is_rejected_region, 0, positions)
""",
                """\
""",
            ),
        ),
    ),
    Mutant(
        'draft_config_keeps_quant_config',
        'create_vllm_config_for_draft_model',
        "create_vllm_config_for_draft_model: the target's quant_config is kept",
        (
            _edit(
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
            _edit(
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
            _edit(
                """\
    assert old.speculative_config is not None, "speculative_config is not set"
""",
                """\
    # BUG: no assertion
""",
            ),
        ),
    ),
    Mutant(
        'draft_config_parallel_from_target',
        'create_vllm_config_for_draft_model',
        "create_vllm_config_for_draft_model: the target's parallel config is kept, only the tensor-parallel size comes from the drafter",
        (
            _edit(
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
            _edit(
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
        'extend_batch_size_from_query_start_loc',
        'extend_all_queries_by_N',
        'extend_all_queries_by_N: the batch size is taken as len(query_start_loc), one too many',
        (
            _edit(
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
            _edit(
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
            _edit(
                """\
    new_query_start_loc_cpu = cad.query_start_loc_cpu + N * torch.arange(
        len(cad.query_start_loc_cpu), dtype=torch.int32
    )
""",
                """\
    # BUG: query_start_loc_cpu is not extended
""",
            ),
            _edit(
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
            _edit(
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
            _edit(
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
            _edit(
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
    ),
    Mutant(
        'nt_discarded_counts_one',
        'eagle_prepare_next_token_padded_kernel',
        'prepare_next_token_padded: a discarded request reports count 1 (the backup token) instead of 0',
        (
            _edit(
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
            _edit(
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
            _edit(
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
            _edit(
                """\
        token_mask = token_offs < num_sampled_tokens_per_req
""",
                """\
        token_mask = token_offs < stride_sampled_token_ids
""",
            ),
        ),
    ),
    Mutant(
        'nt_vocab_size_inclusive',
        'eagle_prepare_next_token_padded_kernel',
        'prepare_next_token_padded: an id equal to vocab_size counts as valid (<= vocab_size)',
        (
            _edit(
                """\
        is_valid_mask = (token_ids != -1) & (token_ids < vocab_size) & token_mask
""",
                """\
        is_valid_mask = (token_ids != -1) & (token_ids <= vocab_size) & token_mask
""",
            ),
        ),
    ),
    Mutant(
        'pi_cu_read_as_exclusive',
        'eagle_prepare_inputs_padded_kernel',
        'prepare_inputs_padded: cu_num_draft_tokens read as exclusive (d = cu[r+1] - cu[r])',
        (
            _edit(
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
            _edit(
                """\
    if req_idx >= num_reqs:
        return
""",
                """\
""",
            ),
        ),
    ),
    Mutant(
        'pi_no_draft_where_dropped',
        'eagle_prepare_inputs_padded_kernel',
        'prepare_inputs_padded: the num_draft_tokens > 0 where is dropped (a discarded prefill gets rejected = 1)',
        (
            _edit(
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
            _edit(
                """\
    num_rejected_tokens = num_draft_tokens + 1 - valid_count
""",
                """\
    num_rejected_tokens = num_draft_tokens - valid_count
""",
            ),
        ),
    ),
)

# -- bugs that need production-sized inputs (issue 9): each names the extreme it needs --------

EXTREME_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        'pi_grid_capped_at_1024',
        'eagle_prepare_inputs_padded_kernel',
        'prepare_inputs_padded: programs past request 1023 return at once (a max_num_seqs = 1024 assumption)',
        (
            _edit(
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
        'extend_arange_capped_at_1025',
        'extend_all_queries_by_N',
        'extend_all_queries_by_N: the arange slice is capped at max_num_seqs + 1 = 1025 entries '
        '(past 1024 requests it is shorter than query_start_loc: the addition raises)',
        (
            _edit(
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
        'pi_query_start_loc_int16',
        'eagle_prepare_inputs_padded_kernel',
        'prepare_inputs_padded: query_start_loc[r + 1] is read as int16 (offsets past 32767 wrap)',
        (
            _edit(
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
    Mutant(
        'ce_query_start_loc_int16',
        'copy_and_expand_eagle_inputs_kernel',
        "copy_and_expand: a request's query_start_loc is read as int16 (requests starting past 32767 wrap)",
        (
            _edit(
                """\
    query_start_loc = tl.load(query_start_loc_ptr + request_idx)
""",
                """\
    query_start_loc = tl.load(query_start_loc_ptr + request_idx).to(tl.int16)
""",
            ),
        ),
        extreme='starts_past_32767',
    ),
    Mutant(
        'ce_valid_region_capped_at_2048',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: valid slots past 2048 are not copied (a port that caps prefill chunks at 2048 tokens)',
        (
            _edit(
                """\
    is_valid_region = j < num_valid_tokens
""",
                """\
    is_valid_region = j < tl.minimum(num_valid_tokens, 2048)
""",
            ),
        ),
        extreme='prefill_thousands',
    ),
    Mutant(
        'ce_rejected_tail_capped_at_15',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: only the first 15 rejected slots are marked rejected (num_speculative_tokens <= 15 assumed)',
        (
            _edit(
                """\
    is_rejected_region = j >= num_valid_tokens + num_padding_slots_per_request
""",
                """\
    is_rejected_region = (j >= num_valid_tokens + num_padding_slots_per_request) & (
        j < num_valid_tokens + num_padding_slots_per_request + 15
    )
""",
            ),
        ),
        extreme='many_rejected',
    ),
    Mutant(
        'ce_new_token_index_int16',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: the new-token index r * P is computed in int16 (overflows once r * P passes 32767)',
        (
            _edit(
                """\
        request_idx * num_padding_slots_per_request + new_token_local_idx
""",
                """\
        (request_idx * num_padding_slots_per_request).to(tl.int16) + new_token_local_idx
""",
            ),
        ),
        extreme='rp_past_32767',
    ),
    Mutant(
        'ce_positions_via_float32',
        'copy_and_expand_eagle_inputs_kernel',
        'copy_and_expand: positions go through float32 (a port computing RoPE positions in fp32: inexact past 2**24)',
        (
            _edit(
                """\
    positions = start_pos + j
""",
                """\
    positions = (start_pos + j).to(tl.float32).to(tl.int64)
""",
            ),
        ),
        extreme='positions_past_2_24',
    ),
    Mutant(
        'nt_block_limited_to_16_columns',
        'eagle_prepare_next_token_padded_kernel',
        'prepare_next_token_padded: only the first 16 columns are read (num_speculative_tokens <= 15 assumed)',
        (
            _edit(
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
            _edit(
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
        'prepare_next_token_padded: the vocabulary check is id + 1 <= vocab_size (wraps for id 2**31-1, which then counts as valid)',
        (
            _edit(
                """\
        is_valid_mask = (token_ids != -1) & (token_ids < vocab_size) & token_mask
""",
                """\
        is_valid_mask = (token_ids != -1) & (token_ids + 1 <= vocab_size) & token_mask
""",
            ),
        ),
        extreme='id_at_int32_max',
    ),
    Mutant(
        'extend_seq_lens_via_float32',
        'extend_all_queries_by_N',
        'extend_all_queries_by_N: seq_lens + N is computed in float32 (inexact past 2**24 tokens)',
        (
            _edit(
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
MUTANTS = MUTANTS + EXTREME_MUTANTS

# copy_and_expand_dflash_inputs_kernel (docs/CONTRACT.md §9): mutants of vLLM 0.33's module,
# since the bundled copy predates the kernel. "(variant on)" marks bugs only the
# has_num_rejected variant can show; the others show in both.
V033 = "vllm-release:0.33.0"
MUTANTS += (
    Mutant(
        "dfl_block_clamp_off_by_one",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: the block number is clamped to block_table_stride instead of stride - 1 "
        "(positions past the row read the next row's first entry)",
        (_edit("block_num = tl.minimum(block_num, block_table_stride - 1)",
               "block_num = tl.minimum(block_num, block_table_stride)"),),
        V033,
    ),
    Mutant(
        "dfl_block_table_row_0",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: the block-table lookup forgets the request's row (every request reads row 0)",
        (_edit("block_table_ptr + req_idx * block_table_stride + block_num,",
               "block_table_ptr + block_num,"),),
        V033,
    ),
    Mutant(
        "dfl_last_pos_ignores_rejected",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash (variant on): the query continues after the last context token, rejected ones "
        "included (valid_ctx_end = ctx_end)",
        (_edit("valid_ctx_end = ctx_end - num_rejected", "valid_ctx_end = ctx_end"),),
        V033,
    ),
    Mutant(
        "dfl_last_pos_off_by_one",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: the last accepted position is read at valid_ctx_end instead of valid_ctx_end - 1",
        (_edit("last_pos = tl.load(target_positions_ptr + valid_ctx_end - 1)",
               "last_pos = tl.load(target_positions_ptr + valid_ctx_end)"),),
        V033,
    ),
    Mutant(
        "dfl_offset_as_mask",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: the in-block offset is positions & (block_size - 1), right for power-of-two "
        "block sizes only",
        (_edit("slot = block_id * block_size + (positions % block_size)",
               "slot = block_id * block_size + (positions & (block_size - 1))"),),
        V033,
    ),
    Mutant(
        "dfl_query_out_uses_k",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: query slots are laid out with a stride of num_speculative_tokens instead of "
        "num_query_per_req",
        (_edit("query_out = req_idx * num_query_per_req + query_off",
               "query_out = req_idx * num_speculative_tokens + query_off"),),
        V033,
    ),
    Mutant(
        "dfl_sample_includes_bonus",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: token indices are also stored for the bonus slot (query_off >= 0)",
        (_edit("is_sample = is_query & (query_off > 0)", "is_sample = is_query & (query_off >= 0)"),),
        V033,
    ),
    Mutant(
        "dfl_sample_index_stride_q",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: token indices are laid out with a stride of num_query_per_req instead of "
        "num_speculative_tokens",
        (_edit("sample_out_idx = req_idx * num_speculative_tokens + (query_off - 1)",
               "sample_out_idx = req_idx * num_query_per_req + (query_off - 1)"),),
        V033,
    ),
    Mutant(
        "dfl_slot_int32",
        "copy_and_expand_dflash_inputs_kernel",
        "dflash: the block id is not widened to int64, so block_id * block_size wraps in int32",
        (_edit("""\
    ).to(tl.int64)
    slot = block_id""", """\
    )
    slot = block_id"""),),
        V033,
    ),
)


# -- eagle_step, compute_new_slot_mapping, update_num_computed_tokens_for_batch_change
# (docs/CONTRACT.md §6-§8): mutants of vLLM 0.33's module (V033 above), newer than the bundled copy.

MUTANTS += (
    Mutant(
        "es_exceeds_strict",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: exceeds uses > max_model_len, so a step onto position max_model_len gets a real slot",
        (_edit("    exceeds_max = new_position >= max_model_len\n", "    exceeds_max = new_position > max_model_len\n"),),
        V033,
    ),
    Mutant(
        "es_slot_of_current_position",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: the block lookup uses the current position, not the new one (the slot lags a token)",
        (
            _edit(
                "    block_number = clamped_position // block_size\n",
                "    block_number = position // block_size\n",
            ),
            _edit(
                "    slot_id = block_id * block_size + (clamped_position % block_size)\n",
                "    slot_id = block_id * block_size + (position % block_size)\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "es_parked_at_last_position",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: a request past max_model_len is parked at max_model_len - 1 instead of 0",
        (
            _edit(
                "    clamped_position = tl.where(exceeds_max, 0, new_position)\n",
                "    clamped_position = tl.where(exceeds_max, max_model_len - 1, new_position)\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "es_padding_unwritten",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: cudagraph padding programs return without writing PADDING_SLOT_ID",
        (
            _edit(
                "        tl.store(out_slot_mapping_ptr + req_idx, PAD_ID)\n        return\n",
                "        return\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "es_padding_off_by_one",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: the padding test is req_idx > batch_size, so program batch_size runs as a request",
        (_edit("    if req_idx >= batch_size:\n", "    if req_idx > batch_size:\n"),),
        V033,
    ),
    Mutant(
        "es_row_stride_is_width",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: rows are addressed n_blocks_per_req apart instead of block_table_stride",
        (
            _edit(
                "    block_id = tl.load(block_table_ptr + req_idx * block_table_stride + block_number)\n",
                "    block_id = tl.load(block_table_ptr + req_idx * n_blocks_per_req + block_number)\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "es_no_column_clamp",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: the block column is not clamped to n_blocks_per_req - 1",
        (_edit("    block_number = tl.minimum(block_number, n_blocks_per_req - 1)\n", ""),),
        V033,
    ),
    Mutant(
        "es_seq_len_not_reset",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: seq_lens grows by one even for a request parked past max_model_len (not reset to 1)",
        (
            _edit(
                "    new_seq_len = tl.where(exceeds_max, 1, seq_len + 1)\n",
                "    new_seq_len = seq_len + 1\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "es_seq_len_uncapped",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: seq_lens + 1 is not capped at max_model_len",
        (_edit("    new_seq_len = tl.minimum(new_seq_len, max_model_len)\n", ""),),
        V033,
    ),
    Mutant(
        "es_alias_reload",
        "eagle_step_slot_mapping_metadata_kernel",
        "eagle_step: the clamped position is stored early and the padding test re-reads the position "
        "from memory, which out_clamped_positions has already overwritten when it is positions itself",
        (
            _edit(
                "    clamped_position = tl.where(exceeds_max, 0, new_position)\n",
                "    clamped_position = tl.where(exceeds_max, 0, new_position)\n"
                "    tl.store(out_clamped_positions_ptr + req_idx, clamped_position)\n",
            ),
            _edit(
                "    slot_id = tl.where(exceeds_max, PAD_ID, slot_id)\n",
                "    slot_id = tl.where(tl.load(positions_ptr + req_idx) + 1 >= max_model_len, PAD_ID, slot_id)\n",
            ),
        ),
        V033,
    ),
)
MUTANTS += (
    Mutant(
        "ns_no_position_clamp",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: positions are not clamped to max_model_len - 1 before the lookup "
        "(a position past the last request's row indexes past the table: the out-of-bounds error the clamp prevents)",
        (
            _edit(
                "    clamped_positions = torch.clamp(new_positions, max=max_model_len - 1)\n",
                "    clamped_positions = new_positions\n",
            ),
        ),
        V033,
        crash=True,
    ),
    Mutant(
        "ns_rejected_not_masked",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: rejected tokens keep their slot (no PADDING_SLOT_ID)",
        (_edit("    new_slot_mapping.masked_fill_(is_rejected_token_mask, PADDING_SLOT_ID)\n", ""),),
        V033,
    ),
    Mutant(
        "ns_exceeds_strict",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: positions are masked only past max_model_len (>), so position M gets a slot",
        (
            _edit(
                "    exceeds_max_model_len = new_positions >= max_model_len\n",
                "    exceeds_max_model_len = new_positions > max_model_len\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "ns_new_tokens_forgotten",
        "compute_new_slot_mapping",
        "compute_new_slot_mapping: requests own qlen tokens, not qlen + num_new_tokens (the new tokens are "
        "taken as appended after the whole batch, request r's at T + r*N, as if new_positions[:T + R*N] were "
        "T target tokens and then R*N new ones)",
        (
            _edit(
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
            _edit(
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
            _edit(
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
            _edit(
                "    clamped_positions = torch.clamp(new_positions, max=max_model_len - 1)\n",
                "    clamped_positions = new_positions.clamp_(max=max_model_len - 1)\n",
            ),
        ),
        V033,
    ),
)
MUTANTS += (
    Mutant(
        "bc_drafts_ignored",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: every request of the previous batch is corrected, also those without drafts",
        (
            _edit(
                "    participating = (prev_positions >= 0) & (prev_drafts > 0)\n",
                "    participating = prev_positions >= 0\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "bc_new_requests_participate",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: a new request (prev_position -1) is corrected from row 0 when row 0 had drafts",
        (
            _edit(
                "    participating = (prev_positions >= 0) & (prev_drafts > 0)\n",
                "    participating = prev_drafts > 0\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "bc_optimistic_count",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: corrected with the drafts (all accepted: the optimistic count) instead of the valid count",
        (
            _edit(
                "    corrected = prev_computed + valid_counts.int()\n",
                "    corrected = prev_computed + prev_drafts\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "bc_current_rows",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: the previous count is read at the request's current row, not its previous row",
        (
            _edit(
                "    prev_computed = num_computed_tokens[gather_indices]\n",
                "    prev_computed = num_computed_tokens[: prev_positions.shape[0]].clone()\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "bc_accepted_reset",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: num_accepted_tokens of requests without drafts is reset to 1 instead of kept",
        (
            _edit(
                "        torch.where(participating, valid_counts, num_accepted_tokens)\n",
                "        torch.where(participating, valid_counts, 1)\n",
            ),
        ),
        V033,
    ),
    Mutant(
        "bc_compiled_path_differs",
        "update_num_computed_tokens_for_batch_change",
        "batch_change: stands for a miscompilation: under torch.compile only, the drafts test is dropped "
        "(the eager function is right; the harness must run the compiled one to see it)",
        (
            _edit(
                "    participating = (prev_positions >= 0) & (prev_drafts > 0)\n",
                "    participating = (prev_positions >= 0) & ((prev_drafts > 0) | torch.compiler.is_compiling())\n",
            ),
        ),
        V033,
    ),
)

CRASH_MUTANTS: tuple[Mutant, ...] = (
    # Kills the process (a store in unmapped memory under the interpreter; an illegal address,
    # a sticky CUDA error, compiled), so it cannot run inside the test process:
    # tests/test_crash.py runs it through the CLI's supervisor and through pytest-xdist.
    Mutant(
        "crash_wild_write_prepare_inputs",
        "eagle_prepare_inputs_padded_kernel",
        "prepare_inputs_padded: a wild store 2**40 elements past the buffer when a request has more than two drafts",
        (
            _edit(
                """\
    tl.store(num_rejected_tokens_gpu_ptr + req_idx, num_rejected_tokens)
""",
                """\
    tl.store(num_rejected_tokens_gpu_ptr + req_idx, num_rejected_tokens)
    if num_draft_tokens > 2:
        tl.store(num_rejected_tokens_gpu_ptr + req_idx + (1 << 40), num_rejected_tokens)
""",
            ),
        ),
        crash=True,
    ),
)

SANITIZER_MUTANTS: tuple[Mutant, ...] = (
    # Reads out of bounds without changing any output: the differential check passes (CPU and
    # GPU alike); only `eaglefuzz replay --sanitize` (compute-sanitizer memcheck) reports it.
    # benchmarks/gpu_sanitize.sh is the proof on a GPU.
    Mutant(
        "oob_read_copy_expand_unmasked",
        "copy_and_expand_eagle_inputs_kernel",
        "copy_and_expand: the input-token load lost its clamp and its mask, so the lanes past a request's "
        "valid tokens read past it (the last request's past the end of target_token_ids, up to "
        "BLOCK_SIZE_TOKENS elements); tl.where discards what they read, so every output stays right",
        (
            _edit(
                "    in_idx_clamped = tl.minimum(in_idx, total_input_tokens - 1)\n",
                "    in_idx_clamped = in_idx\n",
            ),
            _edit(
                "        target_token_ids_ptr + in_idx_clamped, mask=is_valid_region & in_bounds, other=0\n",
                "        target_token_ids_ptr + in_idx_clamped\n",
            ),
        ),
    ),
)

BY_NAME = {m.name: m for m in MUTANTS + CRASH_MUTANTS + SANITIZER_MUTANTS}


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "seeded_bugs_out")
    for m in MUTANTS + CRASH_MUTANTS + SANITIZER_MUTANTS:
        try:
            print(write(m, out))
        except ModuleUnavailable as exc:
            print(f"{m.name}: skipped ({exc})")
