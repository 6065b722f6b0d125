"""Bounded float writes in the device buffers (``Arenas``, ``BatchArenas``): an element the
contract fixes only within a bound passes within it and nowhere else, an element of bound 0 only
bit for bit, and a bounded output the kernel never writes is a difference (it holds the sentinel,
not its expected value with a bit flipped, which would lie within its bound); the band before
a buffer's first array, which a write one table's length before it lands in; and the cases'
matrices of a few shapes, laid out a shape at a time and viewed by one split a shape."""

from __future__ import annotations

import pytest
import torch

from eaglefuzz.harness.targetkit.device import Arenas, DeviceCase
from eaglefuzz.harness.targetkit.device_batch import BatchArenas, DeviceBatch

EXPECTED = torch.tensor([1.0, -2.5, 3.0, 0.125], dtype=torch.float32)
BOUND = torch.tensor([1e-3, 1e-3, 0.0, 1e-3], dtype=torch.float64)


def _batch_views(bound: torch.Tensor | None, inplace: bool = False) -> tuple[object, list[torch.Tensor]]:
    """Two cases of one float output ``y`` (or an input ``x`` updated in place) of 2 elements
    each, the expected values :data:`EXPECTED` (with :data:`BOUND`)."""
    name = "x" if inplace else "y"
    cat = {"x": torch.zeros(4, dtype=torch.float32)} if inplace else {"i": torch.zeros(2, dtype=torch.int32)}
    lengths = {"x": [2, 2]} if inplace else {"i": [1, 1]}
    shapes = {n: [(v,) for v in lengths[n]] for n in cat}
    outputs = {} if inplace else {"y": (torch.float32, [2, 2])}
    b = DeviceBatch(cat, lengths, shapes, {}, {}, outputs, [{}, {}], inout=("x",) if inplace else ())
    index = torch.arange(4)
    writes = {name: (index, EXPECTED) if bound is None else (index, EXPECTED, bound)}
    arenas = BatchArenas(b, writes, "cpu")
    return arenas, [arenas.views[k][name] for k in range(2)]


def _write(views: list[torch.Tensor], values: torch.Tensor) -> None:
    views[0].copy_(values[:2])
    views[1].copy_(values[2:])


@pytest.mark.parametrize("inplace", [False, True])
def test_a_batch_passes_bounded_values_within_their_bounds_and_no_others(inplace):
    arenas, views = _batch_views(BOUND, inplace)
    near = EXPECTED + torch.tensor([5e-4, -9e-4, 0.0, 1e-4])
    _write(views, near)
    assert int(arenas.mismatch()) == 0
    far = near.clone()
    far[1] = EXPECTED[1] + 2e-3  # past its bound
    _write(views, far)
    assert int(arenas.mismatch()) == 1
    exact = near.clone()
    exact[2] = torch.nextafter(EXPECTED[2], torch.tensor(9.0))  # bound 0: one ulp off is a difference
    _write(views, exact)
    assert int(arenas.mismatch()) == 1
    nan = near.clone()
    nan[3] = float("nan")
    _write(views, nan)
    assert int(arenas.mismatch()) == 1


def test_a_bounded_output_left_unwritten_is_a_difference():
    arenas, views = _batch_views(BOUND)
    assert int(arenas.mismatch()) == 4  # every element holds its pre-fill, none its expected value
    _write(views, EXPECTED)
    assert int(arenas.mismatch()) == 0
    views[0][:1].copy_(torch.full((1,), -1515870811, dtype=torch.int32).view(torch.float32))  # the sentinel again
    assert int(arenas.mismatch()) == 1


def test_without_bounds_a_batch_is_bit_for_bit():
    arenas, views = _batch_views(None)
    _write(views, EXPECTED + torch.tensor([0.0, 0.0, 0.0, 1e-7]))
    assert int(arenas.mismatch()) == 1
    _write(views, EXPECTED)
    assert int(arenas.mismatch()) == 0


