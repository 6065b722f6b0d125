"""Launch each kernel the way vLLM's call sites do.

Every launcher takes the kernel to launch as its first argument (the production kernel from
``spec_decode_utils`` by default), so a port or an altered copy is launched exactly the same
way. Launch parameters default to vLLM's own choice; passing them explicitly overrides it.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import triton

from . import spec_decode_utils as _utils

Kernel = Any  # anything indexable as kernel[grid](*args, **constexprs)


def copy_and_expand_launch_params(
    max_query_len: int, num_padding_slots_per_request: int, shift_input_ids: bool
) -> tuple[int, int]:
    """vLLM's ``(BLOCK_SIZE_TOKENS, num_blocks)`` for ``copy_and_expand_eagle_inputs_kernel``.

    ``max_tokens = max_query_len + P - shift``; the block is the next power of two of that,
    capped at 256, and enough blocks are launched to cover ``max_tokens`` slots.
    """
    max_tokens = max_query_len + num_padding_slots_per_request - int(shift_input_ids)
    block = min(256, triton.next_power_of_2(max_tokens))
    return block, triton.cdiv(max_tokens, block)


def launch_copy_and_expand_eagle_inputs(
    kernel: Kernel = _utils.copy_and_expand_eagle_inputs_kernel,
    *,
    target_token_ids: torch.Tensor,
    target_positions: torch.Tensor,
    next_token_ids: torch.Tensor,
    out_input_ids: torch.Tensor,
    out_positions: torch.Tensor,
    out_is_rejected_token_mask: torch.Tensor,
    out_is_masked_token_mask: torch.Tensor,
    out_new_token_indices: torch.Tensor,
    out_hidden_state_mapping: torch.Tensor,
    query_start_loc: torch.Tensor,
    query_end_loc: torch.Tensor,
    padding_token_id: int,
    parallel_drafting_token_id: int,
    num_padding_slots_per_request: int,
    shift_input_ids: bool,
    max_query_len: int,
    total_input_tokens: int | None = None,
    block_size_tokens: int | None = None,
    num_blocks: int | None = None,
) -> None:
    """Mirror of ``SpecDecodeBaseProposer.set_inputs_first_pass``: grid ``(num_reqs, num_blocks)``.

    ``total_input_tokens`` defaults to ``len(target_token_ids)``. ``block_size_tokens`` and
    ``num_blocks`` default to :func:`copy_and_expand_launch_params`; when only the block is
    given, enough blocks are launched to cover ``max_query_len + P - shift`` slots.
    """
    vllm_block, vllm_blocks = copy_and_expand_launch_params(
        max_query_len, num_padding_slots_per_request, shift_input_ids
    )
    if block_size_tokens is None:
        block_size_tokens = vllm_block
    if num_blocks is None:
        max_tokens = max_query_len + num_padding_slots_per_request - int(shift_input_ids)
        num_blocks = triton.cdiv(max_tokens, block_size_tokens)
    if total_input_tokens is None:
        total_input_tokens = target_token_ids.shape[0]
    num_reqs = query_end_loc.shape[0]
    kernel[(num_reqs, num_blocks)](
        target_token_ids,
        target_positions,
        next_token_ids,
        out_input_ids,
        out_positions,
        out_is_rejected_token_mask,
        out_is_masked_token_mask,
        out_new_token_indices,
        out_hidden_state_mapping,
        query_start_loc,
        query_end_loc,
        padding_token_id,
        parallel_drafting_token_id,
        total_input_tokens,
        num_padding_slots_per_request,
        shift_input_ids,
        BLOCK_SIZE_TOKENS=block_size_tokens,
    )


def launch_eagle_prepare_inputs_padded(
    kernel: Kernel = _utils.eagle_prepare_inputs_padded_kernel,
    *,
    cu_num_draft_tokens: torch.Tensor,
    valid_sampled_tokens_count: torch.Tensor,
    query_start_loc: torch.Tensor,
    token_indices_to_sample: torch.Tensor,
    num_rejected_tokens: torch.Tensor | None,
    num_reqs: int,
    grid_size: int | None = None,
) -> None:
    """Mirror of ``prepare_inputs_padded``: grid ``(num_reqs,)``, or ``grid_size`` for a padded launch.

    ``num_rejected_tokens=None``: the kernel of vLLM 0.12-0.13, which has no such parameter,
    launched as those releases' ``prepare_inputs_padded`` launches it (five arguments).
    """
    grid = (num_reqs if grid_size is None else grid_size,)
    if num_rejected_tokens is None:
        kernel[grid](cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc, token_indices_to_sample,
                     num_reqs)
        return
    kernel[grid](
        cu_num_draft_tokens,
        valid_sampled_tokens_count,
        query_start_loc,
        token_indices_to_sample,
        num_rejected_tokens,
        num_reqs,
    )


def launch_eagle_prepare_next_token_padded(
    kernel: Kernel = _utils.eagle_prepare_next_token_padded_kernel,
    *,
    sampled_token_ids: torch.Tensor,
    discard_request_mask: torch.Tensor,
    backup_next_token_ids: torch.Tensor,
    next_token_ids: torch.Tensor,
    valid_sampled_tokens_count: torch.Tensor,
    vocab_size: int,
    num_reqs: int,
    block_size_tokens: int | None = None,
    grid_size: int | None = None,
) -> None:
    """Mirror of ``prepare_next_token_ids_padded``.

    ``sampled_token_ids`` is ``[num_reqs, S]``, possibly a view with ``stride(0) > S``;
    ``BLOCK_SIZE_TOKENS = next_power_of_2(S)`` and grid ``(num_reqs,)`` unless overridden.
    """
    num_sampled = sampled_token_ids.shape[1]
    if block_size_tokens is None:
        block_size_tokens = triton.next_power_of_2(num_sampled)
    kernel[(num_reqs if grid_size is None else grid_size,)](
        sampled_token_ids,
        discard_request_mask,
        backup_next_token_ids,
        next_token_ids,
        valid_sampled_tokens_count,
        vocab_size,
        num_sampled,
        num_reqs,
        sampled_token_ids.stride(0),
        BLOCK_SIZE_TOKENS=block_size_tokens,
    )


LAUNCHERS: dict[str, Callable[..., None]] = {
    "copy_and_expand_eagle_inputs_kernel": launch_copy_and_expand_eagle_inputs,
    "eagle_prepare_inputs_padded_kernel": launch_eagle_prepare_inputs_padded,
    "eagle_prepare_next_token_padded_kernel": launch_eagle_prepare_next_token_padded,
}


# --------------------------------------------------------------------------------------------
# copy_and_expand_dflash_inputs_kernel (vLLM 0.33; not in the bundled copy)
# --------------------------------------------------------------------------------------------


def dflash_launch_params(max_query_len: int, num_query_per_req: int) -> tuple[int, int]:
    """vLLM's ``(max_tokens_per_req, triton_block_size)`` for the DFlash kernel
    (``DFlashProposer.set_inputs_first_pass``): ``cad.max_query_len + num_query_per_req`` and
    ``min(256, next_power_of_2(max_tokens_per_req))``."""
    max_tokens_per_req = max_query_len + num_query_per_req
    return max_tokens_per_req, min(256, triton.next_power_of_2(max_tokens_per_req))


def launch_copy_and_expand_dflash_inputs(
    kernel: Kernel,
    *,
    next_token_ids: torch.Tensor,
    target_positions: torch.Tensor,
    out_input_ids: torch.Tensor,
    out_context_positions: torch.Tensor,
    out_query_positions: torch.Tensor,
    out_context_slot_mapping: torch.Tensor,
    out_query_slot_mapping: torch.Tensor,
    out_token_indices: torch.Tensor,
    block_table: torch.Tensor,
    query_start_loc: torch.Tensor,
    num_rejected_tokens: torch.Tensor | None,
    parallel_drafting_token_id: int,
    block_size: int,
    num_speculative_tokens: int,
    max_query_len: int,
    total_input_tokens: int | None = None,
    max_tokens_per_req: int | None = None,
    triton_block_size: int | None = None,
) -> None:
    """Mirror of ``DFlashProposer.set_inputs_first_pass`` and its dispatcher
    ``_copy_and_expand_dflash_inputs``: grid ``(len(query_start_loc) - 1,
    cdiv(max_tokens_per_req, triton_block_size))``, ``BLOCK_SIZE = triton_block_size``,
    ``HAS_NUM_REJECTED = num_rejected_tokens is not None``; every argument by the kernel's
    parameter name, as the dispatcher binds them.

    ``num_rejected_tokens=None`` passes the null pointer ``0`` (vLLM's call without rejected
    tokens). ``total_input_tokens`` defaults to ``len(target_positions)``;
    ``max_tokens_per_req`` and ``triton_block_size`` to :func:`dflash_launch_params` (a given
    ``max_tokens_per_req`` alone picks its block as vLLM would).
    """
    num_query_per_req = 1 + num_speculative_tokens
    vllm_max_tokens, _ = dflash_launch_params(max_query_len, num_query_per_req)
    if max_tokens_per_req is None:
        max_tokens_per_req = vllm_max_tokens
    if triton_block_size is None:
        triton_block_size = min(256, triton.next_power_of_2(max_tokens_per_req))
    if total_input_tokens is None:
        total_input_tokens = target_positions.shape[0]
    has_num_rejected = num_rejected_tokens is not None
    grid = (query_start_loc.shape[0] - 1, triton.cdiv(max_tokens_per_req, triton_block_size))
    kernel[grid](
        next_token_ids_ptr=next_token_ids,
        target_positions_ptr=target_positions,
        out_input_ids_ptr=out_input_ids,
        out_context_positions_ptr=out_context_positions,
        out_query_positions_ptr=out_query_positions,
        out_context_slot_mapping_ptr=out_context_slot_mapping,
        out_query_slot_mapping_ptr=out_query_slot_mapping,
        out_token_indices_ptr=out_token_indices,
        block_table_ptr=block_table,
        block_table_stride=block_table.stride(0),
        query_start_loc_ptr=query_start_loc,
        num_rejected_tokens_ptr=num_rejected_tokens if has_num_rejected else 0,
        parallel_drafting_token_id=parallel_drafting_token_id,
        block_size=block_size,
        num_query_per_req=num_query_per_req,
        num_speculative_tokens=num_speculative_tokens,
        total_input_tokens=total_input_tokens,
        BLOCK_SIZE=triton_block_size,
        HAS_NUM_REJECTED=has_num_rejected,
    )


LAUNCHERS["copy_and_expand_dflash_inputs_kernel"] = launch_copy_and_expand_dflash_inputs


PADDING_SLOT_ID = -1
"""vLLM's ``PADDING_SLOT_ID``: the slot id of a token that must not write the KV cache."""


