"""Float arrays in cases (the rejection sampler's tables, uniforms, noise): corpus files keep
every value of a float32/float64 array, and guarded buffers compare floats by their bits."""

from __future__ import annotations

import numpy as np
import pytest

from eaglefuzz.harness.checking.corpus import decode, encode
from eaglefuzz.harness.core.buffers import filled, raw
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.core.compare import compare_arrays
from eaglefuzz.harness.core.errors import UserError

SPECIAL = [0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 0.1, 1 / 3, 3.4028235e38, 2.0**-149]


def _case(arrays: dict) -> Case:
    return Case("expand_kernel", arrays, {"replace_from": 0, "replace_to": 1, "num_tokens": 0}, {})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_arrays_round_trip_bit_for_bit(dtype):
    small = np.array(SPECIAL, dtype=dtype)
    big = np.random.default_rng(0).random((3, 2000)).astype(dtype)  # past SHORTEST_UP_TO: exact values
    text = encode(_case({"a": small, "b": big}), tier="production")
    back = decode(text, "t.json", contract=False).case
    for name, arr in (("a", small), ("b", big)):
        assert back.arrays[name].dtype == arr.dtype
        assert back.arrays[name].tobytes() == arr.tobytes(), name  # -0.0, subnormals, infinities kept


def test_nan_is_written_as_a_string_and_read_back():
    a = np.array([np.nan, 1.0], dtype=np.float32)
    text = encode(_case({"a": a}), tier="production")
    assert '"nan"' in text
    back = decode(text, "t.json", contract=False).case.arrays["a"]
    assert np.isnan(back[0]) and back[1] == 1.0


def test_a_float_array_with_a_bad_element_is_one_line():
    a = np.array([1.0], dtype=np.float32)
    text = encode(_case({"a": a}), tier="production").replace("[1.0]", '["one"]')
    with pytest.raises(UserError, match=r"t\.json: arrays\.a\.data\[0\]: a float32 array holds numbers"):
        decode(text, "t.json", contract=False)


def test_floats_compare_by_bits():
    zero, neg = np.array([0.0], dtype=np.float32), np.array([-0.0], dtype=np.float32)
    assert compare_arrays("x", zero, neg, locate=lambda n, i: (None, ""), versus="t")  # 0.0 == -0.0 as floats, but not bit for bit
    nan = np.array([np.nan], dtype=np.float64)
    assert not compare_arrays("x", nan, nan.copy(), locate=lambda n, i: (None, ""), versus="t")  # the same NaN is no difference
    f = filled(np.dtype(np.float32), (2,), 0x4B4B4B4B)
    assert raw(f).tolist() == [0x4B4B4B4B, 0x4B4B4B4B]