def test_one_case_alone_compares_within_bounds_as_its_batch_does():
    dc = DeviceCase({"i": torch.zeros(1, dtype=torch.int32)}, {"y": (torch.float32, 4)}, {})
    arenas = Arenas(dc, {"y": (torch.arange(4), EXPECTED, BOUND)}, "cpu")
    assert int(arenas.mismatch()) == 4
    arenas.views["y"].copy_(EXPECTED + torch.tensor([5e-4, 0.0, 0.0, -5e-4]))
    assert int(arenas.mismatch()) == 0
    arenas.views["y"][2] = EXPECTED[2] + 1e-6
    assert int(arenas.mismatch()) == 1


@pytest.mark.parametrize("batched", [False, True])
def test_a_write_one_table_before_the_first_array_lands_in_the_buffer(batched):
    """A kernel writing a row ``-1`` of a table (one table's length before it) writes into the
    buffer's leading band, which the comparison sees, never outside the buffer."""
    n = 4096  # far more than the guard band between arrays
    table = torch.zeros(n, dtype=torch.float32)
    if batched:
        b = DeviceBatch({"t": table}, {"t": [n]}, {"t": [(n,)]}, {}, {}, {}, [{}], inout=("t",))
        arenas = BatchArenas(b, {}, "cpu")
        view = arenas.views[0]["t"]
    else:
        arenas = Arenas(DeviceCase({"t": table}, {}, {}), {}, "cpu")
        view = arenas.views["t"]
    assert view.storage_offset() >= n
    torch.as_strided(view, (n,), (1,), view.storage_offset() - n).fill_(1.0)
    assert int(arenas.mismatch()) == n