def launch_eagle_step_slot_mapping_metadata(
    kernel: Kernel,
    *,
    positions: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    out_clamped_positions: torch.Tensor,
    out_slot_mapping: torch.Tensor,
    block_size: int,
    max_model_len: int,
    input_batch_size: int | None = None,
) -> None:
    """Mirror of ``eagle_step_update_slot_mapping_and_metadata`` (vLLM 0.33) and its dispatcher
    ``_eagle_step_slot_mapping_metadata``: grid ``(input_batch_size,)``.

    ``batch_size = positions.shape[0]``; ``input_batch_size`` defaults to it (no cudagraph
    padding); ``block_table_stride = block_table.stride(0)`` and ``n_blocks_per_req =
    block_table.shape[1]`` (a column slice of a wider table keeps the wider stride);
    ``PAD_ID = PADDING_SLOT_ID``. ``seq_lens`` is updated in place; ``out_clamped_positions``
    may be ``positions`` itself, as in vLLM's draft steps after the first. There is no bundled
    kernel of this name (it is newer than the bundled copy): ``kernel`` is required.
    """
    batch_size = positions.shape[0]
    if input_batch_size is None:
        input_batch_size = batch_size
    kernel[(input_batch_size,)](
        positions,
        block_table,
        block_table.stride(0),
        seq_lens,
        out_clamped_positions,
        out_slot_mapping,
        block_size=block_size,
        max_model_len=max_model_len,
        n_blocks_per_req=block_table.shape[1],
        PAD_ID=PADDING_SLOT_ID,
        batch_size=batch_size,
    )


LAUNCHERS["eagle_step_slot_mapping_metadata_kernel"] = launch_eagle_step_slot_mapping_metadata


# --------------------------------------------------------------------------------------------
# vllm/v1/sample/rejection_sampler.py (V1's rejection sampler; not in the bundled copy)
# --------------------------------------------------------------------------------------------


def launch_rejection_greedy_sample(
    kernel: Kernel,
    *,
    output_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    target_argmax: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    is_greedy: torch.Tensor | None,
    max_spec_len: int,
    uniform_probs: torch.Tensor | None = None,
    synthetic_conditional_rates: torch.Tensor | None = None,
) -> None:
    """Mirror of ``_rejection_greedy_sample`` (vLLM 0.33.0) and its dispatcher: grid ``(B,)``,
    ``SYNTHETIC_MODE = synthetic_conditional_rates is not None``.

    vLLM's grid is ``output_token_ids.shape[0]``, which is ``B`` there; an output with more rows
    than requests (the harness's extended tier) keeps the grid counted in requests:
    ``cu_num_draft_tokens.shape[0]``.
    """
    kernel[(cu_num_draft_tokens.shape[0],)](
        output_token_ids,
        cu_num_draft_tokens,
        draft_token_ids,
        target_argmax,
        bonus_token_ids,
        is_greedy,
        max_spec_len,
        uniform_probs,
        synthetic_conditional_rates,
        SYNTHETIC_MODE=synthetic_conditional_rates is not None,
    )


LAUNCHERS["rejection_greedy_sample_kernel"] = launch_rejection_greedy_sample


