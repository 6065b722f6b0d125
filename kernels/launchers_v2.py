"""Launch Model Runner V2's kernels (docs/CONTRACT.md §14-§27) the way vLLM's wrappers do.

vLLM's own code is not here: each launcher takes the kernel as its first argument (vLLM's,
taken from a release wheel, an installed vLLM or a user's file at run time) and passes it what
the wrapper of ``vllm/v1/worker/gpu/`` passes (grids, strides, ``constexpr`` values), with the
same keyword names as the oracles of ``oracles/vectorized_v2.py``. Launch parameters default to
vLLM's choice; passing them explicitly overrides it. 2-D tables are passed whole: the launcher
hands the kernel their ``stride(0)``. Tensors given for outputs are written in place (the
launchers allocate nothing the kernel writes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import triton

Kernel = Any  # anything indexable as kernel[grid](*args, **constexprs)

PAD_SLOT_ID = -1
"""vLLM's ``PAD_SLOT_ID`` (``vllm/v1/attention/backends/utils.py``)."""


def _grid(n: int | None, default: int) -> int:
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


def pointer_table(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """A uint64 tensor of the tensors' data pointers, on their device (as ``BlockTables``
    builds ``block_table_ptrs``)."""
    device = tensors[0].device if tensors else "cpu"
    return torch.tensor([t.data_ptr() for t in tensors], dtype=torch.uint64, device=device)


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
    strides = torch.tensor([t.stride(0) for t in src_block_tables], dtype=torch.int64, device=device)
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
    strides = torch.tensor([t.stride(0) for t in block_tables], dtype=torch.int64, device=idx_mapping.device)
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
