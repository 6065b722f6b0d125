"""Model Runner V2's kernels (docs/CONTRACT.md §14-§27) on small examples worked out by hand.

Each example lists its inputs, the buffers the kernel writes (filled with a sentinel, or with the
state the kernel updates) and, worked out from the contract by hand, what every one of those
buffers holds afterwards; every other array must come out unchanged. Checked against:

* both oracles (``oracles/vectorized_v2.py``, ``oracles/loops_v2.py``): they are written from
  the contract, so a wrong expectation here or a wrong oracle turns the suite red;
* vLLM 0.33.0's own kernels, loaded from its release wheel (``harness/sources/vllm.py``: vLLM is
  not imported) and launched under the Triton interpreter as vLLM's wrappers launch them
  (``kernels/launchers.py``);
* the same files given as a user's file (``--kernels``): their imports do not resolve here, so
  their kernels are taken out into a generated module (``harness/sources/file.py``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from eaglefuzz.oracles import loops_v2, vectorized_v2

S32 = -7777  # sentinel of int32 buffers
S64 = -5555  # sentinel of int64 buffers

INPUT_BATCH = "vllm/v1/worker/gpu/input_batch.py"
BLOCK_TABLE = "vllm/v1/worker/gpu/block_table.py"
REJECTION = "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py"
SPECULATOR = "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py"


def i32(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int32)


def i64(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


@dataclass(frozen=True)
class Example:
    """One hand-worked case: ``args`` are the keyword arguments of the oracle and the launcher
    (arrays, lists of arrays, scalars, None); ``expected`` what the written buffers hold after
    the call (every other array unchanged)."""

    id: str
    module: str
    function: str
    oracle: str
    args: dict[str, Any]
    expected: dict[str, Any]
    launcher: str = ""
    section: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    """Launcher-only keyword arguments."""


def _examples() -> list[Example]:
    ex = []

    # §14: rows 0 and 2 prefill (c < L), row 1 does not; lookahead 2 (the second past the prompt).
    atok = np.ascontiguousarray(np.array([[10 + j for j in range(8)], [20 + j for j in range(8)],
                                          [30 + j for j in range(8)], [40 + j for j in range(8)]], dtype=np.int32))
    npt_exp = np.full((2, 4), S32, dtype=np.int32)
    npt_exp[:, 0] = [15, 0]
    npt_exp[:, 3] = [44, 0]
    ex.append(Example(
        "s14_prefill_rows_and_lookahead", INPUT_BATCH, "_prepare_prefill_inputs_kernel", "input_batch_prepare_prefill_inputs",
        dict(input_ids=np.full(10, S32, np.int32), next_prefill_tokens=np.full((2, 4), S32, np.int32),
             idx_mapping=i64(0, 1, 3), query_start_loc=i32(0, 3, 5, 9), all_token_ids=atok,
             prefill_len=i32(6, 3, 8, 5), num_computed_tokens=i32(2, 3, 4, 0), num_reqs=3, num_lookahead=2,
             LOOKAHEAD_BLOCK=2),
        dict(input_ids=i32(12, 13, 14, S32, S32, 40, 41, 42, 43, S32), next_prefill_tokens=npt_exp),
        "launch_input_batch_prepare_prefill_inputs", 14,
    ))  # fmt: skip

    # §15: positions c + i, sequence lengths c + qlen, padding up to max_num_reqs = 4 (of 5).
    ex.append(Example(
        "s15_positions_and_padding", INPUT_BATCH, "_prepare_pos_seq_lens_kernel", "prepare_pos_seq_lens",
        dict(pos=np.full(6, S64, np.int64), seq_lens=np.full(5, S32, np.int32), idx_mapping=i64(2, 0),
             query_start_loc=i32(0, 3, 4), num_computed_tokens=i32(5, 0, 7, 2), max_num_reqs=4, num_reqs=2),
        dict(pos=i64(7, 8, 9, 5, S64, S64), seq_lens=i32(10, 6, 0, 0, S32)),
        "launch_prepare_pos_seq_lens", 15,
    ))  # fmt: skip

    # §16: row 0 decodes (bonus truncated to int32, two drafts); row 1 is at its prefill's end
    # (nothing written); row 2 passes the prompt within this step (no bonus: its first logit is a
    # prompt token; its draft written).
    ex.append(Example(
        "s16_bonus_drafts_prefill_tail", INPUT_BATCH, "_combine_sampled_and_draft_tokens_kernel",
        "combine_sampled_and_draft_tokens",
        dict(input_ids=np.arange(1, 11, dtype=np.int32), logits_indices=np.full(7, S64, np.int64),
             idx_mapping=i64(2, 0, 1), last_sampled_tokens=i64(101, 102, 2**32 + 103).reshape(3, 1),
             query_start_loc=i32(0, 3, 4, 9), seq_lens=i32(10, 4, 11), prefill_len=i32(4, 10, 2),
             draft_tokens=i64(11, 12, 13, 21, 22, 23, 31, 32, 33).reshape(3, 3), cu_num_logits=i32(0, 3, 4, 6),
             num_reqs=3, BLOCK_SIZE=4, NUM_NEW_SAMPLED_TOKENS=1),
        dict(input_ids=i32(103, 31, 32, 4, 5, 6, 7, 8, 21, 10), logits_indices=i64(0, 1, 2, 3, 7, 8, S64)),
        "launch_combine_sampled_and_draft_tokens", 16,
    ))  # fmt: skip

    # §17: a row without logits writes nothing; BLOCK_SIZE 4 covers every row, 2 cuts row 2.
    for block, exp_idx, exp_pos in ((4, i64(5, 5, 7, 7, 7, S64), i32(0, 1, 0, 1, 2, S32)),
                                    (2, i64(5, 5, 7, 7, S64, S64), i32(0, 1, 0, 1, S32, S32))):
        ex.append(Example(
            f"s17_block_{block}", INPUT_BATCH, "_expand_idx_mapping_kernel", "expand_idx_mapping",
            dict(idx_mapping=i64(5, 2, 7), expanded_idx_mapping=np.full(6, S64, np.int64),
                 expanded_local_pos=np.full(6, S32, np.int32), cu_num_logits=i32(0, 2, 2, 5), num_reqs=3,
                 BLOCK_SIZE=block),
            dict(expanded_idx_mapping=exp_idx, expanded_local_pos=exp_pos),
            "launch_expand_idx_mapping", 17,
        ))  # fmt: skip

    # §18: row 1 is a chunked prefill (seq 8 < 10): both 0; rows 0 and 2 reject nl - sampled.
    ex.append(Example(
        "s18_chunked_and_rejected", INPUT_BATCH, "_get_num_sampled_and_rejected_kernel", "get_num_sampled_and_rejected",
        dict(num_sampled=i32(2, 1, 3), num_rejected=np.full(4, S32, np.int32), seq_lens=i32(7, 8, 6),
             cu_num_logits=i32(0, 4, 5, 8), idx_mapping=i64(1, 0, 2), prefill_len=i32(10, 3, 6), num_reqs=3),
        dict(num_sampled=i32(2, 0, 3), num_rejected=i32(2, 0, 0, S32)),
        "launch_get_num_sampled_and_rejected", 18,
    ))  # fmt: skip

    # §19: row 0 samples token 11 twice (its bin counted twice), row 1 is masked (-1), row 2
    # samples one token; each row's computed count grows by qlen - rejected.
    atok_exp = np.full((3, 8), -9, np.int32)
    atok_exp[0, 2] = 14
    atok_exp[2, 4:6] = 11
    bins = np.zeros((3, 16), np.int32)
    bins[2, 11] = 5
    bins_exp = bins.copy()
    bins_exp[2, 11] = 7
    bins_exp[0, 14] = 1
    ex.append(Example(
        "s19_sampled_rows_masked_row", INPUT_BATCH, "_post_update_kernel", "post_update",
        dict(idx_mapping=i64(2, -1, 0), num_computed_tokens=i32(5, 6, 7), last_sampled_tokens=i64(-1, -2, -3).reshape(3, 1),
             output_bin_counts=bins, sampled_tokens=i64(11, 11, 13, 99, 99, 99, 14, 0, 0).reshape(3, 3),
             num_sampled=i32(2, 3, 1), num_rejected=i32(1, 0, 1), query_start_loc=i32(0, 3, 4, 6),
             all_token_ids=np.full((3, 8), -9, np.int32), total_len=i32(2, 3, 4), draft_tokens=None,
             draft_tokens_out=None, num_draft_tokens=0, num_reqs=3),
        dict(num_computed_tokens=i32(6, 6, 9), last_sampled_tokens=i64(14, -2, 11).reshape(3, 1),
             output_bin_counts=bins_exp, all_token_ids=atok_exp, total_len=i32(3, 3, 6)),
        "launch_post_update", 19,
    ))  # fmt: skip
    # §19, a non-last pipeline rank: drafts copied to the state rows, nothing sampled, no
    # query_start_loc (qlen 0): a row with rejected tokens moves its count back.
    ex.append(Example(
        "s19_drafts_without_query", INPUT_BATCH, "_post_update_kernel", "post_update",
        dict(idx_mapping=i64(1, 0), num_computed_tokens=i32(5, 6, 7), last_sampled_tokens=i64(-1, -2, -3).reshape(3, 1),
             output_bin_counts=None, sampled_tokens=i64(1, 2, 3, 4).reshape(2, 2), num_sampled=i32(0, 0),
             num_rejected=i32(0, 2), query_start_loc=None, all_token_ids=np.full((3, 8), -9, np.int32),
             total_len=i32(2, 3, 4), draft_tokens=i64(7, 8, 9, 10).reshape(2, 2),
             draft_tokens_out=np.full((3, 2), -4, np.int64), num_draft_tokens=2, num_reqs=2),
        dict(num_computed_tokens=i32(3, 6, 7), draft_tokens_out=i64(9, 10, 7, 8, -4, -4).reshape(3, 2)),
        "launch_post_update", 19,
    ))  # fmt: skip

    # §20: counts grow by the query length, int32 wrapping; an empty row stores the same value.
    ex.append(Example(
        "s20_counts_wrap", INPUT_BATCH, "_post_update_num_computed_tokens_kernel", "post_update_num_computed_tokens",
        dict(idx_mapping=i64(3, 1), num_computed_tokens=i32(1, 2, 3, 2**31 - 3), query_start_loc=i32(0, 5, 5),
             num_reqs=2),
        dict(num_computed_tokens=i32(1, 2, 3, -(2**31) + 2)),
        "launch_post_update_num_computed_tokens", 20,
    ))  # fmt: skip

    # §21: two groups; group 1 has a sliding window (reach 6, block size 4): state row 0's first
    # position 13 nulls its entry 0 (7 // 4 = 1); row 2 (the padding row) is zeroed.
    src0 = i32(100, 101, 102, 103, 110, 111, 112, 113, 120, 121, 122, 123).reshape(3, 4)
    src1 = i32(200, 201, 202, 210, 211, 212, 220, 221, 222).reshape(3, 3)
    ex.append(Example(
        "s21_groups_window_padding", BLOCK_TABLE, "_gather_block_tables_kernel", "gather_block_tables",
        dict(idx_mapping=i64(2, 0), src_block_tables=[src0, src1],
             dst_block_tables=[np.full((3, 4), -7, np.int32), np.full((3, 3), -7, np.int32)],
             num_blocks=i32(2, 4, 1, 3, 2, 3).reshape(2, 3), num_reqs=2, num_rows=3,
             num_computed_tokens=i32(13, 0, 9), sliding_window_reach=i32(0, 6), block_sizes=i32(16, 4),
             MASK_SLIDING_WINDOW=True),
        dict(dst_block_tables=[i32(120, -7, -7, -7, 100, 101, -7, -7, 0, 0, 0, 0).reshape(3, 4),
                               i32(220, 221, 222, 0, 201, 202, 0, 0, 0).reshape(3, 3)]),
        "launch_gather_block_tables", 21,
    ))  # fmt: skip

    # §22: a mapped group and a disabled one; a padding row (-1); the tail of each row padded
    # from query_start_loc[B] to max_num_tokens (8 of 9: the last column untouched).
    sm = np.full((2, 9), S64, np.int64)
    exp = sm.copy()
    exp[0, :8] = [32, 36, 41, -1, 27, 28, -1, -1]
    exp[1, :8] = -1
    ex.append(Example(
        "s22_groups_padding_rows", BLOCK_TABLE, "_compute_slot_mappings_kernel", "compute_slot_mappings",
        dict(idx_mapping=i64(1, -1, 0), query_start_loc=i32(0, 3, 4, 6), positions=i64(0, 4, 9, 3, 7, 8),
             block_tables=[i32(5, 6, 7, 8, 9, 10, 11, 12, 13).reshape(3, 3), i32(1, 2, 3, 4, 5, 6).reshape(3, 2)],
             block_sizes=i32(4, 8), slot_mapping_enabled=np.array([True, False]), dcp_sharded=np.array([True, True]),
             slot_mappings=sm, cp_rank=0, num_reqs=3, max_num_tokens=8, CP_SIZE=1, CP_INTERLEAVE=1, PAD_ID=-1),
        dict(slot_mappings=exp),
        "launch_compute_slot_mappings", 22,
    ))  # fmt: skip
    # §22, decode context parallelism (2 ranks, this one rank 1), interleave 1: a sharded group
    # keeps the positions this rank holds (1 and 13), at their local positions (0 and 6).
    ex.append(Example(
        "s22_dcp_interleave_1", BLOCK_TABLE, "_compute_slot_mappings_kernel", "compute_slot_mappings",
        dict(idx_mapping=i64(0), query_start_loc=i32(0, 4), positions=i64(0, 1, 2, 13),
             block_tables=[i32(5, 6, 7, 8, 9, 10).reshape(2, 3)], block_sizes=i32(4),
             slot_mapping_enabled=np.array([True]), dcp_sharded=np.array([True]), slot_mappings=np.full((1, 4), S64),
             cp_rank=1, num_reqs=1, max_num_tokens=4, CP_SIZE=2, CP_INTERLEAVE=1, PAD_ID=-1),
        dict(slot_mappings=i64(-1, 20, -1, 26).reshape(1, 4)),
        "launch_compute_slot_mappings", 22,
    ))  # fmt: skip
    # §22, interleave 2: rank 1 holds tokens 2-3 and 6-7 of every 8; a group that is not
    # sharded maps every position as it is.
    ex.append(Example(
        "s22_dcp_interleave_2", BLOCK_TABLE, "_compute_slot_mappings_kernel", "compute_slot_mappings",
        dict(idx_mapping=i64(0), query_start_loc=i32(0, 4), positions=i64(2, 3, 6, 15),
             block_tables=[i32(5, 6, 7, 8, 9, 10).reshape(2, 3), i32(1, 2, 3, 4, 5, 6, 7, 8).reshape(2, 4)],
             block_sizes=i32(4, 4), slot_mapping_enabled=np.array([True, True]), dcp_sharded=np.array([True, False]),
             slot_mappings=np.full((2, 5), S64), cp_rank=1, num_reqs=1, max_num_tokens=5, CP_SIZE=2,
             CP_INTERLEAVE=2, PAD_ID=-1),
        dict(slot_mappings=i64(20, 21, 22, 27, -1, 6, 7, 10, 19, -1).reshape(2, 5)),
        "launch_compute_slot_mappings", 22,
    ))  # fmt: skip

    # §23: request 0's step starts inside its prefill (positions 10.. < 12): its drafts are
    # placeholders; request 1's draft at position 4 (4 - 1 = 3, not < 3) is kept.
    ex.append(Example(
        "s23_placeholders", REJECTION, "_gather_draft_sampled_kernel", "gather_draft_sampled",
        dict(draft_sampled=np.full(6, S32, np.int32), pos=np.full(6, S64, np.int64),
             input_ids=i32(50, 51, 52, 53, 54, 55), positions=i64(10, 11, 12, 3, 4, 5),
             logits_indices=i64(0, 1, 2, 5, 4), expanded_idx_mapping=i64(0, 0, 0, 1, 1),
             expanded_local_pos=i32(0, 1, 2, 0, 1), prefill_len=i32(12, 3), num_logits=5),
        dict(draft_sampled=i32(50, -1, -1, 55, 54, S32), pos=i64(10, 11, 12, 5, 4, S64)),
        "launch_gather_draft_sampled", 23,
    ))  # fmt: skip

    # §24: each row's sampled tokens at its logits rows; the rest untouched.
    ex.append(Example(
        "s24_rows", REJECTION, "_flatten_sampled_kernel", "flatten_sampled",
        dict(flat_sampled=np.full(8, S64, np.int64), sampled=i64(1, 2, 3, 4, 5, 6, 7, 8, 9).reshape(3, 3),
             num_sampled=i32(2, 1, 3), cu_num_logits=i32(0, 3, 4, 7), num_reqs=3),
        dict(flat_sampled=i64(1, 2, S64, 4, 7, 8, 9, S64)),
        "launch_flatten_sampled", 24,
    ))  # fmt: skip

    # §25: row 0 rejected one token and takes its last sampled id (truncated to int32); row 1
    # is mid-prefill (nothing sampled) and takes the next prompt token; the last program pads.
    ex.append(Example(
        "s25_shift_next_token_padding", SPECULATOR, "_prepare_prefill_inputs_kernel",
        "target_dependent_ar_prepare_prefill_inputs",
        dict(last_token_indices=np.full(5, S64, np.int64), draft_current_step=i64(5),
             draft_input_ids=np.full(8, S32, np.int32), draft_positions=np.full(8, S64, np.int64),
             draft_query_start_loc=np.full(6, S32, np.int32), draft_seq_lens=np.full(5, S32, np.int32),
             target_input_ids=i32(10, 11, 12, 13, 20, 21, 22), target_positions=i64(5, 6, 7, 8, 0, 1, 2),
             idx_mapping=i64(3, 1), last_sampled=i64(0, 0, 0, 2**32 + 77).reshape(4, 1),
             next_prefill_tokens=i32(0, 66, 0, 0).reshape(1, 4), num_sampled=i32(2, 0), num_rejected=i32(1, 0),
             query_start_loc=i32(0, 4, 7), seq_lens=i32(9, 3), max_num_reqs=4, num_reqs=2),
        dict(last_token_indices=i64(2, 6, 0, 0, S64), draft_current_step=i64(0),
             draft_input_ids=i32(11, 12, 77, S32, 21, 22, 66, S32), draft_positions=i64(5, 6, 7, S64, 0, 1, 2, S64),
             draft_query_start_loc=i32(0, 4, 7, 7, 7, S32), draft_seq_lens=i32(9, 3, 0, 0, S32)),
        "launch_target_dependent_ar_prepare_prefill_inputs", 25,
    ))  # fmt: skip

    # §26: row 1 sits at the model length (M = 10): its position and length are clamped; the
    # last program rebuilds query_start_loc up to max_num_reqs = 3 and pads seq_lens.
    for advance, exp_pos, exp_seq in ((True, i64(8, 9, S64, S64), i32(9, 10, 0, S32)),
                                      (False, i64(7, 9, S64, S64), i32(8, 10, 0, S32))):
        ex.append(Example(
            f"s26_advance_{advance}", SPECULATOR, "_prepare_decode_inputs_kernel", "prepare_decode_inputs",
            dict(draft_tokens=i64(41, 0, 42, 0, 43, 0).reshape(3, 2), target_seq_lens=i32(9, 10), num_rejected=i32(1, 0),
                 input_ids=np.full(4, S32, np.int32), positions=i64(7, 9, S64, S64),
                 sample_src_positions=i64(8, 10, S64), query_start_loc=np.full(5, S32, np.int32),
                 seq_lens=np.full(4, S32, np.int32), max_model_len=10, max_num_reqs=3, num_reqs=2,
                 ADVANCE_DRAFT_POSITIONS=advance),
            dict(input_ids=i32(41, 42, S32, S32), positions=exp_pos, sample_src_positions=i64(9, 11, S64),
                 query_start_loc=i32(0, 1, 2, 2, S32), seq_lens=exp_seq),
            "launch_prepare_decode_inputs", 26,
        ))  # fmt: skip

    # §27: step 1 of 3 moves everything on (row 1 clamped at M = 10; a NaN payload and -0.0
    # copied bit for bit); step 2, the last, only stores the draft.
    hs = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    hs.view(np.uint32)[0, 1] = 0x7FC01234  # a NaN with a payload
    hs[1, 0] = -0.0
    nxt = np.full((4, 5), 99.5, np.float32)
    nxt_exp = nxt.copy()
    nxt_exp.view(np.uint32)[:2, :3] = hs.view(np.uint32)[:2, :3]
    common = dict(input_ids=np.full(3, S32, np.int32), positions=i64(6, 9, S64), sample_src_positions=i64(5, 9, S64),
                  seq_lens=i32(7, 10, S32), draft_tokens=i64(61, 62), hidden_states=hs, hidden_size=3,
                  max_model_len=10, num_speculative_steps=3, num_reqs=2, ADVANCE_DRAFT_POSITIONS=True)
    ex.append(Example(
        "s27_step_1_of_3", SPECULATOR, "_update_draft_inputs_kernel", "update_draft_inputs",
        dict(common, output_draft_tokens=np.full((3, 3), -4, np.int64), next_input_hidden_states=nxt,
             current_draft_step=i64(1)),
        dict(output_draft_tokens=i64(-4, 61, -4, -4, 62, -4, -4, -4, -4).reshape(3, 3), next_input_hidden_states=nxt_exp,
             input_ids=i32(61, 62, S32), positions=i64(7, 9, S64), sample_src_positions=i64(6, 10, S64),
             seq_lens=i32(8, 10, S32)),
        "launch_update_draft_inputs", 27,
    ))  # fmt: skip
    ex.append(Example(
        "s27_last_step", SPECULATOR, "_update_draft_inputs_kernel", "update_draft_inputs",
        dict(common, output_draft_tokens=np.full((3, 3), -4, np.int64), next_input_hidden_states=nxt.copy(),
             current_draft_step=i64(2)),
        dict(output_draft_tokens=i64(-4, -4, 61, -4, -4, 62, -4, -4, -4).reshape(3, 3)),
        "launch_update_draft_inputs", 27,
    ))  # fmt: skip
    return ex


EXAMPLES = _examples()


def _copy(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.copy()
    if isinstance(v, list):
        return [_copy(x) for x in v]
    return v


def _same(actual: Any, expected: Any, what: str) -> None:
    if isinstance(expected, list):
        assert len(actual) == len(expected), what
        for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _same(a, e, f"{what}[{k}]")
        return
    a = np.asarray(actual)
    assert a.dtype == expected.dtype and a.shape == expected.shape, f"{what}: {a.dtype}{a.shape} != {expected.dtype}{expected.shape}"
    assert np.array_equal(a.view(f"u{a.dtype.itemsize}"), expected.view(f"u{expected.dtype.itemsize}")), (
        f"{what}:\n  actual   {a.tolist()}\n  expected {expected.tolist()}"
    )


def check_buffers(ex: Example, after: dict[str, Any]) -> None:
    """Every written buffer as expected, every other array unchanged."""
    for name, value in ex.args.items():
        if isinstance(value, np.ndarray | list):
            _same(after[name], ex.expected.get(name, value), f"{ex.id}: {name}")


def test_every_kernel_has_an_example():
    kernels = {(e.module, e.function) for e in EXAMPLES}
    assert len(kernels) == 14
    assert {e.section for e in EXAMPLES} == set(range(14, 28))


@pytest.mark.parametrize("oracles", [vectorized_v2, loops_v2], ids=["numpy", "numba"])
@pytest.mark.parametrize("ex", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_oracle_gives_the_hand_worked_result(ex, oracles):
    args = {k: _copy(v) for k, v in ex.args.items()}
    assert getattr(oracles, ex.oracle)(**args) is None
    check_buffers(ex, args)


@pytest.mark.parametrize("oracles", [vectorized_v2, loops_v2], ids=["numpy", "numba"])
def test_an_access_out_of_bounds_raises_and_writes_nothing(oracles):
    """The oracles check every access before writing: a query range past ``input_ids`` is an
    ``IndexError`` and every buffer keeps its contents."""
    ex = next(e for e in EXAMPLES if e.section == 15)
    args = {k: _copy(v) for k, v in ex.args.items()}
    args["query_start_loc"] = i32(0, 3, 9)  # row 1 runs past pos (6 entries)
    with pytest.raises(IndexError, match="pos write"):
        getattr(oracles, ex.oracle)(**args)
    _same(args["pos"], ex.args["pos"], "pos")
    _same(args["seq_lens"], ex.args["seq_lens"], "seq_lens")


# -- vLLM 0.33.0's kernels ------------------------------------------------------------------


def _tensors(args: dict[str, Any]) -> dict[str, Any]:
    import torch

    def conv(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return torch.from_numpy(v.copy())
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v

    return {k: conv(v) for k, v in args.items()}


def _arrays(tensors: dict[str, Any]) -> dict[str, Any]:
    def conv(v: Any) -> Any:
        if hasattr(v, "numpy"):
            return v.numpy()
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v

    return {k: conv(v) for k, v in tensors.items()}


def run_kernel(ex: Example, module: Any) -> None:
    from eaglefuzz.kernels import launchers

    kernel = getattr(module, ex.function)
    tensors = _tensors(ex.args)
    getattr(launchers, ex.launcher)(kernel, **tensors, **ex.extra)
    check_buffers(ex, _arrays(tensors))


@pytest.fixture(scope="module")
def release_root(needs) -> Path:
    """The pinned release's files (fetched once; a skip, saying why, only offline)."""
    from eaglefuzz.harness.sources import vllm as vsrc

    return needs.release_files(vsrc.PINNED_RELEASE)


