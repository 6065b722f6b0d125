"""A device batch's check (``BatchArenas.mismatch``: the inputs and the masked outputs against
their sources, the rest against an expected copy of its part) counts exactly what comparing
every buffer with its whole expected contents counts (``device.mismatch_count``, with the
bounded elements within their bound), whatever the buffers hold: for every batched device
target, buffers as expected count 0, and elements changed anywhere (guard bands, inputs,
outputs written or not) count once each."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from eaglefuzz.harness.checking.device_mode import device_targets
from eaglefuzz.harness.checking.device_mode.engine import batch_of
from eaglefuzz.harness.targetkit import placement
from eaglefuzz.harness.targetkit.device import mismatch_count
from eaglefuzz.harness.targetkit.device_batch import BatchArenas

BATCHED = sorted(n for n, t in device_targets().items() if t.batch)


def _arenas(name: str, i: int) -> BatchArenas:
    dt = device_targets()[name]
    batch = batch_of(dt, 7, i, 3, "cpu", 4)
    return BatchArenas(batch, dt.oracle_batch(batch), "cpu")


def _whole(a: BatchArenas) -> int:
    """The count of comparing each whole buffer with its whole expected contents."""
    return int(mismatch_count(a.full, a.expected_buffers(), a.loose)) + sum(int(b.mismatch()) for b in a.big.values())


@pytest.mark.parametrize("name", BATCHED)
def test_the_check_counts_what_a_whole_comparison_counts(name):
    rng = np.random.default_rng(len(name))
    for i in (0, 5):
        a = _arenas(name, i)
        assert int(a.mismatch()) == _whole(a)  # as laid out: each written output element pre-filled
        expected = a.expected_buffers()
        for s in a.full:
            a.full[s].copy_(expected[s])  # a kernel that writes exactly what is expected
        assert int(a.mismatch()) == 0 == _whole(a)
        exact = {s: np.ones(b.numel(), dtype=bool) for s, b in a.full.items()}
        for s, loose in a.loose.items():  # a bounded element may take a changed bit within its bound
            for place, _, _ in loose:
                exact[s][place.cpu().numpy()] = False
        changed = 0
        for s, b in a.full.items():
            at = rng.choice(np.flatnonzero(exact[s]), size=min(40, int(exact[s].sum())), replace=False)
            at = np.unique(np.concatenate([at, [0, b.numel() - 1]]))  # both ends of the buffer: guard bands
            b[torch.from_numpy(at)] ^= 1
            changed += at.size
        assert int(a.mismatch()) == changed == _whole(a)


@pytest.mark.parametrize("name", ["target_dependent_ar_prepare_prefill_inputs_kernel", "_post_update_kernel"])
def test_the_launched_check_counts_what_the_host_check_counts(name, monkeypatch):
    """The Triton check (under the interpreter here, compiled on a GPU) counts what the host's does."""
    a = _arenas(name, 2)
    for b in a.full.values():
        b[torch.arange(0, b.numel(), 97)] ^= 1
    host = int(a.mismatch())
    assert host > 0
    real = placement.check_segments
    monkeypatch.setattr("eaglefuzz.harness.targetkit.device_batch.check_segments",
                        lambda *args, **kwargs: real(*args, **kwargs, launch=True))
    assert int(a.mismatch()) == host
