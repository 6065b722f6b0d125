"""Settling a verification batch's windows with every re-keying in one call
(``verify_chain._attempts_at_once``, the default on a CUDA device) leaves the same seeds,
placeholder drafts and results as one call an attempt (``settle_step``'s order)."""

from __future__ import annotations

import copy

import pytest
import torch

from eaglefuzz.harness.targetkit import verify_chain as vc
from eaglefuzz.harness.targetkit.device_batch import cases_of
from eaglefuzz.harness.targetkit.verify_batch import MANY_REQUESTS, draw_steps


def _same(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Equal element by element, NaN where NaN, with the dtype (floats by their bits)."""
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.dtype.is_floating_point:
        bits = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16}[x.dtype]
        return torch.equal(x.view(bits), y.view(bits))
    return torch.equal(x, y)


def _results_equal(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and _same(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_results_equal(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(map(_results_equal, a, b))
    return a == b


def _batch(seed: int, kind: str, k: int = 24) -> tuple[vc.Steps, object]:
    st = draw_steps((seed, seed), "cpu", k, 12, kind, tour=MANY_REQUESTS, same=False, draft=True)
    return st, vc.rejection_batch(st)


def _window_of_seed(x, q, among):  # noqa: ANN001, ANN202
    """A window that reads each request's own seed and rows alone: out of it for one seed in
    four; a request of 3 or 7 drafts never out of it."""
    s = x.cat["seed"][q.state]
    w = ((s * 0x2545F4914F6CDD1D) >> 33) % 4 != 0
    return w | (q.d % 4 == 3), s.clone()


def test_at_once_matches_one_call_an_attempt_on_a_window_of_the_seeds_alone():
    st, b = _batch(3, "ordinary")
    calls = []

    def counted(x, q, among):  # noqa: ANN001, ANN202
        calls.append(x is b2)
        return _window_of_seed(x, q, among)

    b1, b2 = copy.deepcopy(b), copy.deepcopy(b)
    before = int((b.cat["draft_sampled"] == -1).sum())
    got1 = vc._settle(b1, st, _window_of_seed, at_once=True)
    got2 = vc._settle(b2, st, counted, at_once=False)
    # the condition under test happened: requests settled after several re-keyings, and others never
    assert len(calls) == vc.ATTEMPTS + 1, calls
    assert int((b2.cat["draft_sampled"] == -1).sum()) > before
    assert got1 is None and got2 is None  # placeholders: the caller computes the chain again
    for n in b.cat:
        assert _same(b1.cat[n], b2.cat[n]), n
    assert not _same(b1.cat["seed"], b.cat["seed"])  # re-keyed


@pytest.mark.parametrize(("seed", "kind"), [(11, "ordinary"), (13, "ordinary"), (1, "many_requests")],
                         ids=["settled-after-re-keying", "placeholders", "many-requests"])
def test_at_once_matches_one_call_an_attempt_on_the_chain(seed, kind):
    st, b = _batch(seed, kind)
    b1, b2 = copy.deepcopy(b), copy.deepcopy(b)
    calls = []
    real = vc.chain_results

    def counted(*a, **k):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return real(*a, **k)

    vc_settle = vc._settle
    try:
        vc._settle = lambda x, s, d: vc_settle(x, s, d, at_once=True)
        got1 = vc.settle_chain(b1, st)
        vc._settle = lambda x, s, d: vc_settle(x, s, d, at_once=False)
        vc.chain_results = counted
        got2 = vc.settle_chain(b2, st)
    finally:
        vc._settle, vc.chain_results = vc_settle, real
    assert len(calls) > 2  # the batch needed re-keying past its first attempt
    assert _results_equal(got1, got2)
    for n in b.cat:
        assert _same(b1.cat[n], b2.cat[n]), n


def test_cases_of_copies_each_chosen_case_whole():
    _, b = _batch(13, "ordinary", k=6)
    pick = [4, 0, 4, 2]
    c = cases_of(b, pick)
    assert len(c) == len(pick) and c.scalars == [b.scalars[i] for i in pick]
    for j, i in enumerate(pick):
        mine, theirs = c.case(j), b.case(i)
        assert mine.inputs.keys() == theirs.inputs.keys()
        for n in mine.inputs:
            assert _same(mine.inputs[n], theirs.inputs[n]), n
    c.cat["seed"].add_(1)  # a copy: the batch's own arrays are untouched
    assert not _same(c.case(1).inputs["seed"], b.case(0).inputs["seed"])


@pytest.mark.parametrize("name", ["_rejection_kernel", "_resample_kernel", "_insert_resampled_kernel"])
def test_on_a_gpu_at_once_draws_the_batches_one_call_an_attempt_draws(name, needs):
    """On a CUDA device, where re-keying at once is the default, a campaign's batches (seed 0,
    the GPU's sizes) are those one call an attempt draws, every array bit for bit: four batches
    of each target, among them ones re-keyed (``_insert_resampled_kernel``'s batch 1 is re-keyed
    to the limit)."""
    needs.gpu("re-keying at once on the device")
    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.engine import batch_of

    dt = device_targets()[name]
    real = vc._settle
    try:
        for i in range(4):
            got = {}
            for at_once in (True, False):
                vc._settle = lambda x, s, d, at_once=at_once: real(x, s, d, at_once=at_once)
                got[at_once] = batch_of(dt, 0, i, dt.batch, "cuda", None)
            a, b = got[True], got[False]
            assert a.cat.keys() == b.cat.keys()
            for n in a.cat:
                assert _same(a.cat[n], b.cat[n]), (i, n)
    finally:
        vc._settle = real