def _release(root: Path, tmp: Path) -> dict[str, Any]:
    """The four V2 modules of the release, loaded as ``--vllm-version`` loads a module."""
    from eaglefuzz.harness.sources.vllm_shims import RUNNER_V2_MODULES, load_module

    return {m: load_module(root, f"v2examples_r{k}", m)[0] for k, m in enumerate(RUNNER_V2_MODULES)}


def _installed(root: Path, tmp: Path) -> dict[str, Any]:
    """The same files as an installed vLLM (a site folder whose ``import vllm`` fails), found
    as ``--vllm`` finds it, without importing vLLM."""
    import sys

    from eaglefuzz.harness.sources import vllm as vsrc
    from eaglefuzz.harness.sources.vllm_shims import RUNNER_V2_MODULES, load_module

    site = tmp / "site"
    for m in (vsrc.MODULE, *RUNNER_V2_MODULES, "vllm/v1/worker/gpu/buffer_utils.py"):
        (site / m).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / m, site / m)
    (site / "vllm/__init__.py").write_text("raise ImportError('vLLM needs its dependencies and a GPU')\n")
    (site / "vllm-0.33.0.dist-info").mkdir()
    (site / "vllm-0.33.0.dist-info/METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.33.0\n")
    sys.path.insert(0, str(site))
    try:
        found = vsrc.find_installed()
    finally:
        sys.path.remove(str(site))
    assert found.version == "0.33.0" and found.module_file == (site / vsrc.MODULE).resolve()
    home = found.module_file.parents[3]
    loaded = {m: load_module(home, f"v2examples_i{k}", m)[0] for k, m in enumerate(RUNNER_V2_MODULES)}
    assert not [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]
    return loaded


