"""Record host batches: the device mode of a target checked by its record (``RecordDevice``).

Every target's own device module now draws and checks on the device; a ``RecordDevice`` is the
device mode a target gets from its record alone (a new target's, before it has a batched torch
oracle). These tests give a few targets that role (:data:`RECORDED`, in this process). A Triton
kernel's cases are drawn by its record, its first (NumPy) oracle run by the producers and laid
out in one ``HostBatchArenas`` per batch; the engine launches each case through the record's
launch and compares every element once. These tests run the batch path alone
(``cross_check_share=0``: only the first case of a run is cross-checked by the record's check),
so that a bug, a guard-band write or a missing write of a bounded float must be seen by the batch
comparison itself. On a CPU the kernels run under the Triton interpreter, on small cases.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from eaglefuzz.harness.checking.device_mode import device_targets
from eaglefuzz.harness.checking.device_mode.engine import device_fuzz_target
from eaglefuzz.harness.core.buffers import filled, raw
from eaglefuzz.harness.sources import implementations_for, parse_source, vllm
from eaglefuzz.harness.sources.file import FileSource
from eaglefuzz.harness.targetkit.device import (
    _SENTINEL,
    _TORCH,
    RecordDevice,
    _storage,
    record_device,
)

pytestmark = pytest.mark.kernel

LEFT_TO_RECORDS = sorted(n for n, t in device_targets().items() if t.checked_on == "record")
RECORDED = ("copy_and_expand_dflash_inputs_kernel", "_compute_local_logits_stats_kernel", "_temperature_kernel",
            "_gumbel_sample_kernel", "_insert_resampled_kernel", "compute_new_slot_mapping")
"""The targets these tests check as a ``RecordDevice`` would: aliased and in-place arrays,
bounded floats in place and as outputs, integer outputs, a torch function."""


@pytest.fixture(autouse=True)
def _as_records(monkeypatch):  # noqa: ANN001, ANN202
    """:data:`RECORDED`'s device modules replaced by their records' (this process only)."""
    from eaglefuzz.harness.targets import TARGETS, role

    for name in RECORDED:
        monkeypatch.setattr(role(name, "device"), "DEVICE", record_device(TARGETS[name]))


def _impls(name: str, needs):  # noqa: ANN001, ANN202
    needs.release_files()
    return implementations_for(parse_source(f"vllm-release:{vllm.PINNED_RELEASE}"), [name])


@pytest.fixture(autouse=True)
def _as_sent(monkeypatch):  # noqa: ANN001, ANN202
    """Every record host batch as the producer processes send it (pickled: the cases' inputs
    travel inside the expected half of its buffer), also where this process makes it."""
    from eaglefuzz.harness.checking.device_mode import producers

    made = producers.record_batch
    monkeypatch.setattr(producers, "record_batch", lambda *a, **k: [pickle.loads(pickle.dumps(hb)) for hb in made(*a, **k)])


def _run(name: str, impls, backend, examples: int = 8, seed: int = 0, **kw):  # noqa: ANN001, ANN003, ANN202
    return device_fuzz_target(name, impls, backend.device, examples=examples, seed=seed, cross_check_share=0.0,
                              workers=0, scale_cases=False, **kw)


def test_every_target_draws_on_the_device_and_a_record_batches_a_kernel():
    """No target's device mode is left to its record: each draws and checks on the device
    (test_device.py's BATCHED). A record's device mode puts a Triton kernel's cases in record
    host batches and checks a torch function's (no buffers of its own) a case at a time."""
    assert LEFT_TO_RECORDS == []
    assert device_targets()["_temperature_kernel"].checked_on == "record"  # this file's stand-in
    assert all(device_targets()[n].batches_on_host(None) for n in RECORDED if n != "compute_new_slot_mapping")
    assert not device_targets()["compute_new_slot_mapping"].batches_on_host(None)


@pytest.mark.parametrize("bug", ["gs_padded_row_cached", "tk_multiplies", "gs_temperature_twice", "dfl_block_table_row_0"])
def test_a_record_batch_catches_a_seeded_bug(bug, seeded_bugs_dir, backend, needs):
    """A seeded bug of a record-checked kernel (an in-place cache written for a padded row; an
    in-place table of bounded floats; bounded float outputs; integer outputs) is found by the
    batch comparison, confirmed by the record's check: a difference, not an oracle disagreement."""
    path = seeded_bugs_dir / f"{bug}.py"
    if not path.is_file():
        needs.release_files()
    impls = implementations_for(FileSource(path))
    (name,) = impls
    assert device_targets()[name].batches_on_host(impls[name])
    stats = _run(name, impls, backend, examples=24, seed=0, shrink=False)
    (finding,) = stats.findings
    assert finding.kind == "difference", finding.report()


@pytest.mark.parametrize("name", ["copy_and_expand_dflash_inputs_kernel", "_compute_local_logits_stats_kernel"])
def test_a_record_batch_catches_a_guard_band_write(name, monkeypatch, backend, needs):
    """A write into the guard band after a case's output is a difference of that case, which
    the record's check confirms (the same launch writes there alone)."""
    import torch

    impls = _impls(name, needs)
    record = device_targets()[name].record
    launch = type(record).launch

    def stray(self, kernel, tensors, case):  # noqa: ANN001, ANN202
        launch(self, kernel, tensors, case)
        out = tensors[next(iter(self.output_specs(case)))]
        torch.as_strided(out, (1,), (1,), out.storage_offset() + out.numel()).fill_(7)

    monkeypatch.setattr(type(record), "launch", stray)
    stats = _run(name, impls, backend, shrink=False)
    (finding,) = stats.findings
    assert finding.kind == "difference", finding.report()
    assert "guard band" in finding.report()


def _nudge(monkeypatch, name: str, array: str, ulps: int) -> None:  # noqa: ANN001
    """The record's launch, then every finite nonzero element of ``array`` it changed moved
    ``ulps`` units in the last place."""
    import torch

    record = device_targets()[name].record
    launch = type(record).launch

    def nudged(self, kernel, tensors, case):  # noqa: ANN001, ANN202
        t = tensors[array]
        before = t.clone()
        launch(self, kernel, tensors, case)
        move = (t != 0) & torch.isfinite(t) & (t.view(torch.int32) != before.view(torch.int32))
        t.view(torch.int32)[move] += ulps

    monkeypatch.setattr(type(record), "launch", nudged)


@pytest.mark.parametrize(("name", "array"), [("_temperature_kernel", "logits"),
                                             ("_compute_local_logits_stats_kernel", "target_local_sumexp")])
def test_bounded_floats_within_their_bound_pass_and_beyond_it_fail(name, array, monkeypatch, backend, needs):
    """A bounded float output one unit in the last place off is what
    the contract allows: no finding; a thousand units off is a difference."""
    impls = _impls(name, needs)
    _nudge(monkeypatch, name, array, 1)
    stats = _run(name, impls, backend, seed=1)
    assert not stats.findings, stats.findings[0].report()
    _nudge(monkeypatch, name, array, 1000)
    stats = _run(name, impls, backend, seed=1, shrink=False)
    (finding,) = stats.findings
    assert finding.kind == "difference", finding.report()


def test_a_bounded_output_left_unwritten_is_a_difference(monkeypatch, backend, needs):
    """A bounded float output the kernel does not write holds the sentinel, never a value
    within the bound (as a write of the expected value with its lowest bit flipped would)."""
    name = "_compute_local_logits_stats_kernel"
    impls = _impls(name, needs)
    record = device_targets()[name].record
    launch = type(record).launch

    def forgets(self, kernel, tensors, case):  # noqa: ANN001, ANN202
        keep = tensors["target_local_sumexp"].clone()
        launch(self, kernel, tensors, case)
        tensors["target_local_sumexp"].view(-1)[0] = keep.view(-1)[0]

    monkeypatch.setattr(type(record), "launch", forgets)
    stats = _run(name, impls, backend, shrink=False)
    (finding,) = stats.findings
    assert finding.kind == "difference", finding.report()


def test_a_wrong_record_batch_expectation_is_an_oracle_disagreement(monkeypatch, backend, needs):
    """The batch's expectation is checked as a host batch's: one that expects what the record's
    check does not (a written element off by one) makes its case differ while the NumPy and
    Numba oracles pass the kernel: an oracle disagreement, never a kernel finding."""
    name = "copy_and_expand_dflash_inputs_kernel"
    impls = _impls(name, needs)
    right = RecordDevice.host_expectation

    def wrong(self, case):  # noqa: ANN001, ANN202
        dc, writes, rx = right(self, case)
        n, (index, value) = next((n, w) for n, w in writes.items() if w[0].size)
        writes[n] = (index, value + 1)
        return dc, writes, rx

    monkeypatch.setattr(RecordDevice, "host_expectation", wrong)
    stats = _run(name, impls, backend)
    (finding,) = stats.findings
    assert finding.kind == "oracle disagreement", finding.report()
    assert "record host batch" in finding.report()


@pytest.mark.parametrize("name", ["copy_and_expand_dflash_inputs_kernel", "_temperature_kernel", "_insert_resampled_kernel"])
def test_record_batches_hold_the_cases_the_record_draws(name, monkeypatch):
    """A record host batch holds the cases a case at a time draws (the same seeds), in order,
    cut where their arrays pass ``RECORD_BATCH_BYTES``; its expected buffers hold, for every
    output and in-place input, the record check's expectation (its first oracle's buffers)."""
    from eaglefuzz.harness.checking.device_mode import producers
    from eaglefuzz.harness.generation.strategies import derive_seed

    dt = device_targets()[name]
    monkeypatch.setattr(producers, "RECORD_BATCH_BYTES", 1 << 12)
    batches = [pickle.loads(pickle.dumps(hb)) for hb in producers.record_batch(name, 7, list(range(2, 8)), 8)]
    got = [(hb, k) for hb in batches for k in range(len(hb))]
    assert len(got) == 6 and len(batches) > 1
    for i, (hb, k) in zip(range(2, 8), got, strict=True):
        case = dt.draw_case(np.random.default_rng(derive_seed(7, name, "device", i)), 8)
        rx = hb.record[k]
        dc = hb.case(k)
        inputs = dc.inputs | rx.inputs  # an input the launch changes: as drawn
        assert dt.to_case(dc).note == case.note and dc.scalars == case.scalars
        assert inputs.keys() == case.arrays.keys()
        assert all(np.array_equal(raw(inputs[n]), raw(a)) for n, a in case.arrays.items())
        e = dt.record.expectation(case)
        specs = dt.record.output_specs(case)
        for n, buf in next(iter(e.results.values())).items():
            size = case.arrays[n].size if n in case.arrays else int(np.prod(specs[n][1]))
            g = (buf.size - size) // 2
            want, have = raw(buf[g : g + size]), raw(hb.array(k, n, expected=True))
            if n in case.arrays:  # an in-place input, or one an output is written into: every element
                assert np.array_equal(have, want), n
                continue
            sentinel = _SENTINEL[_storage(_TORCH[specs[n][0]])]
            written = want != raw(filled(specs[n][0], (1,), e.fills[n]))[0]
            if n in rx.loose:  # bounded: the sentinel in the buffers, the values apart
                at, expected, _, _ = rx.loose[n]
                assert np.array_equal(raw(expected), want[at]) and written[at].all(), n
                assert (have[at] == sentinel).all(), n
                written[at] = False
                have, want, written = np.delete(have, at), np.delete(want, at), np.delete(written, at)
            assert np.array_equal(have[written], want[written]), n
            assert (have[~written] == sentinel).all(), n


def test_producer_processes_make_the_same_record_batches():
    """A record target's batches made by a worker process (handed over in a shared-memory slot,
    or pickled) hold what those made in process hold, case for case and byte for byte, with
    each case's expectation and features: the seed alone decides a case (determinism)."""
    from eaglefuzz.harness.checking.device_mode import producers
    from eaglefuzz.harness.checking.device_mode.producers import HostCases

    name = "_temperature_kernel"  # an in-place table, several dtypes
    runs = []
    for workers in (0, 1):
        cases = HostCases(name, seed=5, first=3, step=2, max_requests=8, workers=workers, batch=3, limit=9)
        try:
            runs.append([(hb, [hb.case(k) for k in range(len(hb))], bytes(hb.host)) for hb in cases])
        finally:
            cases.close()
            producers._shutdown()  # the suite ends the processes it starts
    assert [len(cs) for _, cs, _ in runs[0]] == [len(cs) for _, cs, _ in runs[1]] == [3, 3, 3]
    for (hb0, cs0, host0), (hb1, cs1, host1) in zip(*runs, strict=True):
        assert host0 == host1 and hb0.features == hb1.features and hb0.toured == hb1.toured
        for dc0, dc1, rx0, rx1 in zip(cs0, cs1, hb0.record, hb1.record, strict=True):
            assert dc0.scalars == dc1.scalars and dc0.outputs == dc1.outputs and rx0.tokens == rx1.tokens
            assert rx0.inputs.keys() == rx1.inputs.keys() and rx0.inputs
            for n in dc0.inputs:
                np.testing.assert_array_equal(dc0.inputs[n], dc1.inputs[n], strict=True)
            for n in rx0.inputs:
                np.testing.assert_array_equal(rx0.inputs[n], rx1.inputs[n], strict=True)
