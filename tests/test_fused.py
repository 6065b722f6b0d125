"""The sampling oracles' fused lane noise (``harness/targetkit/fused.py``): the plain function off a
CUDA device, the probe that admits a compiled one only when it is the plain one (its uniform and
float64 path bit for bit, its float32 path within a few float64 steps), the fallback (with a
warning) when compiling fails or differs or a compiled function later fails to run, and, on a GPU,
the compiled noise itself; the same for the copy-and-expand oracles' compiled parts (on by
default, off with ``EAGLEFUZZ_FUSED_SLOTS=0``)."""

from __future__ import annotations

import sys
import warnings

import pytest
import torch

from eaglefuzz.harness.targetkit import fused
from eaglefuzz.oracles import tensor_ops_v2


@pytest.fixture
def fresh():
    """``fused``'s cache of compiled functions emptied before and after the test."""
    fused._compiled.cache_clear()
    yield fused
    fused._compiled.cache_clear()


def test_off_a_cuda_device_or_switched_off_the_noise_is_the_plain_function(monkeypatch):
    monkeypatch.setenv(fused.SWITCH, "1")
    assert fused.lane_noise_on("cpu") is tensor_ops_v2.lane_noise
    assert fused.lane_noise_on(torch.device("cpu")) is tensor_ops_v2.lane_noise
    for off in ("0", "no", "false", " OFF"):
        monkeypatch.setenv(fused.SWITCH, off)
        assert not fused.fused_noise_on()
        assert fused.lane_noise_on("cuda") is tensor_ops_v2.lane_noise  # no GPU needed: nothing compiled
        assert fused.lane_noise_on("cuda:0") is tensor_ops_v2.lane_noise
    for on in ("1", "true", "YES ", "", " "):  # unset or empty: on, its default (measured: RESULTS.md, session 31)
        monkeypatch.setenv(fused.SWITCH, on)
        assert fused.fused_noise_on()
    monkeypatch.delenv(fused.SWITCH)
    assert fused.fused_noise_on()
    monkeypatch.setenv(fused.SWITCH, "2")
    with pytest.warns(UserWarning, match=rf"{fused.SWITCH}='2' is none of .* on, its default"):
        assert fused.fused_noise_on()


def _off_in_one_element(path: str, which: int, by: float = 0.0):
    """The plain noise with one element of the noise (``which`` 0) or of its bound (1) moved by
    ``by`` relative (``0``: by one float64 step), on the float64 path (``path`` ``"fp64"``) or the
    float32 one."""
    def fn(seed, pos, lanes, fp64):
        out = list(tensor_ops_v2.lane_noise(seed, pos, lanes, fp64))
        if fp64 == (path == "fp64"):
            x = out[which].clone()
            v = x[-1, -1]
            x[-1, -1] = v + by * v.abs().clamp(min=1.0) if by else torch.nextafter(v, torch.tensor(float("inf"), dtype=x.dtype))
            out[which] = x
        return tuple(out)
    return fn


@pytest.mark.parametrize("which", [0, 1])
def test_the_probe_admits_the_plain_noise_and_rejects_the_float64_path_one_step_off(which):
    assert fused.same_noise(tensor_ops_v2.lane_noise, "cpu")
    assert not fused.same_noise(_off_in_one_element("fp64", which), "cpu")


@pytest.mark.parametrize("which", [0, 1])
def test_the_float32_paths_noise_may_lie_a_few_float64_steps_off_and_no_further(which):
    """A float32-path noise one float64 step off, or half :data:`~fused.NEAR32` off, is admitted
    (the path's bound is some ``2**31`` times wider); twice that off is not."""
    assert fused.same_noise(_off_in_one_element("fp32", which), "cpu")
    assert fused.same_noise(_off_in_one_element("fp32", which, fused.NEAR32 / 2), "cpu")
    assert not fused.same_noise(_off_in_one_element("fp32", which, 2 * fused.NEAR32), "cpu")