def launch_rejection_random_sample(
    kernel: Kernel,
    *,
    output_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    recovered_token_ids: torch.Tensor,
    uniform_probs: torch.Tensor,
    is_greedy: torch.Tensor,
    max_spec_len: int,
    vocab_size: int | None = None,
    synthetic_conditional_rates: torch.Tensor | None = None,
) -> None:
    """Mirror of ``_rejection_random_sample`` (vLLM 0.33.0) and its dispatcher: grid ``(B,)``
    (counted in requests, as :func:`launch_rejection_greedy_sample`), ``vocab_size`` by default
    ``target_probs.shape[1]``, ``NO_DRAFT_PROBS = draft_probs is None``, ``SYNTHETIC_MODE =
    synthetic_conditional_rates is not None``."""
    if vocab_size is None:
        vocab_size = target_probs.shape[1]
    kernel[(cu_num_draft_tokens.shape[0],)](
        output_token_ids,
        cu_num_draft_tokens,
        draft_token_ids,
        draft_probs,
        target_probs,
        bonus_token_ids,
        recovered_token_ids,
        uniform_probs,
        is_greedy,
        max_spec_len,
        vocab_size,
        synthetic_conditional_rates,
        NO_DRAFT_PROBS=draft_probs is None,
        SYNTHETIC_MODE=synthetic_conditional_rates is not None,
    )


LAUNCHERS["rejection_random_sample_kernel"] = launch_rejection_random_sample


RECOVERED_BLOCK_SIZE = 8192
"""vLLM's ``BLOCK_SIZE`` of ``sample_recovered_tokens_kernel``'s launch."""


def launch_sample_recovered_tokens(
    kernel: Kernel,
    *,
    output_token_ids: torch.Tensor,
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    inv_q: torch.Tensor,
    max_spec_len: int,
    vocab_size: int | None = None,
    block_size: int | None = None,
) -> None:
    """Mirror of ``_sample_recovered_tokens`` (vLLM 0.33.0): grid ``(B, max_spec_len)``,
    ``vocab_size`` by default ``target_probs.shape[1]``, ``BLOCK_SIZE = 8192`` unless given,
    ``NO_DRAFT_PROBS = draft_probs is None``, ``USE_FP64_GUMBEL = inv_q is float64``."""
    if vocab_size is None:
        vocab_size = target_probs.shape[1]
    kernel[(cu_num_draft_tokens.shape[0], max_spec_len)](
        output_token_ids,
        cu_num_draft_tokens,
        draft_token_ids,
        draft_probs,
        target_probs,
        inv_q,
        vocab_size,
        BLOCK_SIZE=RECOVERED_BLOCK_SIZE if block_size is None else block_size,
        NO_DRAFT_PROBS=draft_probs is None,
        USE_FP64_GUMBEL=inv_q.dtype == torch.float64,
    )


LAUNCHERS["sample_recovered_tokens_kernel"] = launch_sample_recovered_tokens


EXPAND_MAX_NUM_TOKENS = 128
"""vLLM's ``MAX_NUM_TOKENS`` of ``expand_kernel``'s launch (``MAX_SPEC_LEN``)."""


def launch_expand(
    kernel: Kernel,
    *,
    output: torch.Tensor,
    input: torch.Tensor,
    cu_num_tokens: torch.Tensor,
    replace_from: int,
    replace_to: int,
    max_num_tokens: int | None = None,
) -> None:
    """Mirror of ``_expand`` (vLLM 0.33.0), ``expand_batch_to_tokens``'s dispatcher: grid
    ``(input.shape[0],)``, ``MAX_NUM_TOKENS = MAX_SPEC_LEN = 128`` unless given."""
    kernel[(input.shape[0],)](
        output,
        input,
        cu_num_tokens,
        replace_from,
        replace_to,
        MAX_NUM_TOKENS=EXPAND_MAX_NUM_TOKENS if max_num_tokens is None else max_num_tokens,
    )


LAUNCHERS["expand_kernel"] = launch_expand


# -- Model Runner V2 (docs/CONTRACT.md §14-§27) -------------------------------------------------
#
# Each launcher passes what the wrapper of vllm/v1/worker/gpu/ passes (grids, strides, constexpr
# values), with the same keyword names as the oracles of oracles/vectorized_v2.py. 2-D tables are
# passed whole: the launcher hands the kernel their stride(0). Tensors given for outputs are
# written in place (the launchers allocate nothing the kernel writes). vLLM's kernels are not
# here: they come from a release wheel, an installed vLLM or a user's file at run time.

PAD_SLOT_ID = -1
"""vLLM's ``PAD_SLOT_ID`` (``vllm/v1/attention/backends/utils.py``)."""


def _grid(n: int | None, default: int) -> int:
    """``n`` when the caller gives a grid size, else vLLM's ``default``."""
    return default if n is None else int(n)


def launch_input_batch_prepare_prefill_inputs(
    kernel: Kernel, *, input_ids: torch.Tensor, next_prefill_tokens: torch.Tensor, idx_mapping: torch.Tensor,
    query_start_loc: torch.Tensor, all_token_ids: torch.Tensor, prefill_len: torch.Tensor,
    num_computed_tokens: torch.Tensor, num_reqs: int | None = None, num_lookahead: int | None = None,
    LOOKAHEAD_BLOCK: int | None = None, BLOCK_SIZE: int = 1024,
) -> None:  # fmt: skip
    """As ``prepare_prefill_inputs`` (``input_batch.py``): grid ``(idx_mapping.shape[0],)``,
    ``num_lookahead = next_prefill_tokens.shape[0]``, ``LOOKAHEAD_BLOCK`` its next power of two."""
    n = _grid(num_lookahead, next_prefill_tokens.shape[0])
    kernel[(_grid(num_reqs, idx_mapping.shape[0]),)](
        input_ids, next_prefill_tokens, next_prefill_tokens.stride(0), n, idx_mapping, query_start_loc,
        all_token_ids, all_token_ids.stride(0), prefill_len, num_computed_tokens,
        BLOCK_SIZE=BLOCK_SIZE, LOOKAHEAD_BLOCK=triton.next_power_of_2(n) if LOOKAHEAD_BLOCK is None else LOOKAHEAD_BLOCK,
    )  # fmt: skip


def launch_prepare_pos_seq_lens(
    kernel: Kernel, *, pos: torch.Tensor, seq_lens: torch.Tensor, idx_mapping: torch.Tensor,
    query_start_loc: torch.Tensor, num_computed_tokens: torch.Tensor, num_reqs: int | None = None,
    max_num_reqs: int | None = None, BLOCK_SIZE: int = 1024,
) -> None:  # fmt: skip
    """As ``prepare_pos_seq_lens``: grid ``(B + 1,)`` (the last program pads ``seq_lens``),
    ``max_num_reqs = seq_lens.shape[0]``."""
    B = _grid(num_reqs, idx_mapping.shape[0])
    kernel[(B + 1,)](
        pos, seq_lens, idx_mapping, query_start_loc, num_computed_tokens,
        _grid(max_num_reqs, seq_lens.shape[0]), BLOCK_SIZE=BLOCK_SIZE,
    )  # fmt: skip