def _file(root: Path, tmp: Path) -> dict[str, Any]:
    """The same files copied out of the release as a user's files (``--kernels``): their vLLM
    imports do not resolve, so their kernels are taken out under eaglefuzz's imports."""
    from eaglefuzz.harness.sources import file as fsrc
    from eaglefuzz.harness.sources.vllm_shims import RUNNER_V2_MODULES

    out = {}
    for m in RUNNER_V2_MODULES:
        if not any(e.module == m for e in EXAMPLES):
            continue  # the verification's modules (§28-§35): tests/test_runner_v2_verify.py
        copy = tmp / m.replace("/", "_")
        shutil.copy(root / m, copy)
        out[m] = fsrc._import_or_extract(copy, sorted({e.function for e in EXAMPLES if e.module == m}))
        assert out[m].__name__.endswith("_extracted")
    return out


SOURCES = {"release": _release, "installed": _installed, "file": _file}


@pytest.fixture(scope="module", params=sorted(SOURCES))
def v2_modules(request, release_root, tmp_path_factory, backend) -> dict[str, Any]:
    if backend.device != "cpu":
        pytest.skip("the examples' tensors are CPU tensors: run under the Triton interpreter")
    return SOURCES[request.param](release_root, tmp_path_factory.mktemp(request.param))


@pytest.mark.kernel
@pytest.mark.parametrize("module", sorted({e.module for e in EXAMPLES}))
def test_vllm_0_33_0_kernels_give_the_hand_worked_results(module, v2_modules):
    """Every example of the module's kernels, on vLLM 0.33.0's code from each source: the
    release wheel, an installed vLLM, a user's file (one item per file and source: compiling
    each kernel once under the interpreter is what costs)."""
    for ex in (e for e in EXAMPLES if e.module == module):
        run_kernel(ex, v2_modules[module])