def test_the_probe_rejects_a_uniform_one_float32_step_off():
    """A compiled uniform whose float32 rounding is lost (the float64 value kept) is rejected, bit
    for bit, even where the noise it gives passes."""
    def unrounded(seed, pos, lanes, fp64):
        if fp64:
            return tensor_ops_v2.lane_uniform(seed, pos, lanes, fp64)
        h = tensor_ops_v2.murmur3_hash32(seed.to(torch.int64)[:, None], pos.to(torch.int64)[:, None], lanes[None, :])
        return (h.to(torch.float64) + 0.5) * 2.0**-32

    assert not fused.same_noise(tensor_ops_v2.lane_noise, "cpu", unrounded)
    assert fused.same_noise(tensor_ops_v2.lane_noise, "cpu", tensor_ops_v2.lane_uniform)


def test_the_probe_rejects_another_hash():
    """A noise of another seed word (the drafter's column in the high word dropped) differs on the
    probe, whose seeds include one with a high word."""
    def low_word_only(seed, pos, lanes, fp64):
        return tensor_ops_v2.lane_noise(seed & 0xFFFFFFFF, pos, lanes, fp64)

    assert not fused.same_noise(low_word_only, "cpu")


def test_the_two_kernels_compose_to_the_plain_noise(fresh, monkeypatch):
    """The compiled noise's composition (the uniform, then its noise), each part as written
    (``torch.compile`` left out), is the plain noise bit for bit on the probe."""
    monkeypatch.setattr(fused.torch, "compile", lambda fn, **kw: fn)
    fn, uniform = fused._two_kernels()
    assert fused.same_noise(fn, "cpu", uniform)
    seed, pos, lanes = fused._probe("cpu")
    for fp64 in (False, True):
        for rows, n in ((slice(None), slice(None)), (slice(0, 1), slice(None)), (slice(None), slice(5, 6)),
                        (slice(2, 3), slice(0, 1)), (slice(0, 0), slice(None))):
            a = (seed[rows], pos[rows].to(torch.int32 if fp64 else torch.int64), lanes[n], fp64)
            assert torch.equal(uniform(*a), tensor_ops_v2.lane_uniform(*a))
            got, want = fn(*a), tensor_ops_v2.lane_noise(*a)
            assert all(torch.equal(g, w) and g.is_contiguous() for g, w in zip(got, want, strict=True))


def test_the_noise_is_compiled_once_per_path_and_part_whatever_the_batches(fresh):
    """``torch._dynamo`` traces each of the four compiled functions (the uniform and the noise of
    each path) once, over batches of many rows, of one row, of one lane, of as many rows as lanes,
    with int32 positions and with a strided seed, on both paths: no guard of a batch's size, dtype
    or path fails, so no recompilation comes near dynamo's limit (it met it on an H100 when the
    path was an argument and a row a size). The traces run eager: the values are the plain noise's."""
    traced = []

    def counting(gm, example_inputs):  # noqa: ANN001, ANN202 - a torch.compile backend
        traced.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        fn, uniform = fused._two_kernels(backend=counting)
        seed, pos, lanes = fused._probe("cpu")
        wide = torch.stack([seed, seed], dim=1)[:, 0]  # a seed with a stride of 2
        batches = [(seed, pos, lanes), (seed[:1], pos[:1], lanes), (seed, pos, lanes[:1]), (seed[:3], pos[:3], lanes[:3]),
                   (seed[:16], pos[:16].to(torch.int32), lanes[:16]), (wide, pos, lanes[7:300]), (seed[:2], pos[:2], lanes[:2])]
        for fp64 in (True, False):
            for a in batches:
                got, want = fn(*a, fp64), tensor_ops_v2.lane_noise(*a, fp64)
                assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
                assert torch.equal(uniform(*a, fp64), tensor_ops_v2.lane_uniform(*a, fp64))
        assert len(traced) == 4
    finally:
        torch._dynamo.reset()