def launch_combine_sampled_and_draft_tokens(
    kernel: Kernel, *, input_ids: torch.Tensor, logits_indices: torch.Tensor, idx_mapping: torch.Tensor,
    last_sampled_tokens: torch.Tensor, query_start_loc: torch.Tensor, seq_lens: torch.Tensor,
    prefill_len: torch.Tensor, draft_tokens: torch.Tensor, cu_num_logits: torch.Tensor, num_reqs: int | None = None,
    BLOCK_SIZE: int | None = None, NUM_NEW_SAMPLED_TOKENS: int = 1,
) -> None:  # fmt: skip
    """As ``combine_sampled_and_draft_tokens``: grid ``(idx_mapping.shape[0],)``,
    ``BLOCK_SIZE = next_power_of_2(K + NUM_NEW_SAMPLED_TOKENS)``, ``K = draft_tokens.shape[-1]``."""
    block = triton.next_power_of_2(draft_tokens.shape[-1] + NUM_NEW_SAMPLED_TOKENS) if BLOCK_SIZE is None else BLOCK_SIZE
    kernel[(_grid(num_reqs, idx_mapping.shape[0]),)](
        input_ids, idx_mapping, last_sampled_tokens, query_start_loc, seq_lens, prefill_len, draft_tokens,
        draft_tokens.stride(0), cu_num_logits, logits_indices,
        NUM_NEW_SAMPLED_TOKENS=NUM_NEW_SAMPLED_TOKENS, BLOCK_SIZE=block,
    )  # fmt: skip


def launch_expand_idx_mapping(
    kernel: Kernel, *, idx_mapping: torch.Tensor, expanded_idx_mapping: torch.Tensor,
    expanded_local_pos: torch.Tensor, cu_num_logits: torch.Tensor, num_reqs: int | None = None,
    BLOCK_SIZE: int | None = None, max_expand_len: int | None = None,
) -> None:  # fmt: skip
    """As ``expand_idx_mapping``: grid ``(idx_mapping.shape[0],)``, ``BLOCK_SIZE =
    next_power_of_2(max_expand_len)`` (vLLM's ``decode_query_len``)."""
    if BLOCK_SIZE is None:
        if max_expand_len is None:
            raise ValueError("expand_idx_mapping: give BLOCK_SIZE or max_expand_len (vLLM's decode_query_len)")
        BLOCK_SIZE = triton.next_power_of_2(max_expand_len)
    kernel[(_grid(num_reqs, idx_mapping.shape[0]),)](
        idx_mapping, expanded_idx_mapping, expanded_local_pos, cu_num_logits, BLOCK_SIZE=BLOCK_SIZE,
    )  # fmt: skip


def launch_get_num_sampled_and_rejected(
    kernel: Kernel, *, num_sampled: torch.Tensor, num_rejected: torch.Tensor, seq_lens: torch.Tensor,
    cu_num_logits: torch.Tensor, idx_mapping: torch.Tensor, prefill_len: torch.Tensor, num_reqs: int | None = None,
) -> None:  # fmt: skip
    """As ``get_num_sampled_and_rejected``: grid ``(idx_mapping.shape[0],)`` (vLLM allocates
    ``num_rejected`` as ``empty_like(num_sampled)``; here it is given)."""
    kernel[(_grid(num_reqs, idx_mapping.shape[0]),)](
        num_sampled, num_rejected, seq_lens, cu_num_logits, idx_mapping, prefill_len,
    )  # fmt: skip


def launch_post_update(
    kernel: Kernel, *, idx_mapping: torch.Tensor, num_computed_tokens: torch.Tensor,
    last_sampled_tokens: torch.Tensor, output_bin_counts: torch.Tensor | None, sampled_tokens: torch.Tensor,
    num_sampled: torch.Tensor, num_rejected: torch.Tensor, query_start_loc: torch.Tensor | None,
    all_token_ids: torch.Tensor, total_len: torch.Tensor, draft_tokens: torch.Tensor | None = None,
    draft_tokens_out: torch.Tensor | None = None, num_draft_tokens: int | None = None, num_reqs: int | None = None,
) -> None:  # fmt: skip
    """As ``post_update``: grid ``(idx_mapping.shape[0],)``, ``num_warps = 1``; strides of the
    optional tensors 0 when they are None, ``num_draft_tokens = draft_tokens.shape[1]``."""
    D = (draft_tokens.shape[1] if draft_tokens is not None else 0) if num_draft_tokens is None else num_draft_tokens
    kernel[(_grid(num_reqs, idx_mapping.shape[0]),)](
        idx_mapping, num_computed_tokens, last_sampled_tokens, output_bin_counts,
        output_bin_counts.stride(0) if output_bin_counts is not None else 0, sampled_tokens,
        sampled_tokens.stride(0), num_sampled, num_rejected, query_start_loc, all_token_ids,
        all_token_ids.stride(0), total_len, draft_tokens, draft_tokens_out, D, num_warps=1,
    )  # fmt: skip


def launch_post_update_num_computed_tokens(
    kernel: Kernel, *, idx_mapping: torch.Tensor, num_computed_tokens: torch.Tensor, query_start_loc: torch.Tensor,
    num_reqs: int | None = None,
) -> None:  # fmt: skip
    """As ``post_update_num_computed_tokens``: grid ``(idx_mapping.shape[0],)``."""
    kernel[(_grid(num_reqs, idx_mapping.shape[0]),)](idx_mapping, num_computed_tokens, query_start_loc)


