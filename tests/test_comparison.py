"""The comparison misses nothing: every element, both ends, guard bands, sentinels, dtypes.

Each test hands ``Target.check`` an implementation with one known defect (a hand-worked case of
``tests/pinned_examples.py`` with one element left unwritten, one written past the buffer, ...)
or calls the comparison directly, and requires the exact difference to be reported: a harness
whose comparison skipped the first or last element, dropped its guard bands, picked a sentinel
that a written element holds, or ignored dtypes, fails here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from eaglefuzz.harness.core.buffers import (
    BOOL_SENTINEL,
    guard_for,
    pick_sentinel,
    sentinel_candidates,
)
from eaglefuzz.harness.core.compare import compare_arrays
from eaglefuzz.harness.targets import TARGETS


def _pinned():  # noqa: ANN202
    name = "eaglefuzz_pinned_examples"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("pinned_examples.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


PE = _pinned()
BY_ID = {p.id: p for p in PE.PINNED}


def _nowhere(array: str, index: int) -> tuple[None, str]:
    return None, "-"


# -- the comparison itself ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.bool_])
@pytest.mark.parametrize("guard", [0, 3])
def test_a_difference_in_any_element_is_reported_at_its_index(dtype, guard):
    """A single differing element, at every index of a buffer (its guard bands included), is
    reported once, at its index relative to the buffer: none is skipped, the first and the last
    included."""
    n = 5
    base = np.arange(n + 2 * guard).astype(dtype) if dtype != np.bool_ else np.zeros(n + 2 * guard, np.bool_)
    for flat in range(n + 2 * guard):
        actual = base.copy()
        actual[flat] = (not actual[flat]) if dtype == np.bool_ else actual[flat] + 100
        diffs = compare_arrays("x", base, actual, locate=_nowhere, versus="test", guard=guard)
        assert [d.index for d in diffs] == [flat - guard], (dtype, guard, flat, diffs)


def test_another_dtype_is_a_difference_even_with_equal_values():
    a = np.arange(4, dtype=np.int64)
    for other in (np.int32, np.float64):
        diffs = compare_arrays("x", a, a.astype(other), locate=_nowhere, versus="test")
        assert [(d.region, d.expected, d.actual) for d in diffs] == [("dtype", "int64", np.dtype(other).name)]


def test_a_float_difference_shows_the_values_and_their_bits():
    """Floats are compared by their bits; a report shows what the bits stand for (``-0.0`` and
    ``0.0`` apart, a NaN as NaN), and the bits; a sentinel stays named as one, as the bits the
    array holds."""
    e = np.array([0.1, 0.0, 1.0, 2.0], dtype=np.float32)
    a = np.array([1.0, -0.0, np.nan, 2.0], dtype=np.float32)
    lines = [d.describe() for d in compare_arrays("x", e, a, locate=_nowhere, versus="test")]
    assert lines == [
        "x[0] (-): expected 0.1 (bits 0x3dcccccd), actual 1.0 (bits 0x3f800000)  [vs test]",
        "x[1] (-): expected 0.0 (bits 0x00000000), actual -0.0 (bits 0x80000000)  [vs test]",
        "x[2] (-): expected 1.0 (bits 0x3f800000), actual nan (bits 0x7fc00000)  [vs test]",
    ]
    d = compare_arrays("y", np.array([0.25]), np.array([1.0]), locate=_nowhere, versus="test")[0]
    assert d.describe() == "y[0] (-): expected 0.25 (bits 0x3fd0000000000000), actual 1.0 (bits 0x3ff0000000000000)  [vs test]"
    s = int(np.array([7.0], np.float32).view(np.int32)[0])
    d = compare_arrays("z", np.array([7.0], np.float32), np.array([3.0], np.float32), locate=_nowhere, versus="test",
                       sentinel=s)[0]
    assert d.describe() == ("z[0] (-): expected untouched (the sentinel fill, bits 0x40e00000), actual 3.0 "
                            "(bits 0x40400000)  [vs test]")


def test_the_sentinel_is_never_a_value_the_oracle_wrote():
    """Whatever the oracle writes, the sentinel is another value (so a missing write shows);
    bool buffers use a byte that is neither False nor True."""
    candidates = list(sentinel_candidates(np.int32))
    for k in range(len(candidates)):
        written = np.array(candidates[:k] + [0, 1, -1], dtype=np.int64)
        s = pick_sentinel(np.int32, written)
        assert s not in written.tolist() and s == candidates[k]
    assert BOOL_SENTINEL not in (0, 1) and pick_sentinel(np.bool_, np.array([True, False])) == BOOL_SENTINEL


def test_guard_bands_are_as_long_as_the_buffer():
    assert guard_for(1) >= 64 and guard_for(10_000) >= 10_000


# -- through Target.check: a kernel with one defect -------------------------------------------


class Defective(PE.HandWorkedKernel):
    """The hand-worked outputs with one defect in output ``array``: ``skip`` leaves element
    ``index`` unwritten; ``past``/``before`` also write ``value`` just past the end of the
    buffer, or just before its start."""

    def __init__(self, pinned, parameters, array: str, defect: str, index: int = 0, value: int = 7) -> None:  # noqa: ANN001
        super().__init__(pinned, parameters)
        self.array, self.defect, self.index, self.value = array, defect, index, value
        if defect == "skip":
            dtype, values = pinned.expect[array]
            values = list(values)
            values[index] = PE.U
            self.pinned = type(pinned)(**{**pinned.__dict__, "expect": {**pinned.expect, array: (dtype, values)}})

    def __getitem__(self, grid):  # noqa: ANN001, ANN204
        write = super().__getitem__(grid)

        def launch(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            import torch

            write(*args, **kwargs)
            if self.defect in ("past", "before"):
                bound = dict(zip(self.parameters, args, strict=False)) | kwargs
                t = bound[self.pinned.params.get(self.array) or f"{self.array}_ptr"]
                offset = t.storage_offset() + (t.numel() if self.defect == "past" else -1)
                torch.as_strided(t, (1,), (1,), offset)[0] = self.value

        return launch


def _check(pid: str, **defect):  # noqa: ANN202
    p = BY_ID[pid]
    target = TARGETS[p.case.kernel]
    outcome = target.check(p.case, Defective(p, target.parameters, **defect), "cpu")
    assert not outcome.oracle_disagreements and outcome.crash is None, (outcome.crash, outcome.oracle_disagreements)
    return outcome.differences


NEXT = "eagle_prepare_next_token_padded_kernel-prefix_rows_and_a_discarded_one"
COPY = "copy_and_expand_eagle_inputs_kernel-shift_on_p3_parallel_slots"


@pytest.mark.parametrize("index", [0, 1, 2], ids=["first", "middle", "last"])
def test_an_element_never_written_is_reported(index):
    """A kernel that leaves one element of its output unwritten (the first request's, the
    last's: it never processes the last request) is reported there, as never written."""
    diffs = _check(NEXT, array="next_token_ids", defect="skip", index=index)
    assert [(d.array, d.index, d.request) for d in diffs] == [("next_token_ids", index, index)], diffs
    assert "never written" in diffs[0].describe()


def test_an_unwritten_false_mask_element_is_reported():
    """A mask element the contract writes as False, left unwritten: its sentinel byte is neither
    False nor True, so it shows."""
    diffs = _check(COPY, array="out_is_masked_token_mask", defect="skip", index=0)
    assert [(d.array, d.index) for d in diffs] == [("out_is_masked_token_mask", 0)], diffs
    assert diffs[0].actual == BOOL_SENTINEL and "never written" in diffs[0].describe()


@pytest.mark.parametrize("where", ["past", "before"])
def test_a_write_outside_the_buffer_lands_in_a_guard_band(where):
    diffs = _check(NEXT, array="valid_sampled_tokens_count", defect=where)
    n = TARGETS[BY_ID[NEXT].case.kernel].output_specs(BY_ID[NEXT].case)["valid_sampled_tokens_count"][1][0]
    index = n if where == "past" else -1
    assert [(d.array, d.index, d.actual) for d in diffs] == [("valid_sampled_tokens_count", index, 7)], diffs
    assert diffs[0].region == ("guard band past the buffer" if where == "past" else "guard band before the buffer")


def test_a_result_of_another_dtype_is_reported():
    """A Python function that returns the right values in another dtype."""
    import torch

    p = BY_ID["compute_new_slot_mapping-one_request_block_size_1"]
    right = p.function

    def int32_result(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        return right(*args, **kwargs).to(torch.int32)

    outcome = TARGETS[p.case.kernel].check(p.case, int32_result, "cpu")
    assert [d.region.split(" ")[-1] for d in outcome.differences] == ["(dtype)"], outcome.differences


def test_a_field_of_another_dtype_is_reported():
    """A Python function whose result holds a field of the right values in another dtype."""
    import dataclasses

    import torch

    p = BY_ID["extend_all_queries_by_N-two_requests_by_2"]
    right = p.function

    def int64_seq_lens(*args):  # noqa: ANN002, ANN202
        out = right(*args)
        return dataclasses.replace(out, seq_lens=out.seq_lens.to(torch.int64))

    outcome = TARGETS[p.case.kernel].check(p.case, int64_seq_lens, "cpu")
    assert [(d.array, d.expected, d.actual) for d in outcome.differences] == [("seq_lens", "int32", "int64")], outcome.differences