def test_a_compiled_noise_that_differs_is_not_used(fresh, monkeypatch):
    monkeypatch.setattr(fused, "_two_kernels", lambda: (_off_in_one_element("fp64", 0), tensor_ops_v2.lane_uniform))
    with pytest.warns(UserWarning, match=r"noise runs unfused on cpu \(its noise differs"):
        got = fresh._compiled("cpu")
    assert got is tensor_ops_v2.lane_noise


def test_a_noise_that_cannot_be_compiled_is_the_plain_one(fresh, monkeypatch):
    def broken(fn, **kw):
        raise RuntimeError("no compiler here\nmore")

    monkeypatch.setattr(fused.torch, "compile", broken)
    with pytest.warns(UserWarning, match=r"unfused on cpu \(RuntimeError: no compiler here\)"):
        assert fresh._compiled("cpu") is tensor_ops_v2.lane_noise


def test_a_compiled_noise_equal_to_the_plain_one_is_used(fresh, monkeypatch):
    same = lambda seed, pos, lanes, fp64: tensor_ops_v2.lane_noise(seed, pos, lanes, fp64)  # noqa: E731
    monkeypatch.setattr(fused, "_two_kernels", lambda: (same, tensor_ops_v2.lane_uniform))
    assert fresh._compiled("cpu").compiled is same