def _small_table(values: list[int], dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """``values`` as a tensor on ``device``, queued on a GPU's current stream without waiting for
    the launches before it (copied from pinned memory: a copy from pageable memory waits for
    them). vLLM builds these tables once, at start-up; a launch here builds its own, and must not
    make every launch wait for the previous one."""
    t = torch.tensor(values, dtype=dtype)
    if torch.device(device).type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def pointer_table(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """A uint64 tensor of the tensors' data pointers, on their device (as ``BlockTables``
    builds ``block_table_ptrs``)."""
    return _small_table([t.data_ptr() for t in tensors], torch.uint64, tensors[0].device if tensors else "cpu")


def launch_gather_block_tables(
    kernel: Kernel, *, idx_mapping: torch.Tensor, src_block_tables: Sequence[torch.Tensor],
    dst_block_tables: Sequence[torch.Tensor], num_blocks: torch.Tensor, num_reqs: int | None = None,
    num_rows: int | None = None, num_computed_tokens: torch.Tensor, sliding_window_reach: torch.Tensor,
    block_sizes: torch.Tensor, MASK_SLIDING_WINDOW: bool, BLOCK_SIZE: int = 1024,
) -> None:  # fmt: skip
    """As ``BlockTables.gather_block_tables``: grid ``(G, num_rows)``, the tables' addresses in
    uint64 pointer tensors, their strides (the source's: ``stride(0)``) in an int64 tensor."""
    B = _grid(num_reqs, idx_mapping.shape[0])
    device = idx_mapping.device
    strides = _small_table([t.stride(0) for t in src_block_tables], torch.int64, device)
    kernel[(len(src_block_tables), _grid(num_rows, B))](
        idx_mapping, pointer_table(src_block_tables), pointer_table(dst_block_tables), strides, num_blocks,
        num_blocks.stride(0), B, num_computed_tokens, sliding_window_reach, block_sizes,
        MASK_SLIDING_WINDOW=MASK_SLIDING_WINDOW, BLOCK_SIZE=BLOCK_SIZE,
    )  # fmt: skip


def launch_compute_slot_mappings(
    kernel: Kernel, *, idx_mapping: torch.Tensor, query_start_loc: torch.Tensor, positions: torch.Tensor,
    block_tables: Sequence[torch.Tensor], block_sizes: torch.Tensor, slot_mapping_enabled: torch.Tensor,
    dcp_sharded: torch.Tensor, slot_mappings: torch.Tensor, cp_rank: int = 0, num_reqs: int | None = None,
    max_num_tokens: int | None = None, CP_SIZE: int = 1, CP_INTERLEAVE: int = 1, PAD_ID: int = PAD_SLOT_ID,
    TRITON_BLOCK_SIZE: int = 1024,
) -> None:  # fmt: skip
    """As ``BlockTables.compute_slot_mappings``: grid ``(G, B + 1)``,
    ``max_num_tokens = slot_mappings.shape[1]``, ``PAD_ID = PAD_SLOT_ID``."""
    B = _grid(num_reqs, idx_mapping.shape[0])
    strides = _small_table([t.stride(0) for t in block_tables], torch.int64, idx_mapping.device)
    kernel[(len(block_tables), B + 1)](
        _grid(max_num_tokens, slot_mappings.shape[1]), idx_mapping, query_start_loc, positions,
        pointer_table(block_tables), strides, block_sizes, slot_mapping_enabled, dcp_sharded, slot_mappings,
        slot_mappings.stride(0), cp_rank, CP_SIZE=CP_SIZE, CP_INTERLEAVE=CP_INTERLEAVE, PAD_ID=PAD_ID,
        TRITON_BLOCK_SIZE=TRITON_BLOCK_SIZE,
    )  # fmt: skip


def launch_gather_draft_sampled(
    kernel: Kernel, *, draft_sampled: torch.Tensor, pos: torch.Tensor, input_ids: torch.Tensor,
    positions: torch.Tensor, logits_indices: torch.Tensor, expanded_idx_mapping: torch.Tensor,
    expanded_local_pos: torch.Tensor, prefill_len: torch.Tensor, num_logits: int | None = None,
    BLOCK_SIZE: int = 1024,
) -> None:  # fmt: skip
    """As ``gather_draft_sampled``: grid ``(cdiv(num_logits, 1024),)``,
    ``num_logits = logits_indices.shape[0]``."""
    n = _grid(num_logits, logits_indices.shape[0])
    kernel[(triton.cdiv(n, BLOCK_SIZE),)](
        draft_sampled, pos, input_ids, positions, logits_indices, expanded_idx_mapping, expanded_local_pos,
        prefill_len, n, BLOCK_SIZE=BLOCK_SIZE,
    )  # fmt: skip


def launch_flatten_sampled(
    kernel: Kernel, *, flat_sampled: torch.Tensor, sampled: torch.Tensor, num_sampled: torch.Tensor,
    cu_num_logits: torch.Tensor, num_reqs: int | None = None,
) -> None:  # fmt: skip
    """As ``RejectionSampler._get_logprobs_tensors``: grid ``(cu_num_logits.shape[0] - 1,)``,
    ``num_warps = 1``."""
    kernel[(_grid(num_reqs, cu_num_logits.shape[0] - 1),)](
        flat_sampled, sampled, sampled.stride(0), num_sampled, cu_num_logits, num_warps=1,
    )  # fmt: skip


def launch_target_dependent_ar_prepare_prefill_inputs(
    kernel: Kernel, *, last_token_indices: torch.Tensor, draft_current_step: torch.Tensor,
    draft_input_ids: torch.Tensor, draft_positions: torch.Tensor, draft_query_start_loc: torch.Tensor,
    draft_seq_lens: torch.Tensor, target_input_ids: torch.Tensor, target_positions: torch.Tensor,
    idx_mapping: torch.Tensor, last_sampled: torch.Tensor, next_prefill_tokens: torch.Tensor,
    num_sampled: torch.Tensor, num_rejected: torch.Tensor, query_start_loc: torch.Tensor, seq_lens: torch.Tensor,
    max_num_reqs: int, num_reqs: int | None = None, BLOCK_SIZE: int = 1024,
) -> None:  # fmt: skip
    """As ``prepare_prefill_inputs`` (``target_dependent_ar/speculator.py``): grid
    ``(input_batch.num_reqs,)``."""
    kernel[(_grid(num_reqs, idx_mapping.shape[0]),)](
        last_token_indices, draft_current_step, draft_input_ids, draft_positions, draft_query_start_loc,
        draft_seq_lens, target_input_ids, target_positions, idx_mapping, last_sampled, next_prefill_tokens,
        num_sampled, num_rejected, query_start_loc, seq_lens, max_num_reqs, BLOCK_SIZE=BLOCK_SIZE,
    )  # fmt: skip


def launch_prepare_decode_inputs(
    kernel: Kernel, *, draft_tokens: torch.Tensor, target_seq_lens: torch.Tensor, num_rejected: torch.Tensor,
    input_ids: torch.Tensor, positions: torch.Tensor, sample_src_positions: torch.Tensor,
    query_start_loc: torch.Tensor, seq_lens: torch.Tensor, max_model_len: int, max_num_reqs: int,
    num_reqs: int, ADVANCE_DRAFT_POSITIONS: bool = True, BLOCK_SIZE: int = 1024,
) -> None:  # fmt: skip
    """As ``prepare_decode_inputs``: ``draft_tokens`` is the speculator's 2-D table, passed as
    vLLM passes ``self.draft_tokens[:num_reqs, 0]`` (its column 0, with the table's row stride);
    grid ``(num_reqs + 1,)``."""
    first = draft_tokens[:num_reqs, 0]
    kernel[(num_reqs + 1,)](
        first, draft_tokens.stride(0), target_seq_lens, num_rejected, input_ids, positions, sample_src_positions,
        query_start_loc, seq_lens, max_model_len, max_num_reqs,
        BLOCK_SIZE=BLOCK_SIZE, ADVANCE_DRAFT_POSITIONS=ADVANCE_DRAFT_POSITIONS,
    )  # fmt: skip


def launch_update_draft_inputs(
    kernel: Kernel, *, output_draft_tokens: torch.Tensor, next_input_hidden_states: torch.Tensor,
    input_ids: torch.Tensor, positions: torch.Tensor, sample_src_positions: torch.Tensor, seq_lens: torch.Tensor,
    draft_tokens: torch.Tensor, current_draft_step: torch.Tensor, hidden_states: torch.Tensor,
    max_model_len: int, num_speculative_steps: int, num_reqs: int, hidden_size: int | None = None,
    ADVANCE_DRAFT_POSITIONS: bool = True, BLOCK_SIZE: int = 1024,
) -> None:  # fmt: skip
    """As ``update_draft_inputs``: grid ``(num_reqs,)``, ``hidden_size = hidden_states.shape[1]``,
    strides the tensors' ``stride(0)``."""
    kernel[(num_reqs,)](
        output_draft_tokens, output_draft_tokens.stride(0), next_input_hidden_states,
        next_input_hidden_states.stride(0), input_ids, positions, sample_src_positions, seq_lens, draft_tokens,
        current_draft_step, hidden_states, hidden_states.stride(0),
        hidden_states.shape[1] if hidden_size is None else hidden_size, max_model_len, num_speculative_steps,
        BLOCK_SIZE=BLOCK_SIZE, ADVANCE_DRAFT_POSITIONS=ADVANCE_DRAFT_POSITIONS,
    )  # fmt: skip


# -- Model Runner V2's verification (docs/CONTRACT.md §28-§35) -----------------------------------
#
# apply_temperature and gumbel_sample (vllm/v1/worker/gpu/sample/gumbel.py) and rejection_sample
# (spec_decode/rejection_sampler_utils.py), with the keyword names of the oracles of
# oracles/vectorized_v2_verify.py; launch_rejection_sample chains §30-§35 as rejection_sample does
# (``kernels`` maps their vLLM names to the kernels) and allocates the intermediate buffers as it
# does, filled with a sentinel instead of left uninitialised.

VOCAB_BLOCK_SIZE = 8192
"""``rejection_sample``'s block of the statistics and residual-mass kernels (§30, §32)."""
RESAMPLE_BLOCK_SIZE = 1024
"""``rejection_sample``'s block of the resampling kernel (§34) and ``gumbel_sample``'s (§29)."""
TEMPERATURE_BLOCK_SIZE = 8192
"""``apply_temperature``'s block (§28)."""


def _stride0(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.stride(0)


def launch_temperature(kernel: Kernel, *, logits: torch.Tensor, expanded_idx_mapping: torch.Tensor,
                       temperature: torch.Tensor, num_tokens: int | None = None, vocab_size: int | None = None,
                       BLOCK_SIZE: int = TEMPERATURE_BLOCK_SIZE) -> None:  # fmt: skip
    """As ``apply_temperature``: grid ``(num_tokens, cdiv(vocab_size, 8192))``."""
    T = logits.shape[0] if num_tokens is None else num_tokens
    V = logits.shape[1] if vocab_size is None else vocab_size
    kernel[(T, triton.cdiv(V, BLOCK_SIZE))](
        logits, logits.stride(0), expanded_idx_mapping, temperature, V, BLOCK_SIZE=BLOCK_SIZE,
    )  # fmt: skip


def launch_gumbel_sample(kernel: Kernel, *, local_argmax: torch.Tensor, local_max: torch.Tensor,
                         logits: torch.Tensor, expanded_idx_mapping: torch.Tensor, seeds: torch.Tensor,
                         pos: torch.Tensor, temperature: torch.Tensor, apply_temperature: bool, is_drafting: bool,
                         use_fp64: bool = False, logits_cache: torch.Tensor | None = None,
                         logits_cache_col: torch.Tensor | None = None,
                         logits_cache_source: torch.Tensor | None = None, num_tokens: int | None = None,
                         vocab_size: int | None = None, BLOCK_SIZE: int = RESAMPLE_BLOCK_SIZE) -> None:  # fmt: skip
    """As ``gumbel_sample``: grid ``(num_tokens, cdiv(vocab_size, 1024))``, the cache source the
    logits themselves unless given, ``PER_TOKEN_COL`` when the column is a tensor of rank 1.
    ``local_argmax`` (int64) and ``local_max`` (float32, float64 with ``use_fp64``) are the
    per-block results ``gumbel_sample`` reduces with ``argmax`` and ``gather``."""
    T = logits.shape[0] if num_tokens is None else num_tokens
    V = logits.shape[1] if vocab_size is None else vocab_size
    if logits_cache is not None and logits_cache_source is None:
        logits_cache_source = logits
    per_token_col = logits_cache_col is not None and logits_cache_col.dim() > 0
    kernel[(T, triton.cdiv(V, BLOCK_SIZE))](
        local_argmax, local_argmax.stride(0), local_max, local_max.stride(0),
        logits_cache, logits_cache.stride(0) if logits_cache is not None else 0,
        logits_cache.stride(1) if logits_cache is not None else 0, logits_cache_col, logits_cache_source,
        _stride0(logits_cache_source), logits, logits.stride(0), expanded_idx_mapping, seeds, pos, temperature, V,
        BLOCK_SIZE=BLOCK_SIZE, IS_DRAFTING=is_drafting, APPLY_TEMPERATURE=apply_temperature, USE_FP64=use_fp64,
        PER_TOKEN_COL=per_token_col,
    )  # fmt: skip


def _draft_strides(draft_logits: torch.Tensor | None) -> tuple[int, int]:
    return (0, 0) if draft_logits is None else (draft_logits.stride(0), draft_logits.stride(1))


def launch_compute_local_logits_stats(
    kernel: Kernel, *, target_local_argmax: torch.Tensor, target_local_max: torch.Tensor,
    target_local_sumexp: torch.Tensor, draft_local_max: torch.Tensor, draft_local_sumexp: torch.Tensor,
    target_logits: torch.Tensor, draft_logits: torch.Tensor | None, expanded_idx_mapping: torch.Tensor,
    expanded_local_pos: torch.Tensor, temperature: torch.Tensor, num_logits: int | None = None,
    vocab_size: int | None = None, BLOCK_SIZE: int = VOCAB_BLOCK_SIZE,
) -> None:  # fmt: skip
    """As ``rejection_sample``: grid ``(num_logits, cdiv(vocab_size, 8192))``."""
    n = target_logits.shape[0] if num_logits is None else num_logits
    V = target_logits.shape[1] if vocab_size is None else vocab_size
    d0, d1 = _draft_strides(draft_logits)
    kernel[(n, triton.cdiv(V, BLOCK_SIZE))](
        target_local_argmax, target_local_argmax.stride(0), target_local_max, target_local_max.stride(0),
        target_local_sumexp, target_local_sumexp.stride(0), draft_local_max, draft_local_max.stride(0),
        draft_local_sumexp, draft_local_sumexp.stride(0), target_logits, target_logits.stride(0), draft_logits, d0, d1,
        expanded_idx_mapping, expanded_local_pos, temperature, V, n,
        BLOCK_SIZE=BLOCK_SIZE, HAS_DRAFT_LOGITS=draft_logits is not None,
    )  # fmt: skip


def launch_compute_cumulative_log_p(
    kernel: Kernel, *, cumulative_log_p: torch.Tensor, target_logits: torch.Tensor, target_local_max: torch.Tensor,
    target_local_sumexp: torch.Tensor, draft_sampled: torch.Tensor, draft_logits: torch.Tensor | None,
    draft_local_max: torch.Tensor, draft_local_sumexp: torch.Tensor, cu_num_logits: torch.Tensor,
    idx_mapping: torch.Tensor, temperature: torch.Tensor, vocab_num_blocks: int, num_reqs: int | None = None,
    PADDED_VOCAB_NUM_BLOCKS: int | None = None,
) -> None:  # fmt: skip
    """As ``rejection_sample``: grid ``(num_reqs,)``, ``num_warps=1``."""
    B = cu_num_logits.shape[0] - 1 if num_reqs is None else num_reqs
    d0, d1 = _draft_strides(draft_logits)
    padded = triton.next_power_of_2(vocab_num_blocks) if PADDED_VOCAB_NUM_BLOCKS is None else PADDED_VOCAB_NUM_BLOCKS
    kernel[(B,)](
        cumulative_log_p, target_logits, target_logits.stride(0), target_local_max, target_local_max.stride(0),
        target_local_sumexp, target_local_sumexp.stride(0), draft_sampled, draft_logits, d0, d1, draft_local_max,
        draft_local_max.stride(0), draft_local_sumexp, draft_local_sumexp.stride(0), cu_num_logits, idx_mapping,
        temperature, vocab_num_blocks,
        PADDED_VOCAB_NUM_BLOCKS=padded, HAS_DRAFT_LOGITS=draft_logits is not None, num_warps=1,
    )  # fmt: skip


def launch_compute_local_residual_mass(
    kernel: Kernel, *, local_residual_mass: torch.Tensor, cumulative_log_p: torch.Tensor,
    target_logits: torch.Tensor, target_local_max: torch.Tensor, target_local_sumexp: torch.Tensor,
    draft_logits: torch.Tensor, draft_local_max: torch.Tensor, draft_local_sumexp: torch.Tensor,
    draft_sampled: torch.Tensor, expanded_idx_mapping: torch.Tensor, expanded_local_pos: torch.Tensor,
    temperature: torch.Tensor, vocab_num_blocks: int | None = None, num_logits: int | None = None,
    vocab_size: int | None = None, BLOCK_SIZE: int = VOCAB_BLOCK_SIZE, PADDED_VOCAB_NUM_BLOCKS: int | None = None,
) -> None:  # fmt: skip
    """As ``rejection_sample`` (block verification with draft logits): grid
    ``(num_logits, vocab_num_blocks)``."""
    n = target_logits.shape[0] if num_logits is None else num_logits
    V = target_logits.shape[1] if vocab_size is None else vocab_size
    nb = triton.cdiv(V, BLOCK_SIZE) if vocab_num_blocks is None else vocab_num_blocks
    padded = triton.next_power_of_2(nb) if PADDED_VOCAB_NUM_BLOCKS is None else PADDED_VOCAB_NUM_BLOCKS
    d0, d1 = _draft_strides(draft_logits)
    kernel[(n, nb)](
        local_residual_mass, local_residual_mass.stride(0), cumulative_log_p, target_logits, target_logits.stride(0),
        target_local_max, target_local_max.stride(0), target_local_sumexp, target_local_sumexp.stride(0),
        draft_logits, d0, d1, draft_local_max, draft_local_max.stride(0), draft_local_sumexp,
        draft_local_sumexp.stride(0), draft_sampled, expanded_idx_mapping, expanded_local_pos, temperature, V, n, nb,
        BLOCK_SIZE=BLOCK_SIZE, PADDED_VOCAB_NUM_BLOCKS=padded,
    )  # fmt: skip


def launch_rejection(
    kernel: Kernel, *, sampled: torch.Tensor, num_sampled: torch.Tensor, target_rejected_logsumexp: torch.Tensor,
    draft_rejected_logsumexp: torch.Tensor, target_logits: torch.Tensor, target_local_argmax: torch.Tensor,
    target_local_max: torch.Tensor, target_local_sumexp: torch.Tensor, draft_sampled: torch.Tensor,
    draft_logits: torch.Tensor | None, draft_local_max: torch.Tensor, draft_local_sumexp: torch.Tensor,
    cu_num_logits: torch.Tensor, idx_mapping: torch.Tensor, temperature: torch.Tensor, seed: torch.Tensor,
    pos: torch.Tensor, vocab_num_blocks: int, synthetic_conditional_rates: torch.Tensor | None = None,
    cumulative_log_p: torch.Tensor | None = None, local_residual_mass: torch.Tensor | None = None,
    fly_entropy: torch.Tensor | None = None, fly_entropy_threshold: float = 0.3, use_block_verification: bool = False,
    fly_window_size: int = 0, num_reqs: int | None = None, PADDED_VOCAB_NUM_BLOCKS: int | None = None,
) -> None:  # fmt: skip
    """As ``rejection_sample``: grid ``(num_reqs,)``, ``num_warps=1``; the constexprs follow
    from which optional inputs are given."""
    B = cu_num_logits.shape[0] - 1 if num_reqs is None else num_reqs
    d0, d1 = _draft_strides(draft_logits)
    padded = triton.next_power_of_2(vocab_num_blocks) if PADDED_VOCAB_NUM_BLOCKS is None else PADDED_VOCAB_NUM_BLOCKS
    kernel[(B,)](
        sampled, sampled.stride(0), num_sampled, target_rejected_logsumexp, draft_rejected_logsumexp, target_logits,
        target_logits.stride(0), target_local_argmax, target_local_argmax.stride(0), target_local_max,
        target_local_max.stride(0), target_local_sumexp, target_local_sumexp.stride(0), draft_sampled, draft_logits,
        d0, d1, draft_local_max, draft_local_max.stride(0), draft_local_sumexp, draft_local_sumexp.stride(0),
        cu_num_logits, idx_mapping, temperature, seed, pos, synthetic_conditional_rates, cumulative_log_p,
        local_residual_mass, _stride0(local_residual_mass), fly_entropy, fly_entropy_threshold, vocab_num_blocks,
        PADDED_VOCAB_NUM_BLOCKS=padded, HAS_DRAFT_LOGITS=draft_logits is not None,
        SYNTHETIC_MODE=synthetic_conditional_rates is not None, USE_BLOCK_VERIFICATION=use_block_verification,
        FLY_WINDOW_SIZE=fly_window_size, num_warps=1,
    )  # fmt: skip


def launch_resample(
    kernel: Kernel, *, resampled_local_argmax: torch.Tensor, resampled_local_max: torch.Tensor,
    target_logits: torch.Tensor, target_rejected_logsumexp: torch.Tensor, draft_logits: torch.Tensor | None,
    draft_rejected_logsumexp: torch.Tensor, rejected_step: torch.Tensor, cu_num_logits: torch.Tensor,
    expanded_idx_mapping: torch.Tensor, draft_sampled: torch.Tensor, temperature: torch.Tensor, seed: torch.Tensor,
    pos: torch.Tensor, cumulative_log_p: torch.Tensor | None = None, use_fp64: bool = False,
    use_block_verification: bool = False, num_reqs: int | None = None, vocab_size: int | None = None,
    BLOCK_SIZE: int = RESAMPLE_BLOCK_SIZE,
) -> None:  # fmt: skip
    """As ``rejection_sample`` without watermarking: grid ``(num_reqs, cdiv(vocab_size, 1024))``,
    ``WATERMARK`` and ``DEDUPLICATE_CONTEXTS`` off, ``CONTEXT_WIDTH = 1``."""
    B = cu_num_logits.shape[0] - 1 if num_reqs is None else num_reqs
    V = target_logits.shape[1] if vocab_size is None else vocab_size
    d0, d1 = _draft_strides(draft_logits)
    kernel[(B, triton.cdiv(V, BLOCK_SIZE))](
        resampled_local_argmax, resampled_local_argmax.stride(0), resampled_local_max, resampled_local_max.stride(0),
        target_logits, target_logits.stride(0), target_rejected_logsumexp, draft_logits, d0, d1,
        draft_rejected_logsumexp, rejected_step, cu_num_logits, expanded_idx_mapping, draft_sampled, temperature, seed,
        pos, cumulative_log_p, None, 0, None, None, 0, 0, V,
        BLOCK_SIZE=BLOCK_SIZE, HAS_DRAFT_LOGITS=draft_logits is not None, USE_FP64=use_fp64,
        USE_BLOCK_VERIFICATION=use_block_verification, CONTEXT_WIDTH=1, WATERMARK=False, DEDUPLICATE_CONTEXTS=False,
    )  # fmt: skip


def launch_insert_resampled(
    kernel: Kernel, *, sampled: torch.Tensor, num_sampled: torch.Tensor, resampled_local_argmax: torch.Tensor,
    resampled_local_max: torch.Tensor, cu_num_logits: torch.Tensor, expanded_idx_mapping: torch.Tensor,
    temperature: torch.Tensor, resample_num_blocks: int, num_reqs: int | None = None,
    PADDED_RESAMPLE_NUM_BLOCKS: int | None = None,
) -> None:  # fmt: skip
    """As ``rejection_sample``: grid ``(num_reqs,)``."""
    B = cu_num_logits.shape[0] - 1 if num_reqs is None else num_reqs
    padded = (triton.next_power_of_2(resample_num_blocks) if PADDED_RESAMPLE_NUM_BLOCKS is None
              else PADDED_RESAMPLE_NUM_BLOCKS)  # fmt: skip
    kernel[(B,)](
        sampled, sampled.stride(0), num_sampled, resampled_local_argmax, resampled_local_argmax.stride(0),
        resampled_local_max, resampled_local_max.stride(0), resample_num_blocks, cu_num_logits, expanded_idx_mapping,
        temperature, PADDED_RESAMPLE_NUM_BLOCKS=padded,
    )  # fmt: skip


SENTINEL_INT = -4242
SENTINEL_FLOAT = -4242.5


def launch_rejection_sample(
    kernels: Mapping[str, Kernel], *, target_logits: torch.Tensor, draft_logits: torch.Tensor | None,
    draft_sampled: torch.Tensor, cu_num_logits: torch.Tensor, pos: torch.Tensor, idx_mapping: torch.Tensor,
    expanded_idx_mapping: torch.Tensor, expanded_local_pos: torch.Tensor, temperature: torch.Tensor,
    seed: torch.Tensor, num_speculative_steps: int, synthetic_conditional_rates: torch.Tensor | None = None,
    use_fp64: bool = False, use_block_verification: bool = False, fly_entropy: torch.Tensor | None = None,
    fly_window_size: int = 0, fly_entropy_threshold: float = 0.3,
) -> dict[str, torch.Tensor]:  # fmt: skip
    """``rejection_sample`` (without watermarking): §30-§35 chained as it chains them, the
    vocabulary cut to the draft's width when it is narrower. ``fly_entropy`` is given (vLLM
    computes it with ``compute_fly_entropy`` from the target logits). Returns every buffer: the
    result (``sampled``, ``num_sampled``) and the intermediates, each allocated as vLLM does and
    filled with :data:`SENTINEL_INT` or :data:`SENTINEL_FLOAT`."""
    B = cu_num_logits.shape[0] - 1
    n, V = target_logits.shape
    if draft_logits is not None:
        V = min(V, draft_logits.shape[-1])
    nb = triton.cdiv(V, VOCAB_BLOCK_SIZE)

    def f32(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.full(shape, SENTINEL_FLOAT, dtype=dtype)

    def i64(*shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
        return torch.full(shape, SENTINEL_INT, dtype=dtype)

    b: dict[str, torch.Tensor] = dict(
        target_local_argmax=i64(n, nb), target_local_max=f32(n, nb), target_local_sumexp=f32(n, nb),
        draft_local_max=f32(n, nb), draft_local_sumexp=f32(n, nb),
    )  # fmt: skip
    launch_compute_local_logits_stats(
        kernels["_compute_local_logits_stats_kernel"], **b, target_logits=target_logits, draft_logits=draft_logits,
        expanded_idx_mapping=expanded_idx_mapping, expanded_local_pos=expanded_local_pos, temperature=temperature,
        vocab_size=V,
    )  # fmt: skip
    stats = {k: b[k] for k in ("target_local_max", "target_local_sumexp", "draft_local_max", "draft_local_sumexp")}
    clp = rm = None
    if use_block_verification:
        clp = b["cumulative_log_p"] = f32(n)
        launch_compute_cumulative_log_p(
            kernels["_compute_cumulative_log_p_kernel"], cumulative_log_p=clp, target_logits=target_logits,
            draft_sampled=draft_sampled, draft_logits=draft_logits, cu_num_logits=cu_num_logits,
            idx_mapping=idx_mapping, temperature=temperature, vocab_num_blocks=nb, **stats,
        )  # fmt: skip
        if draft_logits is not None:
            rm = b["local_residual_mass"] = f32(n, nb)
            launch_compute_local_residual_mass(
                kernels["_compute_local_residual_mass_kernel"], local_residual_mass=rm, cumulative_log_p=clp,
                target_logits=target_logits, draft_logits=draft_logits, draft_sampled=draft_sampled,
                expanded_idx_mapping=expanded_idx_mapping, expanded_local_pos=expanded_local_pos,
                temperature=temperature, vocab_num_blocks=nb, vocab_size=V, **stats,
            )  # fmt: skip
    b.update(sampled=i64(B, num_speculative_steps + 1), num_sampled=i64(B, dtype=torch.int32),
             target_rejected_logsumexp=f32(B), draft_rejected_logsumexp=f32(B))  # fmt: skip
    launch_rejection(
        kernels["_rejection_kernel"], sampled=b["sampled"], num_sampled=b["num_sampled"],
        target_rejected_logsumexp=b["target_rejected_logsumexp"], draft_rejected_logsumexp=b["draft_rejected_logsumexp"],
        target_logits=target_logits, target_local_argmax=b["target_local_argmax"], draft_sampled=draft_sampled,
        draft_logits=draft_logits, cu_num_logits=cu_num_logits, idx_mapping=idx_mapping, temperature=temperature,
        seed=seed, pos=pos, vocab_num_blocks=nb, synthetic_conditional_rates=synthetic_conditional_rates,
        cumulative_log_p=clp, local_residual_mass=rm, fly_entropy=fly_entropy,
        fly_entropy_threshold=fly_entropy_threshold, use_block_verification=use_block_verification,
        fly_window_size=fly_window_size, **stats,
    )  # fmt: skip
    rnb = triton.cdiv(V, RESAMPLE_BLOCK_SIZE)
    b.update(resampled_local_argmax=i64(B, rnb),
             resampled_local_max=f32(B, rnb, dtype=torch.float64 if use_fp64 else torch.float32))  # fmt: skip
    launch_resample(
        kernels["_resample_kernel"], resampled_local_argmax=b["resampled_local_argmax"],
        resampled_local_max=b["resampled_local_max"], target_logits=target_logits,
        target_rejected_logsumexp=b["target_rejected_logsumexp"], draft_logits=draft_logits,
        draft_rejected_logsumexp=b["draft_rejected_logsumexp"], rejected_step=b["num_sampled"],
        cu_num_logits=cu_num_logits, expanded_idx_mapping=expanded_idx_mapping, draft_sampled=draft_sampled,
        temperature=temperature, seed=seed, pos=pos, cumulative_log_p=clp, use_fp64=use_fp64,
        use_block_verification=use_block_verification, vocab_size=V,
    )  # fmt: skip
    b["num_sampled_before_insert"] = b["num_sampled"].clone()
    launch_insert_resampled(
        kernels["_insert_resampled_kernel"], sampled=b["sampled"], num_sampled=b["num_sampled"],
        resampled_local_argmax=b["resampled_local_argmax"], resampled_local_max=b["resampled_local_max"],
        cu_num_logits=cu_num_logits, expanded_idx_mapping=expanded_idx_mapping, temperature=temperature,
        resample_num_blocks=rnb,
    )  # fmt: skip
    return b