def test_cases_of_a_few_shapes_are_their_arrays_each_between_guard_bands():
    """A batch whose cases hold ``[R, W]`` and ``[R, K, V]`` arrays of a few shapes each (and a
    vector, and outputs): every case's view is its own array (shape, dtype, values), starts
    16-byte aligned, overlaps no other, and is made without a view a case (one split a shape);
    a write one element past any case's array, or one before it, is a difference."""
    from torch.utils._python_dispatch import TorchDispatchMode

    g = torch.Generator().manual_seed(0)
    k = 24
    R = torch.randint(0, 5, (k,), generator=g).tolist()
    W = [(2, 3, 5)[j % 3] for j in range(k)]
    KV = [((2, 4), (3, 1))[j % 2] for j in range(k)]
    arrays = {"m": [torch.randint(-9, 9, (r, w), generator=g, dtype=torch.int64) for r, w in zip(R, W, strict=True)],
              "c": [torch.randn((r, *kv), generator=g) for r, kv in zip(R, KV, strict=True)],
              "v": [torch.randint(0, 9, (r + 1,), generator=g, dtype=torch.int32) for r in R]}
    cat = {n: torch.cat([a.reshape(-1) for a in xs]) for n, xs in arrays.items()}
    lengths = {n: [a.numel() for a in xs] for n, xs in arrays.items()}
    shapes = {n: [tuple(a.shape) for a in xs] for n, xs in arrays.items()}
    b = DeviceBatch(cat, lengths, shapes, {}, {}, {"o": (torch.float32, [r * 2 for r in R])}, [{}] * k)

    class Views(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            Views.n += func.__name__.startswith("view")
            return func(*args, **(kwargs or {}))

    with Views():
        arenas = BatchArenas(b, {"o": (torch.arange(0), torch.zeros(0))}, "cpu")
    assert Views.n < k  # not a view a case
    spans = []
    for j, views in enumerate(arenas.views):
        for n, xs in arrays.items():
            v = views[n]
            assert v.shape == xs[j].shape and v.dtype == xs[j].dtype and torch.equal(v, xs[j]), (n, j)
            assert v.is_contiguous() and (v.data_ptr() % 16 == 0 or v.numel() == 0)
            if v.numel():
                spans.append((v.untyped_storage().data_ptr(), v.data_ptr(), v.data_ptr() + v.numel() * v.element_size()))
    spans.sort()
    for (sa, _, a1), (sb, b0, _) in zip(spans, spans[1:], strict=False):
        assert sa != sb or a1 <= b0  # no two cases' arrays overlap
    assert int(arenas.mismatch()) == 0
    for j in (0, 7, k - 1):
        for n in arrays:
            v = arenas.views[j][n]
            flat = torch.as_strided(v, (v.numel() + 2,), (1,), v.storage_offset() - 1)
            for at in (0, v.numel() + 1):  # one before, one past
                keep = flat[at].clone()
                flat[at] = 1
                assert int(arenas.mismatch()) == 1, (n, j, at)
                flat[at] = keep


def test_an_exact_output_left_unwritten_is_a_difference_even_where_its_value_is_the_sentinel():
    """Every written element of an output is pre-filled with its expected bits, the lowest one
    flipped: an element the kernel skips differs even where its expected value is the buffer's
    sentinel (written in shuffled order, so that each lands by its own case's shift)."""
    from eaglefuzz.harness.targetkit.device import _SENTINEL

    s = _SENTINEL[torch.int32]
    b = DeviceBatch({"i": torch.zeros(2, dtype=torch.int32)}, {"i": [1, 1]}, {"i": [(1,), (1,)]}, {}, {},
                    {"y": (torch.int32, [2, 2])}, [{}, {}])
    want = torch.tensor([s, 7, s, -1], dtype=torch.int32)
    order = torch.tensor([3, 0, 1, 2])
    arenas = BatchArenas(b, {"y": (order, want[order])}, "cpu")
    assert int(arenas.mismatch()) == 4  # nothing written: every element differs
    for k in range(2):
        arenas.views[k]["y"].copy_(want[2 * k : 2 * k + 2])
    assert int(arenas.mismatch()) == 0
    arenas.views[1]["y"][0] = s ^ 1
    assert int(arenas.mismatch()) == 1


def test_one_value_written_to_many_elements_is_each_ones_expected_value():
    """An oracle's write of one value (a 0-d tensor) to several elements, as torch's indexing
    broadcasts it: each element expects it, and each is pre-filled with it, one bit flipped."""
    b = DeviceBatch({"i": torch.zeros(2, dtype=torch.int32)}, {"i": [1, 1]}, {"i": [(1,), (1,)]}, {}, {},
                    {"y": (torch.int32, [2, 2])}, [{}, {}])
    arenas = BatchArenas(b, {"y": (torch.tensor([3, 0, 1]), torch.tensor(9, dtype=torch.int32))}, "cpu")
    from eaglefuzz.harness.targetkit.device import _SENTINEL

    ys = [arenas.views[k]["y"] for k in range(2)]
    assert [v.tolist() for v in ys] == [[8, 8], [_SENTINEL[torch.int32], 8]]  # case 1's first: not written
    for v in ys:
        v.fill_(9)
    assert int(arenas.mismatch()) == 1  # the element nothing writes holds the sentinel: 9 differs


def test_a_large_input_has_the_band_an_int32_wrap_reaches_only_where_its_own_indices_can_wrap(monkeypatch):
    """A large input alone in its buffer (``_Big``) has as much poison before it as an int32
    wrap reaches only where its own flat indices pass the flat limit; any other has the band of
    any array (one array's length, at most ``BIG``), checked like the rest of its buffer."""
    from eaglefuzz.harness.targetkit.device import BIG, GUARD, WRAP_GUARD, _Big, band_before, lead

    monkeypatch.delenv("EAGLEFUZZ_FLAT_LIMIT", raising=False)
    assert band_before(1 << 29) == BIG  # an ordinary case's 2 GiB table: 2**26 elements, not 2**29
    assert band_before(1 << 31) == BIG  # its last index, 2**31 - 1, fits an int32
    assert band_before((1 << 31) + 1) == (1 << 31) + 1 and band_before(5 << 29) == WRAP_GUARD
    t = torch.ones(BIG + 4096, dtype=torch.bool)
    b = _Big(t, "cpu")
    assert b.before == BIG and b.full.numel() == BIG + t.numel() + GUARD
    assert int(b.mismatch()) == 0
    b.full[0] = 1  # a write the band's length before the input
    assert int(b.mismatch()) == 1
    b.full[0] = b.full[1]
    b.view[-1] = False  # the input changed
    assert int(b.mismatch()) == 1
    del b, t
    monkeypatch.setenv("EAGLEFUZZ_FLAT_LIMIT", str(1 << 16))  # a test's limit: the wrap guard in proportion
    assert band_before(1 << 16) == lead(1 << 16) == 1 << 16
    assert band_before((1 << 16) + 1) == (1 << 16) + 1 and band_before(1 << 20) == (1 << 16) + 32