def test_a_compiled_part_that_fails_at_run_time_gives_way_to_the_plain_one_for_good():
    """A compiled function that raises later (the recompilation limit under ``fullgraph=True``, as
    the lane noise met on an H100) is replaced by the plain function for that call and every later
    one, with one warning; a CUDA error or a lack of memory is raised as it is."""
    calls = []

    def plain(x):
        calls.append("plain")
        return x + 1

    def compiled(x):
        calls.append("compiled")
        if x > 1:
            raise RuntimeError("Hard failure due to fullgraph=True\nmore")
        return x + 1

    g = fused.Guarded("a part", "cuda:0", compiled, plain)
    assert g(1) == 2 and calls == ["compiled"]
    with pytest.warns(UserWarning, match=r"a part runs unfused on cuda:0 from now on \(RuntimeError: Hard failure"):
        assert g(2) == 3
    assert calls == ["compiled", "compiled", "plain"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert g(1) == 2 and g(5) == 6
    assert calls[3:] == ["plain", "plain"]
    for fault in (RuntimeError("CUDA error: an illegal memory access was encountered"), torch.OutOfMemoryError("out")):
        def failing(x, fault=fault):
            raise fault
        g = fused.Guarded("a part", "cuda:0", failing, plain)
        with pytest.raises(type(fault)):
            g(1)
        assert g.fn is failing


def test_on_a_gpu_the_noise_is_compiled_and_the_plain_one(needs, fresh, monkeypatch):
    """On a GPU, switched on, the compiled noise is used (no warning), and on rows of random seeds and
    positions, a vocabulary of 151936 lanes, it is the plain noise, bit for bit on the float64
    path, within :data:`~fused.NEAR32` on the float32 one."""
    needs.gpu("the compiled lane noise")
    import warnings

    monkeypatch.setenv(fused.SWITCH, "1")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn = fresh.lane_noise_on("cuda")
    assert not [str(w.message) for w in seen if "unfused" in str(w.message)]
    assert fn is not tensor_ops_v2.lane_noise
    gen = torch.Generator(device="cuda").manual_seed(3)
    seed = torch.randint(-(2**63), 2**63 - 1, (37,), generator=gen, device="cuda", dtype=torch.int64)
    pos = torch.randint(0, 2**31, (37,), generator=gen, device="cuda", dtype=torch.int64)
    lanes = torch.arange(151936, device="cuda", dtype=torch.int64)
    for fp64 in (False, True):
        for got, want in zip(fn(seed, pos, lanes, fp64), tensor_ops_v2.lane_noise(seed, pos, lanes, fp64), strict=True):
            assert fused._near(got, want, 0.0 if fp64 else fused.NEAR32)


# --- integer oracle parts compiled whole (fused.SLOTS, fused.CONTEXT) -----------------------------

PIECES = {"SLOTS": "copy_and_expand_eagle_inputs_kernel", "CONTEXT": "copy_and_expand_dflash_inputs_kernel",
          "WINNERS": "sample_recovered_tokens_kernel"}
CHANGED = {"SLOTS": 1, "CONTEXT": 1, "WINNERS": 0}
DEFAULT_ON = {"SLOTS": True, "CONTEXT": True, "WINNERS": False}
"""The output of each piece the oracle tests change (:func:`_off`)."""


def _dense(name: str, monkeypatch) -> None:  # noqa: ANN001
    """For :data:`~fused.WINNERS`: every table epoch of its target dense (the piece computes
    winners over whole rows; a top-k epoch's are found on its support), the target's kept
    tables forgotten now and after the test."""
    if name != "WINNERS":
        return
    from eaglefuzz.harness.checking.device_mode import device_targets

    dt = device_targets()[PIECES[name]]
    monkeypatch.setattr(sys.modules[type(dt).__module__], "TOPK_SHARE", 0.0)
    monkeypatch.setattr(dt, "_epoch", (None, None))  # what it kept before, back after the test


@pytest.fixture
def fresh_pieces():
    """``fused``'s cache of compiled pieces emptied before and after the test."""
    fused._compiled_piece.cache_clear()
    yield fused
    fused._compiled_piece.cache_clear()


@pytest.mark.parametrize("name", PIECES)
def test_off_a_cuda_device_or_switched_off_a_piece_is_its_plain_function(name, monkeypatch):
    piece = getattr(fused, name)
    monkeypatch.setenv(piece.switch, "1")
    assert fused.piece_on(piece, "cpu") is piece.plain
    for off in ("0", "no", "false", "off"):
        monkeypatch.setenv(piece.switch, off)
        assert not fused.switched_on(piece.switch, piece.default)
        assert fused.piece_on(piece, "cuda") is piece.plain  # no GPU needed: nothing compiled
    for on in ("true", "1", " YES ", "on"):
        monkeypatch.setenv(piece.switch, on)
        assert fused.switched_on(piece.switch)
    # on where the switch is unset or empty where a GPU measured it (RESULTS.md, session 29), else off
    assert piece.default == DEFAULT_ON[name]
    for unset in ("", " "):
        monkeypatch.setenv(piece.switch, unset)
        assert fused.switched_on(piece.switch, piece.default) == piece.default and not fused.switched_on(piece.switch)
    monkeypatch.delenv(piece.switch)
    assert fused.switched_on(piece.switch, piece.default) == piece.default
    if not piece.default:
        assert fused.piece_on(piece, "cuda") is piece.plain  # no GPU needed: nothing compiled
    word = "on" if piece.default else "off"
    for other in ("2", "enabled"):  # neither on nor off: the default, and one warning saying so
        monkeypatch.setenv(piece.switch, other)
        with pytest.warns(UserWarning, match=rf"{piece.switch}='{other}' is none of 1/true/yes/on .* {word}, its default"):
            assert fused.switched_on(piece.switch, piece.default) == piece.default
    monkeypatch.delenv(fused.SWITCH, raising=False)
    assert fused.fused_noise_on()  # the noise, under its own switch, is on by default too
    monkeypatch.setenv(piece.switch, "0")
    assert fused.fused_noise_on()  # and the slots' switch does not turn it off


def _off(piece, which: int, how: str):
    """``piece``'s plain function with output ``which`` changed: one element moved by one
    (``"value"``), or the whole output in another dtype of the same values (``"dtype"``)."""
    def fn(*args):
        out = list(piece.plain(*args))
        x = out[which]
        if how == "dtype":
            out[which] = x.to(torch.int64 if x.dtype != torch.int64 else torch.int32)
        else:
            x = x.clone()
            x[-1] = ~x[-1] if x.dtype == torch.bool else x[-1] + 1
            out[which] = x
        return tuple(out)
    return fn


@pytest.mark.parametrize(("name", "which"), [("SLOTS", w) for w in range(5)] + [("CONTEXT", w) for w in range(2)]
                         + [("WINNERS", 0)])
@pytest.mark.parametrize("how", ["value", "dtype"])
def test_the_probe_admits_the_plain_function_and_rejects_any_other_output(name, which, how):
    """Each output one element off, or in another dtype, is rejected; the plain function is admitted."""
    piece = getattr(fused, name)
    assert fused.same_outputs(piece, piece.plain, "cpu")
    assert not fused.same_outputs(piece, _off(piece, which, how), "cpu")


def test_the_slots_probe_meets_every_kind_of_slot_and_the_int32_and_int64_limits():
    """The probe's batches hold valid slots (some reading a clamped id), bonus, parallel-drafting and
    padding slots, an empty request, positions and places past ``2**31`` and ids at both int32
    limits: a compiled function that got any of them wrong could not pass unseen."""
    from eaglefuzz.oracles import tensor_ops

    table, ids, ends, target, total = fused._slots_probe("cpu", 37)
    dest, out_ids, pos, rejected, parallel = tensor_ops.expand_slots(table, ids, ends, target, total)
    g = torch.arange(total)
    bonus, _, shift, last, _, _ = table[:, torch.searchsorted(ends, g, right=True)]
    assert (g < bonus).any() and (g == bonus).any() and parallel.any() and rejected.any()
    assert ((g < bonus) & (g + shift > last)).any()  # a valid slot's read clamped
    assert bool((ends[1:] == ends[:-1]).any())  # an empty request
    assert pos.max() >= 2**31 and dest.max() >= 2**31
    assert {-(2**31), 2**31 - 1} <= set(out_ids.tolist())


def test_the_context_probe_meets_clamped_columns_every_block_size_and_the_int32_limit():
    from eaglefuzz.oracles import tensor_ops

    per_request, ends, positions, table, total = fused._context_probe("cpu", 37)
    ctx, slots = tensor_ops.dflash_context(per_request, ends, positions, table, total)
    start, last, size, _ = per_request[:, torch.searchsorted(ends, torch.arange(total), right=True)]
    d = positions // size
    assert (d > last).any() and (d < last).any()  # clamped to the last column, and not
    assert positions.max() >= 2**31 and ctx.max() >= 2**31 and slots.max() >= 2**31
    assert len(set(per_request[2].tolist())) >= 6 and bool((ends[1:] == ends[:-1]).any())
    assert int(table.max()) == 2**31 - 1


def test_the_winners_probe_meets_ties_empty_residuals_the_last_id_and_both_noise_dtypes():
    """The probe's keys: a row of zeros and a one-hot row at its draft id (every score 0: index
    0), the maximum at ``V - 1``, a maximum twice (the first index wins; the second once the
    first is the draft id), residuals empty and negative with draft probabilities (index 0),
    the product in float64 with float64 noise, over a vocabulary of several blocks and one of 262144, with float32 and float64 noise."""
    from eaglefuzz.oracles import tensor_ops

    probe = fused._winners_probe("cpu")
    seen = set()
    for kt, kq, kd, target, draft, iq in probe:
        V = target.shape[1]
        (win,) = tensor_ops.recovered_chunk(kt, kq, kd, target, draft, iq)
        if draft is None:
            assert win[[1, 2, 3, 5, 6]].tolist() == [0, 0, V - 1, 7, V - 3]
            # a constant row (its id 0 the draft's) over noise whose largest values differ only in float64
            assert int(win[4]) == (10 if iq.dtype == torch.float64 else 1)
        else:
            assert win[[1, 7, 8]].tolist() == [0, 0, 0] and bool((kd == -1).all())
        seen.add((V, draft is None, iq.dtype))
    assert len(seen) == 8 and max(v for v, _, _ in seen) == 262144


def test_a_piece_that_differs_is_not_used_and_a_failed_compile_leaves_the_plain_one(fresh_pieces, monkeypatch):
    piece = fused.SLOTS
    monkeypatch.setattr(fused.torch, "compile", lambda fn, **kw: _off(piece, 2, "value"))
    with pytest.warns(UserWarning, match=r"oracle slots runs unfused on cpu \(it differs"):
        assert fresh_pieces._compiled_piece(piece, "cpu") is piece.plain
    fused._compiled_piece.cache_clear()

    def broken(fn, **kw):
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(fused.torch, "compile", broken)
    with pytest.warns(UserWarning, match=r"runs unfused on cpu \(RuntimeError: no compiler here\)"):
        assert fresh_pieces._compiled_piece(piece, "cpu") is piece.plain


@pytest.mark.parametrize("name", PIECES)
def test_a_piece_equal_to_the_plain_one_is_used(name, fresh_pieces, monkeypatch):
    piece = getattr(fused, name)
    same = lambda *a: piece.plain(*a)  # noqa: E731
    monkeypatch.setattr(fused.torch, "compile", lambda fn, **kw: same)
    assert fresh_pieces._compiled_piece(piece, "cpu").compiled is same


@pytest.mark.parametrize("name", PIECES)
def test_each_targets_oracle_takes_its_piece(name, monkeypatch):
    """The target's batched oracle calls :func:`~fused.piece_on` with its piece, and what that gives
    computes its writes: a piece switched for one that differs changes them."""
    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.engine import batch_of

    piece = getattr(fused, name)
    _dense(name, monkeypatch)
    dt = device_targets()[PIECES[name]]
    b = batch_of(dt, 0, 0, 4, "cpu", None)
    want = dt.oracle_batch(b)
    dt.release_tables()  # the epoch's winners found afresh
    b = batch_of(dt, 0, 0, 4, "cpu", None)
    asked = []
    module = sys.modules[type(dt).__module__]
    monkeypatch.setattr(module, "piece_on", lambda p, device: asked.append(p) or _off(p, CHANGED[name], "value"))
    got = dt.oracle_batch(b)
    assert asked == [piece]
    assert any(not torch.equal(g[1], w[1]) for g, w in zip(got.values(), want.values(), strict=True))


@pytest.mark.parametrize("name", PIECES)
def test_on_a_gpu_each_piece_is_compiled_and_the_plain_one_on_production_batches(name, needs, fresh_pieces, monkeypatch):
    """On a GPU, switched on, the compiled piece is used (no warning), and on two batches of its
    target's device draws the oracle's writes with it are the plain oracle's, bit for bit."""
    needs.gpu("the compiled oracle parts")
    import warnings

    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.engine import batch_of

    piece = getattr(fused, name)
    monkeypatch.setenv(piece.switch, "1")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn = fresh_pieces.piece_on(piece, "cuda")
    assert not [str(w.message) for w in seen if "unfused" in str(w.message)]
    assert fn is not piece.plain
    _dense(name, monkeypatch)
    dt = device_targets()[PIECES[name]]
    for i in range(2):
        b = batch_of(dt, 0, i, 64, "cuda", None)
        monkeypatch.setenv(piece.switch, "1")
        got = dt.oracle_batch(b)
        b.extra.get("winners", {}).clear()  # the recovered oracle's epoch memo: its winners found again
        monkeypatch.setenv(piece.switch, "0")
        want = dt.oracle_batch(b)
        assert got.keys() == want.keys()
        for out in want:
            for g, w in zip(got[out], want[out], strict=True):
                assert g.dtype == w.dtype and torch.equal(g, w), out
