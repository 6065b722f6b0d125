"""The catalogue of harness mutants: defects of eaglefuzz's own code, each with the tests that catch it.

Each :class:`HarnessMutant` (``tests/self_mutation.py``) edits files of the checkout with
``(file, old, new)`` replacements (each ``old`` a small snippet that occurs exactly once there) and names
the fast tests that must fail while it stands. ``fast=True`` puts it in CI's default run; the
whole catalogue runs in ``tox -e mutants`` (score: benchmarks/RESULTS.md). A mutant that survives
is fixed by strengthening the tests, never by dropping it; one whose text no longer occurs fails
``test_the_mutation_still_applies``: update its snippet to the code as it is now.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location("eaglefuzz_self_mutation", Path(__file__).with_name("self_mutation.py"))
_sm = sys.modules.get("eaglefuzz_self_mutation")
if _sm is None:
    _sm = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _sm
    _spec.loader.exec_module(_sm)
HarnessMutant = _sm.HarnessMutant

SHRINK = "tests/test_shrinking.py::test_a_150_request_finding_shrinks_to_its_culprit_in_few_checks"
TC = "tests/test_comparison.py::"
V, L = "oracles/vectorized.py", "oracles/loops.py"
V2, L2 = "oracles/vectorized_v2.py", "oracles/loops_v2.py"
DISAGREE = r"the oracles, through the record"


def pin(pinned_id: str) -> str:
    """The node id of a hand-worked case of tests/pinned_examples.py."""
    return f"tests/test_pinned_examples.py::test_pinned[{pinned_id}]"


def share(target: str) -> str:
    return f"tests/test_generator_coverage.py::test_the_generator_body_reaches_each_feature_in_its_share[{target}]"


def default_run(target: str) -> str:
    return f"tests/test_features.py::test_default_run_reaches_every_feature[{target}]"


CATALOGUE: tuple[HarnessMutant, ...] = (
    # -- oracle arithmetic, one oracle (the two oracles disagree) --------------------------------
    HarnessMutant(
        "oracle_one_prepare_inputs_rejected",
        "oracle-one",
        ((V, "    rejected = np.where(d > 0, _wrap32(d + 1 - valid), 0)\n",
          "    rejected = np.where(d > 0, _wrap32(d - valid), 0)\n"),),
        (pin("eagle_prepare_inputs_padded_kernel-drafts_and_a_prefill"),),
        "the NumPy oracle counts one rejected token too few (d - valid instead of d + 1 - valid)",
        expect=r"oracle vs",
        fast=True,
    ),
    HarnessMutant(
        "oracle_one_random_divides_in_float64",
        "oracle-one",
        ((L, "                        quotient = p / q  # float32 / float32: the correctly rounded float32\n",
          "                        quotient = np.float64(p) / np.float64(q)\n"),),
        (pin("rejection_random_sample_kernel-float32_quotient_at_the_boundary"),),
        "the Numba oracle of the random rejection sampler divides p / q in float64, not float32",
        expect=r"oracle vs",
    ),
    # -- oracle arithmetic, both oracles the same way (only hand-worked expectations show it) ---
    HarnessMutant(
        "oracle_both_random_divide_in_float64",
        "oracle-both",
        ((V, "                quotient = np.divide(p, q, dtype=np.float32)\n",
          "                quotient = np.divide(np.float64(p), np.float64(q))\n"),
         (L, "                        quotient = p / q  # float32 / float32: the correctly rounded float32\n",
          "                        quotient = np.float64(p) / np.float64(q)\n")),
        (pin("rejection_random_sample_kernel-float32_quotient_at_the_boundary"),),
        "both random-sampler oracles divide p / q in float64 (issue 29: release fuzzing, corpus replay, the "
        "rr_* seeded bugs and the division-window tests pass)",
        expect=DISAGREE,
        fast=True,
    ),
    HarnessMutant(
        "oracle_both_copy_expand_position_plus_one",
        "oracle-both",
        ((V, "    pos[~rejected] = p0 + j[~rejected]  # int64 array add wraps; astype below wraps narrower\n",
          "    pos[~rejected] = p0 + j[~rejected] + 1\n"),
         (L, "            position = pos64[qs] + np.int64(j)  # int64 add wraps; the store truncates\n",
          "            position = pos64[qs] + np.int64(j) + 1\n")),
        (pin("copy_and_expand_eagle_inputs_kernel-shift_off_p1_rejected_token"),),
        "both copy-and-expand oracles start each request's positions at p0 + 1",
        expect=DISAGREE,
    ),
    HarnessMutant(
        "oracle_both_prepare_inputs_rejected",
        "oracle-both",
        ((V, "    rejected = np.where(d > 0, _wrap32(d + 1 - valid), 0)\n",
          "    rejected = np.where(d > 0, _wrap32(d - valid), 0)\n"),
         (L, "            rejected = np.int32(np.int64(d) + 1 - np.int64(valid[r]))\n",
          "            rejected = np.int32(np.int64(d) - np.int64(valid[r]))\n")),
        (pin("eagle_prepare_inputs_padded_kernel-drafts_and_a_prefill"),),
        "both prepare-inputs oracles count one rejected token too few",
        expect=DISAGREE,
    ),
    HarnessMutant(
        "oracle_both_step_seq_len_cap",
        "oracle-both",
        ((V, "    seq = np.where(exceeds, 1, np.minimum(_wrap32(seq_lens[:n].astype(np.int64) + 1), M))\n",
          "    seq = np.where(exceeds, 1, np.minimum(_wrap32(seq_lens[:n].astype(np.int64) + 1), M - 1))\n"),
         (L, "            if new_seq > M:\n                new_seq = M\n",
          "            if new_seq > M - 1:\n                new_seq = M - 1\n")),
        (pin("eagle_step_slot_mapping_metadata_kernel-aliased_positions_later_columns"),),
        "both eagle-step oracles cap seq_lens at max_model_len - 1",
        expect=DISAGREE,
    ),
    HarnessMutant(
        "oracle_both_expand_never_replaces_floats",
        "oracle-both",
        ((V, "        vals = np.where(x == frm32, to32, x).astype(np.float32)\n",
          "        vals = np.where(x == frm32, x, x).astype(np.float32)\n"),
         (L, "        val = to32 if x[r] == frm32 else x[r]\n", "        val = x[r]\n")),
        (pin("expand_kernel-temperature_zero_replaced"),),
        "both expand oracles never replace a float (a temperature of 0 stays 0)",
        expect=DISAGREE,
    ),
    HarnessMutant(
        "oracle_both_extend_counts_one_request",
        "oracle-both",
        (("oracles/python_functions.py", '        "num_actual_tokens": int(num_actual_tokens) + batch * int(n),\n',
          '        "num_actual_tokens": int(num_actual_tokens) + int(n),\n'),
         ("oracles/python_functions.py", "    for _ in lens:\n        tokens += int(n)\n",
          "    for _ in lens[:1]:\n        tokens += int(n)\n")),
        (pin("extend_all_queries_by_N-two_requests_by_2"),),
        "both extend_all_queries_by_N oracles add N once to num_actual_tokens, not once per request",
        expect=DISAGREE,
    ),
    # -- record wiring ---------------------------------------------------------------------------
    HarnessMutant(
        "wiring_greedy_is_greedy_none",
        "wiring",
        (("harness/targets/rejection_greedy_sample_kernel/record.py",
          '            is_greedy=a.get("is_greedy"),\n', "            is_greedy=None,\n"),),
        (pin("rejection_greedy_sample_kernel-mixed_batch_random_row_untouched"),),
        "the greedy record's call_oracle hands both oracles is_greedy=None (issue 29: only tests that need "
        "vLLM 0.33.0 failed)",
        expect=DISAGREE,
        fast=True,
    ),
    HarnessMutant(
        "wiring_copy_expand_ids_swapped",
        "wiring",
        (("harness/targets/copy_and_expand_eagle_inputs_kernel/record.py",
          "        oracle(**case.arrays, **case.scalars, **outputs, slots_per_request=lay.blocks * lay.block)\n",
          "        scalars = {**case.scalars, \"padding_token_id\": case.scalars[\"parallel_drafting_token_id\"],\n"
          "                   \"parallel_drafting_token_id\": case.scalars[\"padding_token_id\"]}\n"
          "        oracle(**case.arrays, **scalars, **outputs, slots_per_request=lay.blocks * lay.block)\n"),),
        (pin("copy_and_expand_eagle_inputs_kernel-shift_on_p3_parallel_slots"),),
        "the copy-and-expand record hands the oracles the padding and parallel-drafting ids swapped",
        expect=DISAGREE,
    ),
    HarnessMutant(
        "wiring_prepare_inputs_int64_output",
        "dtype",
        (("harness/targets/eagle_prepare_inputs_padded_kernel/record.py",
          '        return {"token_indices_to_sample": (I32, (R,)), "num_rejected_tokens": (I32, (R,))}\n',
          '        return {"token_indices_to_sample": (np.dtype(np.int64), (R,)), "num_rejected_tokens": (I32, (R,))}\n'),),
        (pin("eagle_prepare_inputs_padded_kernel-drafts_and_a_prefill"),),
        "the prepare-inputs record allocates an int64 output where the contract's is int32",
        expect=r"the contract's is torch.int32",
    ),
    # -- the comparison ----------------------------------------------------------------------------
    HarnessMutant(
        "compare_skips_the_first_element",
        "compare-first",
        (("harness/core/compare.py", "        index = flat - guard\n",
          "        index = flat - guard\n        if index == 0:\n            continue\n"),),
        (TC + "test_a_difference_in_any_element_is_reported_at_its_index",
         TC + "test_an_element_never_written_is_reported"),
        "the comparison never looks at a buffer's first element",
        fast=True,
    ),
    HarnessMutant(
        "compare_skips_the_last_element",
        "compare-last",
        (("harness/core/compare.py", "        index = flat - guard\n",
          "        index = flat - guard\n        if index == e.size - 2 * guard - 1:\n            continue\n"),),
        (TC + "test_a_difference_in_any_element_is_reported_at_its_index",
         TC + "test_an_element_never_written_is_reported"),
        "the comparison never looks at a buffer's last element (issue 29: a kernel that never processes its "
        "last request passed 100 examples)",
        fast=True,
    ),
    HarnessMutant(
        "compare_skips_the_guard_bands",
        "guard",
        (("harness/core/compare.py", "        index = flat - guard\n",
          "        index = flat - guard\n        if not 0 <= index < e.size - 2 * guard:\n            continue\n"),),
        (TC + "test_a_write_outside_the_buffer_lands_in_a_guard_band",),
        "the comparison ignores the guard bands: a write past a buffer goes unseen",
        fast=True,
    ),
    HarnessMutant(
        "no_guard_bands",
        "guard",
        (("harness/core/buffers.py", "    return max(GUARD, int(n))\n", "    return 0\n"),),
        (TC + "test_a_write_outside_the_buffer_lands_in_a_guard_band", TC + "test_guard_bands_are_as_long_as_the_buffer"),
        "buffers have no guard bands: an overrun corrupts memory instead of being a finding",
    ),
    HarnessMutant(
        "batch_input_copy_runs_past_its_segment",
        "guard",
        (("harness/targetkit/placement_kernels.py", "        keep = at < n\n", "        keep = at <= n\n"),),
        ("tests/test_placement.py::test_each_segment_lands_at_its_place_and_nothing_else_moves",),
        "a device batch's input copy writes one element past each case's array, over its guard band's "
        "sentinel: the band no longer tells a kernel's overrun from the harness's own write",
        fast=True,
    ),
    HarnessMutant(
        "masked_write_ignores_its_mask",
        "wiring",
        (("harness/targetkit/placement_kernels.py",
          "            keep = keep & (tl.load(mask_ptr + src + at, mask=keep, other=0) != 0)\n",
          "            keep = keep\n"),),
        ("tests/test_placement.py::test_a_masked_write_lands_where_its_mask_is_set_and_nowhere_else",),
        "a device batch's write given as a mask is placed at every element of its cases, set or not: an element "
        "the contract leaves alone is expected to change",
        fast=True,
    ),
    HarnessMutant(
        "masked_write_on_the_cpu_takes_every_element",
        "wiring",
        (("harness/targetkit/placement.py", "            written = flat[src : src + n] != 0\n",
          "            written = flat[src : src + n] == flat[src : src + n]\n"),),
        ("tests/test_masked_writes.py::test_a_batch_laid_out_from_masks_equals_it_from_flat_indices",),
        "on the CPU, a device batch's write given as a mask is placed at every element of its cases: a run of the "
        "tests expects elements the contract leaves alone to change",
        fast=True,
    ),
    HarnessMutant(
        "batch_check_skips_the_bands",
        "guard",
        (("harness/targetkit/placement_kernels.py", "    for i in range(band + j * BLOCK, n, step):\n",
          "    for i in range(j * BLOCK, n, step):\n"),),
        ("tests/test_placement.py::test_a_check_counts_each_element_not_as_its_segment_expects_and_nothing_else",),
        "a device batch's check against the sources skips the guard band before each case's array: a kernel's "
        "write past an array goes unseen on a GPU",
        fast=True,
    ),
    HarnessMutant(
        "batch_inputs_and_masked_outputs_unchecked",
        "wiring",
        (("harness/targetkit/device_batch.py",
          "            check_segments(self.full[s], src, mask, table, longest, _SENTINEL[s], total)\n",
          "            pass\n"),),
        ("tests/test_device.py::test_device_campaign_catches_a_seeded_bug[dp_chunked_takes_last_sampled]",),
        "a device batch never compares its inputs or its outputs written by a mask: a kernel that writes them "
        "wrong passes",
    ),
    HarnessMutant(
        "two_epochs_of_tables_at_once",
        "wiring",
        (("harness/checking/device_mode/engine.py",
          "                    bigs.clear()  # tables they hold) go before the next epoch's are drawn: one epoch's at a time\n",
          "                    pass  # tables they hold) go before the next epoch's are drawn: one epoch's at a time\n"),),
        ("tests/test_device.py::test_one_epochs_tables_at_a_time_on_the_device",),
        "a device run keeps the last epoch's guarded tables (and the tables they hold) while it draws the next "
        "epoch's: each lane holds two epochs of tables, tens of GB, at every change of epoch",
    ),
    HarnessMutant(
        "recovered_winners_shared_by_draft_modes",
        "wiring",
        (("harness/targets/sample_recovered_tokens_kernel/device.py",
          "    old = memo.get(mode)\n",
          "    old, mode = memo.get(True), True\n"),),
        ("tests/test_device.py::test_the_recovered_batches_of_an_epoch_find_its_known_winners_as_computed_afresh",),
        "the recovered kernel's oracle keeps one epoch's winners for batches with and without draft probabilities "
        "alike: a token's winner found over the residual is reused where the draft id should be zeroed instead",
        fast=True,
    ),
    HarnessMutant(
        "recovered_winners_kept_across_epochs",
        "wiring",
        (("harness/targets/sample_recovered_tokens_kernel/device.py",
          '"winners": {}}  # the epoch\'s winners found so far (oracle_batch)',
          '"winners": self.__dict__.setdefault("_all", {})}'),),
        ("tests/test_device.py::test_the_recovered_batches_of_an_epoch_find_its_known_winners_as_computed_afresh",),
        "the recovered kernel's oracle keeps the winners of earlier table epochs: a token of a new epoch's tables "
        "gets the winner its row and noise had in another epoch",
    ),
    HarnessMutant(
        "scale_lane_first_in_order",
        "wiring",
        (("harness/run/multi.py",
          "        first = next((j for j, (k, n) in enumerate(group) if holds_scale_examples(k, n)), 0)\n",
          "        first = 0\n"),),
        ("tests/test_multi.py::test_lane_1_of_each_device_is_a_share_that_holds_scale_examples",),
        "lane 1 of a GPU is its first share whatever it holds: with an even number of lanes its share (every N-th "
        "example from an even one) holds no production-scale example, and a --lanes run draws none",
        fast=True,
    ),
    HarnessMutant(
        "scale_unfit_is_a_failure",
        "wiring",
        (("harness/checking/device_mode/scale_lane.py",
          "        return not self.unfit and bool(self.bad or",
          "        return bool(self.bad or self.unfit or"),),
        ("tests/test_scale.py::test_a_scale_case_that_does_not_fit_the_gpus_free_memory_is_not_checked_and_never_a_finding",),
        "a production-scale case that did not fit in the GPU's free memory (another lane held it) counts as a failure "
        "of the kernel: the campaign minimises it and reports an out-of-memory crash as a finding",
        fast=True,
    ),
    HarnessMutant(
        "host_threads_kept_on_a_gpu",
        "wiring",
        (("harness/checking/device_mode/host_threads.py",
          '    if device == "cpu" or torch.get_num_threads() == 1:\n',
          "    if True:\n"),),
        ("tests/test_device.py::test_a_device_run_on_a_gpu_does_its_torch_work_on_one_thread_and_gives_the_count_back",),
        "a device run on a GPU keeps torch's thread pool: with --lanes N, N pools spin on the cores the lanes "
        "share, and every lane's host work slows (half the verifier's rate of four greedy lanes on an H100)",
        fast=True,
    ),
    HarnessMutant(
        "settle_keeps_a_re_keyed_requests_draws",
        "wiring",
        (("harness/targetkit/verify_chain.py",
          "        among = torch.isin(q.state, keyed)  # every request that reads a re-keyed seed\n",
          "        among = torch.isin(q.state, keyed[1:])  # every request that reads a re-keyed seed\n"),),
        ("tests/test_device.py::test_a_settled_chain_computes_again_only_the_re_keyed_requests",),
        "settling a verification batch leaves the first re-keyed request's §34 draws as they were before its new "
        "seed: _resample_kernel's expected winners and _insert_resampled_kernel's inputs are of another seed "
        "than the batch's",
    ),
    HarnessMutant(
        "batch_check_bands_cut_short",
        "guard",
        (("harness/targetkit/device_batch.py", "        band = np.concatenate([[lo], dst[:-1] + n[:-1]])\n",
          "        band = np.maximum(np.concatenate([[lo], dst[:-1] + n[:-1]]), dst - 8)\n"),),
        ("tests/test_batch_check.py::test_the_check_counts_what_a_whole_comparison_counts[_expand_idx_mapping_kernel]",),
        "a device batch's check reads only the last 8 elements of each guard band: a kernel's write further "
        "past an array goes unseen",
    ),
    HarnessMutant(
        "batch_outputs_not_prefilled",
        "sentinel",
        (("harness/targetkit/device_batch.py", "            prefilled = dt != torch.bool and n not in batch.cat",
          "            prefilled = False and n not in batch.cat"),),
        ("tests/test_bounded_arenas.py::test_an_exact_output_left_unwritten_is_a_difference_even_where_its_value_is_the_sentinel",),
        "a device batch's written output elements hold the sentinel, not their expected bits with one flipped: "
        "a kernel that skips an element whose value is the sentinel passes",
    ),
    HarnessMutant(
        "sentinel_may_be_a_written_value",
        "sentinel",
        (("harness/core/buffers.py", "    for c in _CANDIDATES:\n        if c not in present:\n            return c\n",
          "    for c in _CANDIDATES:\n        return c\n"),),
        (TC + "test_the_sentinel_is_never_a_value_the_oracle_wrote",),
        "the sentinel is picked without looking at what the oracle wrote: an unwritten element can look written",
        fast=True,
    ),
    HarnessMutant(
        "bool_sentinel_is_false",
        "sentinel",
        (("harness/core/buffers.py", "BOOL_SENTINEL = 0xA5\n", "BOOL_SENTINEL = 0x00\n"),),
        (TC + "test_an_unwritten_false_mask_element_is_reported",),
        "bool buffers are pre-filled with False: a mask element the kernel never writes as False goes unseen",
    ),
    HarnessMutant(
        "compare_ignores_dtypes",
        "dtype",
        (("harness/core/compare.py", "    if expected.dtype != actual.dtype:\n", "    if False:\n"),),
        (TC + "test_another_dtype_is_a_difference_even_with_equal_values",),
        "the comparison ignores dtypes: an int64 result equal in value passes for int32",
        fast=True,
    ),
    HarnessMutant(
        "function_field_dtype_ignored",
        "dtype",
        (("harness/targetkit/pyfunc.py", "    if expected.dtype != actual.dtype:\n", "    if False:\n"),),
        (TC + "test_a_field_of_another_dtype_is_reported",),
        "a Python function's tensor fields are compared by value only: int64 seq_lens pass for int32",
    ),
    HarnessMutant(
        "slot_mapping_result_dtype_ignored",
        "dtype",
        (("harness/targets/compute_new_slot_mapping/record.py", "        if expected.dtype != actual.dtype:\n",
          "        if False:\n"),),
        (TC + "test_a_result_of_another_dtype_is_reported",),
        "compute_new_slot_mapping's result is compared by value only: an int32 slot mapping passes for int64",
    ),
    # -- generator branches ------------------------------------------------------------------------
    HarnessMutant(
        "generator_copy_expand_never_shifts",
        "generator",
        (("harness/targets/copy_and_expand_eagle_inputs_kernel/cases.py", "    shift = c.boolean()\n",
          "    shift = c.boolean() and False\n"),),
        (share("copy_and_expand_eagle_inputs_kernel"),),
        "the copy-and-expand generator body never draws shift_input_ids=True (issue 29: 0 of 40 tests failed, "
        "the run's table said features 21/21)",
        expect=r"shift_on",
        fast=True,
    ),
    HarnessMutant(
        "generator_copy_expand_never_shifts_in_a_run",
        "generator",
        (("harness/targets/copy_and_expand_eagle_inputs_kernel/cases.py", "    shift = c.boolean()\n",
          "    shift = c.boolean() and False\n"),),
        (default_run("copy_and_expand_eagle_inputs_kernel"),),
        "the same branch never drawn, seen by a default run's own feature count: the tour's shift cases no "
        "longer make its table say every feature was reached",
        expect=r"never reaches \[[^]]*'shift_on'",
    ),
    HarnessMutant(
        "generator_next_token_never_discards",
        "generator",
        (("harness/targets/eagle_prepare_next_token_padded_kernel/cases.py",
          "        discard = c.array(np.int8, R + extra, 0, 1).astype(bool)\n",
          "        discard = np.zeros(R + extra, dtype=bool)\n"),),
        (share("eagle_prepare_next_token_padded_kernel"),),
        "the next-token generator body never discards some of the requests",
        expect=r"discard_some",
    ),
    HarnessMutant(
        "generator_scale_batch_stops_short_of_the_limit",
        "generator",
        (("harness/targetkit/device_draws.py",
          "    N = rng.integers(first + 1, max(first + 1, rows), size=k, endpoint=True)\n    K = ",
          "    N = rng.integers(first - 1, max(first + 1, rows), size=k, endpoint=True)\n    K = "),),
        ("tests/test_scale.py::test_scale_batch_cases_pass_the_limit_and_have_the_records_features"
         "[rejection_random_sample_kernel]",),
        "a production-scale batch draws steps whose last row an int32 offset still holds: cases that are "
        "not past 2**31 counted as production-scale ones",
        expect=r"LIMIT",
    ),
    HarnessMutant(
        "oracle_scale_rows_merge_bonus_rows",
        "wiring",
        (("harness/targetkit/scale_steps.py",
          "key = torch.stack([content, t.view(torch.int32).long(), bonus.long(), draft_at], 1)",
          "key = torch.stack([content, t.view(torch.int32).long(), 0 * bonus.long(), draft_at], 1)"),),
        ("tests/test_scale_v2.py::test_scale_batches_are_their_cases_alone"
         "[_compute_local_logits_stats_kernel]",),
        "a V2 scale batch's oracle takes a bonus row for the drafted row of the same table row and temperature: "
        "statistics expected where the kernel writes none",
        expect=r"'(target|draft)_local_\w+'\)",
    ),
    HarnessMutant(
        "generator_scale_tail_stops_before_the_limit",
        "generator",
        (("harness/targetkit/scale_steps.py", "    return np.any((counts > 1) & (ends - 2 >= Z), axis=1)",
          "    return np.any((counts > 1) & (ends - 2 >= Z - 2), axis=1)"),),
        ("tests/test_scale_v2.py::test_scale_batches_are_their_cases_alone"
         "[_compute_cumulative_log_p_kernel]",),
        "a V2 scale batch's tails may end before the first row an int32 offset cannot reach: cases not past "
        "2**31 counted as production-scale ones",
        expect=r"row_offset_past_2_31|\* W >= LIMIT",
    ),
    HarnessMutant(
        "oracle_scale_temperature_of_table_row",
        "wiring",
        (("harness/targets/_temperature_kernel/device.py", "temperature_rows(x[at], t[divided])",
          "temperature_rows(x[at], t[at])"),),
        ("tests/test_scale_v2.py::test_scale_batches_are_their_cases_alone[_temperature_kernel]",),
        "a temperature scale batch's oracle takes each divided row's temperature at its row of the shared table, "
        "not at its place among the batch's rows",
        expect=r"'logits'\)",
    ),
    HarnessMutant(
        "compare_shared_writes_unchecked",
        "wiring",
        (("harness/targetkit/device.py",
          "                total = total + bounded_mismatch(at.view(self.tensor.dtype) if s != self.tensor.dtype else at, value, bound).sum()",
          "                total = total + 0 * bounded_mismatch(at.view(self.tensor.dtype) if s != self.tensor.dtype else at, value, bound).sum()"),),
        ("tests/test_scale_v2.py::test_a_scale_batch_checks_what_its_kernel_writes_in_place",),
        "a shared table updated in place counts its written elements as expected whatever they hold: a kernel that "
        "multiplies by the temperature passes its scale batches",
        expect=r"tk_multiplies",
    ),
    HarnessMutant(
        "oracle_scale_tails_read_the_row_before",
        "wiring",
        (("harness/targetkit/scale_steps.py", "            return self.table[self.rows[idx // self.W], idx % self.W]\n",
          "            return self.table[self.rows[idx // self.W] - 1, idx % self.W]\n"),),
        ("tests/test_scale_v2.py::test_scale_batches_are_their_cases_alone[_rejection_kernel]",),
        "a V2 scale batch's standard-verification tails are verified (and settled) against the table row before "
        "each of theirs: the batch's §33 is not its cases'",
        expect=r"'(sampled|num_sampled|\w+_logsumexp)'\)",
    ),
    HarnessMutant(
        "wiring_scale_reads_not_visited",
        "wiring",
        (("oracles/tensor_ops.py", "    read = visited & (did >= 0)\n", "    read = did >= 0\n"),),
        ("tests/test_scale.py::test_scale_batch_cases_pass_the_limit_and_have_the_records_features"
         "[rejection_random_sample_kernel]",),
        "the batched oracle hands on every draft as a table read, visited or not: a scale batch claims "
        "flat_index_past_2_31 for cases whose reads past 2**31 never happen",
        expect=r"features\[j\] ==",
    ),
    HarnessMutant(
        "oracle_device_next_token_first_valid",
        "oracle-one",
        (("oracles/tensor_ops.py", '    last = torch.searchsorted(seen, upto, side="left")',
          '    last = torch.searchsorted(seen, upto - count + 1, side="left")'),),
        ("tests/test_device.py::test_device_oracle_agrees_with_the_numpy_and_numba_oracles"
         "[eagle_prepare_next_token_padded_kernel]",),
        "the device's batched torch oracle of §3 takes a kept request's first valid id, not its last: every "
        "device batch of several valid columns disagrees with the kernel",
        expect=r"torch oracle",
    ),
    HarnessMutant(
        "oracle_device_slots_bonus_as_parallel",
        "oracle-one",
        (("oracles/tensor_ops.py", "    parallel = (g > bonus_at) & ~rejected\n", "    parallel = (g >= bonus_at) & ~rejected\n"),),
        ("tests/test_device.py::test_device_oracle_agrees_with_the_numpy_and_numba_oracles"
         "[copy_and_expand_eagle_inputs_kernel]",),
        "the device oracle's slots (expand_slots, which the compiled slots must equal) count each bonus slot as "
        "a parallel-drafting one: its id and mask are wrong in every case",
        expect=r"torch oracle",
    ),
    HarnessMutant(
        "oracle_device_context_row_0",
        "oracle-one",
        (("oracles/tensor_ops.py", "    return t + shift, (block_table[start + torch.minimum(d, last)] - d) * size + positions\n",
          "    return t + shift, (block_table[torch.minimum(d, last)] - d) * size + positions\n"),),
        ("tests/test_device.py::test_device_oracle_agrees_with_the_numpy_and_numba_oracles"
         "[copy_and_expand_dflash_inputs_kernel]",),
        "the device oracle's context slots (dflash_context, which the compiled ones must equal) read every "
        "request's block ids from the first row of the batch's tables",
        expect=r"torch oracle",
    ),
    HarnessMutant(
        "oracle_device_greedy_rows_one_apart",
        "oracle-one",
        (("harness/targets/rejection_greedy_sample_kernel/device.py",
          "            tokens=int(e[\"d\"].sum()), out_start=e[\"out_start\"])",
          "            tokens=int(e[\"d\"].sum()), out_start=None)"),),
        ("tests/test_device.py::test_device_oracle_agrees_with_the_numpy_and_numba_oracles"
         "[rejection_greedy_sample_kernel]",),
        "the device's batched greedy oracle ignores each request's output start (steps laid end to end): "
        "every request's writes land max_spec_len + 1 = 1 apart, in another case's rows",
        expect=r"torch oracle",
    ),
    HarnessMutant(
        "generator_greedy_never_mixed",
        "generator",
        (("harness/targets/rejection_greedy_sample_kernel/cases.py", "        greedy=c.choice(GREEDY_MODES),",
          "        greedy=GREEDY_MODES[0],"),),
        (share("rejection_greedy_sample_kernel"),),
        "the greedy generator body only draws all-greedy batches (is_greedy None)",
        expect=r"mixed_batch",
    ),
    # -- Model Runner V2's oracles and generators ------------------------------------------------
    HarnessMutant(
        "oracle_one_v2_post_update_ignores_rejected",
        "oracle-one",
        ((V2, '    delta = _wrap32(qlen - _gather(np.asarray(num_rejected), rows, "num_rejected read"))\n',
          '    delta = _wrap32(qlen + 0 * _gather(np.asarray(num_rejected), rows, "num_rejected read"))\n'),),
        (pin("_post_update_kernel-last_rank_counts_and_masked_row"),),
        "the NumPy oracle of V2's _post_update_kernel moves a state's count by the whole query, the rejected "
        "drafts not taken off",
        expect=r"oracle vs",
    ),
    HarnessMutant(
        "oracle_both_v2_num_computed_one_short",
        "oracle-both",
        ((V2, '    _store(num_computed_tokens, s, _wrap32(c + qlen), "num_computed_tokens write")\n',
          '    _store(num_computed_tokens, s, _wrap32(c + qlen - 1), "num_computed_tokens write")\n'),
         (L2, "            nct[s] = np.int32(np.int64(nct[s]) + qlen)\n",
          "            nct[s] = np.int32(np.int64(nct[s]) + qlen - 1)\n")),
        (pin("_post_update_num_computed_tokens_kernel-counts_grow_by_queries"),),
        "both oracles of V2's _post_update_num_computed_tokens_kernel grow a state's count by one token "
        "too few (the oracles agree; only the hand-worked expectations show it)",
        expect=DISAGREE,
        fast=True,
    ),
    HarnessMutant(
        "generator_v2_post_update_never_masks",
        "generator",
        (("harness/targets/_post_update_kernel/cases.py", "    if c.chance(0.3):\n",
          "    if c.chance(0.3) and False:\n"),),
        (share("_post_update_kernel"),),
        "the generator of V2's _post_update_kernel never masks a row out (-1, a pipeline rank's)",
        expect=r"masked_row",
    ),
    # -- the shrinker ---------------------------------------------------------------------------
    HarnessMutant(
        "shrinker_keeps_a_passing_case",
        "shrinker",
        (("harness/checking/shrinking.py",
          "        if smaller is not None and failure(smaller) == failure(self.finding):\n"
          "            self.finding = smaller\n",
          "        if smaller is None or failure(smaller) == failure(self.finding):\n"
          "            self.finding = smaller if smaller is not None else replace(self.finding, case=candidate)\n"),),
        (SHRINK,),
        "a shrinking step takes a candidate that passes: the reported minimal case does not fail",
        fast=True,
    ),
    HarnessMutant(
        "shrinker_never_drops_a_request",
        "shrinker",
        (("harness/checking/shrinking.py",
          "        while len(items) >= 2 and not self._spent(deadline):\n",
          "        while len(items) >= 2 and not self._spent(deadline) and False:\n"),),
        (SHRINK,),
        "delta debugging over the requests never drops one: a 150-request finding stays 150 requests",
    ),
)
